"""The byte-level context-free grammar every engine consumes, and lowering into it.

Symbols are ints: ``>= 0`` a nonterminal, ``< 0`` a terminal ``-(t + 1)`` where terminal
``t`` is one byte out of a 256-bit class (``Grammar.terminals[t]``). Literals become one
terminal per byte; character classes become UTF-8 byte-class sequences; ``?``, ``*``, ``+``,
``{m,n}`` and nested choices become helper rules, shared when their bodies are equal so that
the same construct in two places does not turn into two (conflicting) rules. Repetition is
left-recursive (``h ::= ε | h x``): constant stack depth for the LR parser and linear work
for Earley."""

from __future__ import annotations

from typing import Any

from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.syntax_tree import (
    CharClass,
    Choice,
    Expr,
    Literal,
    Repeat,
    RuleRef,
    RuleSet,
    Sequence,
)
from cad.grammar.cfg.utf8_ranges import complement, utf8_sequences

Production = tuple[int, tuple[int, ...]]

CLASS_BYTES = 32
"""Bytes of one terminal's 256-bit class mask in the native core's packed form."""


def terminal_symbol(index: int) -> int:
    """The symbol for terminal ``index``."""
    return -(index + 1)


def terminal_index(symbol: int) -> int:
    """The terminal index behind a (negative) terminal symbol."""
    return -symbol - 1


def mask_bytes(mask: int) -> list[int]:
    """The byte values set in a 256-bit class mask."""
    return [byte for byte in range(256) if mask >> byte & 1]


class Grammar:
    """Productions over nonterminal ids and byte-class terminals, with a start symbol.

    A grammar the native lowering made (:meth:`from_native`) stays in native form until its
    lists are read: the engines are built from that form directly, so a front end whose
    grammar is only compiled never builds the lists in Python."""

    def __init__(
        self,
        names: list[str],
        productions: list[Production],
        terminals: list[int],
        start: int,
    ) -> None:
        self._names: list[str] | None = names
        self._productions: list[Production] | None = productions
        self._terminals: list[int] | None = terminals
        self._by_lhs: list[list[int]] | None = None
        self.start = start
        self.native: Any = None
        """The native core's ``LoweredGrammar`` behind this grammar, if it made it."""

    @classmethod
    def from_native(cls, native: Any) -> Grammar:
        """The grammar a ``_native.LoweredGrammar`` holds, its lists built when first read."""
        grammar = cls([], [], [], native.start)
        grammar._names = grammar._productions = grammar._terminals = None
        grammar.native = native
        return grammar

    @property
    def names(self) -> list[str]:
        """One name per nonterminal."""
        if self._names is None:
            self._names = self.native.names
        return self._names

    @property
    def productions(self) -> list[Production]:
        """``(lhs, rhs)`` pairs, in order."""
        if self._productions is None:
            self._productions = self.native.productions()
        return self._productions

    @property
    def terminals(self) -> list[int]:
        """Each terminal's byte class as a 256-bit mask (bit ``b`` set: byte ``b`` matches)."""
        if self._terminals is None:
            packed = self.native.terminals()
            self._terminals = [
                int.from_bytes(packed[at : at + CLASS_BYTES], "little")
                for at in range(0, len(packed), CLASS_BYTES)
            ]
        return self._terminals

    @property
    def nonterminal_count(self) -> int:
        """How many nonterminals there are, without building the names in Python."""
        return len(self._names) if self._names is not None else self.native.nonterminal_count

    @property
    def by_lhs(self) -> list[list[int]]:
        """The production indices of each nonterminal."""
        if self._by_lhs is None:
            self._by_lhs = [[] for _ in self.names]
            for index, (lhs, _) in enumerate(self.productions):
                self._by_lhs[lhs].append(index)
        return self._by_lhs

    def nullable(self) -> list[bool]:
        """Which nonterminals derive the empty string."""
        result = [False] * len(self.names)
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.productions:
                if not result[lhs] and all(s >= 0 and result[s] for s in rhs):
                    result[lhs] = changed = True
        return result

    def describe(self) -> str:
        """The grammar as readable text (terminals as byte ranges), for errors and docs."""
        lines = []
        for lhs, rhs in self.productions:
            body = " ".join(self._symbol_text(s) for s in rhs) or "ε"
            lines.append(f"{self.names[lhs]} ::= {body}")
        return "\n".join(lines)

    def _symbol_text(self, symbol: int) -> str:
        if symbol >= 0:
            return self.names[symbol]
        values = mask_bytes(self.terminals[terminal_index(symbol)])
        if len(values) == 1:
            return repr(bytes(values))[1:]
        return f"[{values[0]:#04x}..{values[-1]:#04x}:{len(values)}]"


MAX_SYMBOLS = 1_000_000
"""Symbols (bytes of literals and classes, rule references, written-out repetitions) any
grammar may lower to; see :func:`symbol_budget`."""
SYMBOLS_PER_CHARACTER = 8
"""Symbols a grammar may lower to for each character of its source, beyond ``MAX_SYMBOLS``."""


def symbol_budget(source_length: int) -> int:
    """The most symbols a grammar written in ``source_length`` characters may lower to: a
    counted repetition (``x{m,n}``, ``maxItems``) is written out in full, so a few
    characters could otherwise ask for billions."""
    return MAX_SYMBOLS + SYMBOLS_PER_CHARACTER * source_length


def lower(rule_set: RuleSet, max_symbols: int | None = None) -> Grammar:
    """Turn named expressions into a byte-level Grammar (start rule first). Past
    ``max_symbols`` symbols (None: ``MAX_SYMBOLS``) lowering stops with GrammarError,
    checked before a repetition is written out."""
    return _Lowering(rule_set, MAX_SYMBOLS if max_symbols is None else max_symbols).run()


class _Lowering:
    def __init__(self, rule_set: RuleSet, max_symbols: int) -> None:
        names = [rule_set.start] + [n for n in rule_set.rules if n != rule_set.start]
        self.rule_set = rule_set
        self.names = names
        self.ids = {name: index for index, name in enumerate(names)}
        self.productions: list[Production] = []
        self.terminals: list[int] = []
        self.terminal_ids: dict[int, int] = {}
        self.helpers: dict[tuple[object, ...], int] = {}
        self.char_classes: dict[CharClass, tuple[int, ...]] = {}
        self.char_class_ids: dict[int, tuple[CharClass, tuple[int, ...]]] = {}
        self.max_symbols = max_symbols
        self.symbols = 0

    def spend(self, count: int) -> None:
        """Count ``count`` more symbols written; GrammarError once past the budget."""
        self.symbols += count
        if self.symbols > self.max_symbols:
            raise GrammarError(
                f"the grammar expands to more than {self.max_symbols:,} symbols (counted "
                "repetitions such as x{m,n} are written out in full); lower the counts or "
                "use * and +"
            )

    def run(self) -> Grammar:
        for name in list(self.names[: len(self.rule_set.rules)]):
            expr = self.rule_set.rules[name]
            options = expr.options if isinstance(expr, Choice) else (expr,)
            for option in options:
                self.productions.append((self.ids[name], self.sequence(option)))
        return Grammar(self.names, self.productions, self.terminals, 0)

    def terminal(self, mask: int) -> int:
        if mask not in self.terminal_ids:
            self.terminal_ids[mask] = len(self.terminals)
            self.terminals.append(mask)
        return terminal_symbol(self.terminal_ids[mask])

    def new_nonterminal(self, hint: str) -> int:
        self.names.append(f"{hint}#{len(self.names)}")
        return len(self.names) - 1

    def helper(self, alternatives: tuple[tuple[int, ...], ...], hint: str) -> int:
        key = ("alt", alternatives)
        if key not in self.helpers:
            nonterminal = self.new_nonterminal(hint)
            self.helpers[key] = nonterminal
            self.productions.extend((nonterminal, rhs) for rhs in alternatives)
        return self.helpers[key]

    def repetition(self, body: tuple[int, ...], at_least_one: bool) -> int:
        key = ("plus" if at_least_one else "star", body)
        if key not in self.helpers:
            nonterminal = self.new_nonterminal("plus" if at_least_one else "star")
            self.helpers[key] = nonterminal
            self.productions.append((nonterminal, body if at_least_one else ()))
            self.productions.append((nonterminal, (nonterminal, *body)))
        return self.helpers[key]

    def sequence(self, expr: Expr) -> tuple[int, ...]:
        kind = type(expr)  # exact types: the syntax tree's classes are final
        if kind is Literal:
            terminal = self.terminal
            data = expr.text.encode("utf-8")
            self.spend(len(data))
            return tuple([terminal(1 << byte) for byte in data])
        if kind is CharClass:
            return self.char_class(expr)
        if kind is RuleRef:
            return (self.ids[expr.name],)
        if kind is Sequence:
            symbols: list[int] = []
            for part in expr.parts:
                symbols += self.sequence(part)
            return tuple(symbols)
        if kind is Choice:
            alternatives = tuple(dict.fromkeys([self.sequence(o) for o in expr.options]))
            if len(alternatives) == 1:
                return alternatives[0]
            return (self.helper(alternatives, "group"),)
        return self.repeat(expr)

    def repeat(self, expr: Repeat) -> tuple[int, ...]:
        body = self.sequence(expr.body)
        if not body:
            return ()
        copies = expr.low if expr.high is None else expr.high
        self.spend(len(body) * copies + (copies - expr.low))
        if expr.high is None:
            if expr.low == 0:
                return (self.repetition(body, at_least_one=False),)
            return body * (expr.low - 1) + (self.repetition(body, at_least_one=True),)
        tail: tuple[int, ...] = ()
        for _ in range(expr.high - expr.low):
            tail = (self.helper(((), body + tail), "opt"),)
        return body * expr.low + tail

    def char_class(self, expr: CharClass) -> tuple[int, ...]:
        # by identity first: a class object recurs often, and hashing its ranges costs more
        # (the entry holds the object, so its id cannot be reused while this lowering runs)
        known = self.char_class_ids.get(id(expr))
        if known is not None:
            return known[1]
        found = self.char_classes.get(expr)
        if found is None:
            found = self.char_classes[expr] = self.lower_char_class(expr)
        self.char_class_ids[id(expr)] = (expr, found)
        return found

    def lower_char_class(self, expr: CharClass) -> tuple[int, ...]:
        ranges = complement(expr.ranges) if expr.negated else expr.ranges
        single_byte = 0
        alternatives: list[tuple[int, ...]] = []
        for byte_ranges in utf8_sequences(ranges):
            masks = [_range_mask(low, high) for low, high in byte_ranges]
            if len(masks) == 1:
                single_byte |= masks[0]
            else:
                alternatives.append(tuple(self.terminal(mask) for mask in masks))
        if single_byte:
            alternatives.insert(0, (self.terminal(single_byte),))
        if not alternatives:
            return (self.helper((), "never"),)
        if len(alternatives) == 1:
            return alternatives[0]
        return (self.helper(tuple(alternatives), "char"),)


def _range_mask(low: int, high: int) -> int:
    return ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)
