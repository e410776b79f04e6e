"""The Python lexer: maximal-munch automata (:mod:`python_lexemes`) plus a mode stack for
f-strings, tokenised as PEP 701 describes.

A lexer *context* is ``(modes, state, run)``: the mode stack, the state of the automaton
that its top selects and (before Python 3.12 only) how many quote characters closing an
enclosing triple-quoted f-string were just read, interned as one int. Modes (innermost
last):

* none — ordinary code;
* ``("f", quote, triple, raw)`` — the literal text of an f-string;
* ``("x", depth, level, converted)`` — the expression of a replacement field (code),
  ``depth`` brackets open inside it, ``level`` format specs around it, ``converted`` right
  after a ``!r`` conversion;
* ``("s", quote, triple, raw, level)`` — a format spec.

Before Python 3.12 an f-string was first read as one plain string token, and the text of a
replacement field was then checked and parsed apart (PEP 498): the modes stay the same, and
the bytes the old reading refuses are refused on top (:meth:`PythonLexer.forbidden`).

Reading bytes yields *events* for the layer above (:mod:`python_layout`): a token group
read at the top level (``group``), the same inside an f-string (``group + groups``, which
leaves the bracket depth of the layout alone), or a layout lexeme (``2 * groups + k`` for
``SP``, ``TAB``, ``FF``, ``NL``, ``COMMENT``, ``CONT``). A token *group* is the tuple of
grammar tokens a lexeme stands for: a soft keyword is itself and a name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from cad.grammar.syntax.lalr import Tables
from cad.grammar.syntax.lexer_dfa import DEAD, Dfa
from cad.grammar.syntax.python_lexemes import (
    KEYWORDS,
    OPERATORS,
    QUOTE_KINDS,
    SOFT_KEYWORDS,
    code_lexer,
    fstart_label,
    fstring_lexer,
    legacy_spec_lexer,
    spec_lexer,
)

LAYOUT_LEXEMES = ("SP", "TAB", "FF", "NL", "COMMENT", "CONT")
OPENERS = ("'('", "'['", "'{'")
CLOSERS = ("')'", "']'", "'}'")
MAX_RUN = 1024
"""Longest run of spaces (or tabs) one run event stands for."""
MAX_SPEC_LEVEL = 2
"""Replacement fields may sit in format specs two deep, no deeper (one before 3.12)."""
MAX_INT_DIGITS = 4300
"""Most digits of a decimal integer literal (underscores aside) that the compiler converts:
the interpreter's default integer string conversion limit (``sys.int_info``), which the
compiler applies to nonzero decimal literals only (not to floats, imaginary numbers, zero
or binary, octal and hexadecimal literals)."""
_DIGIT_BYTES = b"0123456789"

Modes = tuple[tuple, ...]


@dataclass(frozen=True)
class _Automaton:
    """A DFA as Python lists for fast stepping, and which states cannot be extended."""

    dfa: Dfa
    rows: list[list[int]]
    accept: list[int]
    final: list[bool]
    reachable: list[frozenset[int]]

    @classmethod
    def of(cls, dfa: Dfa) -> _Automaton:
        rows = dfa.transitions.tolist()
        return cls(
            dfa,
            rows,
            dfa.accept.tolist(),
            [all(t == DEAD for t in row) for row in rows],
            dfa.completions(),
        )


class TokenGroups:
    """Grammar tokens and the groups lexemes map to."""

    def __init__(self, tables: Tables) -> None:
        names = tables.tokens
        self.tables = tables
        self.token_ids = {name: index for index, name in enumerate(names)}
        self.groups: list[tuple[int, ...]] = []
        self._group_ids: dict[tuple[int, ...], int] = {}

        def group(*token_names: str) -> int:
            ids = tuple(self.token_ids[n] for n in token_names if n in self.token_ids)
            found = self._group_ids.get(ids)
            if found is None:
                found = self._group_ids[ids] = len(self.groups)
                self.groups.append(ids)
            return found

        self.by_label: dict[str, int] = {}
        for keyword in KEYWORDS:
            self.by_label[keyword] = group(f"'{keyword}'")
        for keyword in SOFT_KEYWORDS:
            self.by_label[keyword] = group(f'"{keyword}"', "NAME", "STRICT_NAME")
        self.by_label["_"] = group('"_"', "NAME")
        self.by_label["NAME"] = group("NAME", "STRICT_NAME")
        for kind in ("NUMBER", "IMAG", "STRING", "BYTES"):
            self.by_label[kind] = group(kind)
        self.by_label["INT"] = group("NUMBER")
        for operator in OPERATORS:
            self.by_label[operator] = group(f"'{operator}'")
        self.fstring_start = group("FSTRING_START")
        self.fstring_middle = group("FSTRING_MIDDLE")
        self.fstring_end = group("FSTRING_END")
        self.field_open = group("FIELD_OPEN")
        self.field_close = group("FIELD_CLOSE")
        self.spec_colon = group("FSPEC")
        self.conversion = group("CONV")
        self.openers = frozenset(self.by_label[op[1:-1]] for op in OPENERS)
        self.closers = frozenset(self.by_label[op[1:-1]] for op in CLOSERS)
        self.count = len(self.groups)
        self.layout_base = 2 * self.count
        self.run_base = self.layout_base + len(LAYOUT_LEXEMES)

    def layout(self, name: str) -> int:
        """The event of a layout lexeme."""
        return self.layout_base + LAYOUT_LEXEMES.index(name)

    def run(self, name: str, count: int) -> int:
        """The event of ``count`` (1..MAX_RUN) spaces or tabs in a row (``SP`` or ``TAB``):
        one step for the layout instead of ``count``."""
        return self.run_base + ("SP", "TAB").index(name) * MAX_RUN + count

    def run_of(self, event: int) -> tuple[str, int] | None:
        """``(kind, count)`` of a run event, None for other events."""
        if event < self.run_base:
            return None
        kind, count = divmod(event - self.run_base, MAX_RUN)
        return ("SP", "TAB")[kind], count


_ERROR = None


def _automaton_builders(version: tuple[int, int]) -> dict[str, Callable[[], Dfa]]:
    """How each automaton of the lexer for ``version`` is built, by name."""
    builders: dict[str, Callable[[], Dfa]] = {"code": code_lexer}
    for quote, triple in QUOTE_KINDS:
        builders[f"spec {quote[0]} {triple:d}"] = partial(spec_lexer, quote[0], triple)
        for raw in (False, True):
            key = f"{quote[0]} {triple:d} {raw:d}"
            builders[f"fstring {key}"] = partial(fstring_lexer, quote[0], triple, raw)
            if version < (3, 12):
                builders[f"legacy {key}"] = partial(legacy_spec_lexer, quote[0], triple, raw)
    return builders


def automaton_names(version: tuple[int, int]) -> list[str]:
    """The names of the automata the lexer for ``version`` reads with."""
    return list(_automaton_builders(version))


def build_automata(version: tuple[int, int]) -> dict[str, Dfa]:
    """Every automaton the lexer for ``version`` reads with, by name (built; the code
    automaton takes most of a second)."""
    return {name: build() for name, build in _automaton_builders(version).items()}


class PythonLexer:
    """Interned lexer contexts and the step function over bytes."""

    def __init__(
        self,
        groups: TokenGroups,
        version: tuple[int, int] = (3, 13),
        automata: Mapping[str, Dfa] | None = None,
    ) -> None:
        """The lexer of ``version`` over ``automata`` (by :func:`automaton_names`; built
        when not given)."""
        self.groups = groups
        self.pep701 = version >= (3, 12)
        self.max_spec_level = MAX_SPEC_LEVEL if self.pep701 else 1
        self._forbidden_cache: dict[Modes, frozenset[int]] = {}
        dfas = build_automata(version) if automata is None else automata
        self.automata = {name: dfas[name] for name in automaton_names(version)}
        self.code = _Automaton.of(dfas["code"])
        self.fstrings = {
            (quote[0], triple, raw): _Automaton.of(dfas[f"fstring {quote[0]} {triple:d} {raw:d}"])
            for quote, triple in QUOTE_KINDS
            for raw in (False, True)
        }
        self.specs = {
            (quote[0], triple): _Automaton.of(dfas[f"spec {quote[0]} {triple:d}"])
            for quote, triple in QUOTE_KINDS
        }
        self.legacy_specs = {
            (quote[0], triple, raw): _Automaton.of(dfas[f"legacy {quote[0]} {triple:d} {raw:d}"])
            for quote, triple in QUOTE_KINDS
            for raw in (False, True)
            if not self.pep701
        }
        self._legacy_cache: dict[Modes, _LegacyRule] = {}
        self.contexts: list[tuple[Modes, int, int]] = []
        self._context_ids: dict[tuple[Modes, int, int], int] = {}
        self._completions: dict[int, frozenset[tuple[int, ...]]] = {}
        self.initial = self.context((), 0)
        self._code_actions = self._label_actions()
        self._fstart = {
            self.code.dfa.labels.index(fstart_label(quote, raw)): (quote[0], triple, raw)
            for quote, triple in QUOTE_KINDS
            for raw in (False, True)
        }
        labels = self.code.dfa.labels
        self._layout = {labels.index(name): groups.layout(name) for name in LAYOUT_LEXEMES}
        self._femptly = labels.index("FEMPTY")
        self._two_dots = labels.index("..")
        self._dot = groups.by_label["."]
        self._conv = labels.index("CONV")
        self._colon_group = groups.by_label[":"]
        self._close_brace = groups.by_label["}"]
        self._int_label = labels.index("INT")
        self.int_states = self._reachable(
            [self.code.rows[0][byte] for byte in _DIGIT_BYTES[1:]], _DIGIT_BYTES + b"_"
        )
        """States of the code automaton inside a nonzero decimal integer (whose digits the
        recogniser counts beside the context)."""
        self.int_digit_state = self.code.rows[self.code.rows[0][ord("1")]][ord("0")]
        """The state after a digit of such an integer."""

    def context(self, modes: Modes, state: int, run: int = 0) -> int:
        """The id of lexer context ``(modes, state, run)``."""
        key = (modes, state, run)
        found = self._context_ids.get(key)
        if found is None:
            found = self._context_ids[key] = len(self.contexts)
            self.contexts.append(key)
        return found

    def reset_contexts(self) -> None:
        """Forget every interned context but the initial one (which keeps its id)."""
        self.contexts.clear()
        self._context_ids.clear()
        self._completions.clear()
        self.initial = self.context((), 0)

    def _reachable(self, starts: list[int], through: bytes) -> frozenset[int]:
        """The code automaton's states reached from ``starts`` by bytes of ``through``."""
        seen = set(starts)
        agenda = list(starts)
        while agenda:
            row = self.code.rows[agenda.pop()]
            for byte in through:
                following = row[byte]
                if following != DEAD and following not in seen:
                    seen.add(following)
                    agenda.append(following)
        return frozenset(seen)

    def automaton(self, modes: Modes) -> _Automaton:
        """The automaton the innermost mode reads with."""
        if not modes or modes[-1][0] == "x":
            return self.code
        top = modes[-1]
        if top[0] == "f":
            return self.fstrings[top[1:4]]
        if not self.pep701:
            return self.legacy_specs[top[1:4]]
        return self.specs[top[1:3]]

    def _label_actions(self) -> list[int | None]:
        labels = self.code.dfa.labels
        return [self.groups.by_label.get(label) for label in labels]

    # -- stepping ------------------------------------------------------------------------------

    def lex(self, context: int, data: bytes, digits: int = 0) -> tuple[list[int], int, int] | None:
        """Read ``data`` from ``context``: the events of every lexeme completed on the way,
        the context after it and the digits of the decimal integer then in progress (0 when
        none is), or None if the bytes cannot be Python. ``digits``: the digits of the
        decimal integer in progress in ``context``; one completed with more than
        :data:`MAX_INT_DIGITS` is refused."""
        modes, state, run = self.contexts[context]
        automaton = self.automaton(modes)
        events: list[int] = []
        legacy = not self.pep701
        start = -1  # where the lexeme in progress began in data (-1: before it)
        for index, byte in enumerate(data):
            if state:
                following = automaton.rows[state][byte]
                if following != DEAD:
                    if legacy and modes:
                        run = self._legacy_step(modes, byte, run, False)
                        if run < 0:
                            return None
                    state = following
                    if automaton.final[state]:
                        done = self._emit(modes, automaton, automaton.accept[state], events)
                        if done is None:
                            return None
                        modes, state = done, 0
                        automaton = self.automaton(modes)
                    continue
                label = automaton.accept[state]
                if (
                    label == self._int_label
                    and automaton is self.code
                    and _digits(data[max(start, 0) : index]) + (digits if start < 0 else 0)
                    > MAX_INT_DIGITS
                ):
                    return None
                done = self._emit(modes, automaton, label, events)
                if done is None:
                    return None
                modes = done
                automaton = self.automaton(modes)
            if legacy:
                run = self._legacy_step(modes, byte, run, True) if modes else 0
                if run < 0:
                    return None
            started = self._start(modes, automaton, byte, events)
            if started is None:
                return None
            modes, automaton, state = started
            start = index
        if automaton is self.code and state in self.int_states:
            digits = _digits(data[max(start, 0) :]) + (digits if start < 0 else 0)
        else:
            digits = 0
        return events, self.context(modes, state, run), digits

    def completions(self, context: int) -> frozenset[tuple[int, ...]]:
        """What the lexeme pending in ``context`` may still become: the event tuples of
        every lexeme it can complete into (empty when nothing is pending)."""
        found = self._completions.get(context)
        if found is None:
            modes, state, _ = self.contexts[context]
            if state == 0:
                found = frozenset({()})
            else:
                automaton = self.automaton(modes)
                readings = set()
                for label in automaton.reachable[state]:
                    events: list[int] = []
                    if self._emit(modes, automaton, label, events) is not None:
                        readings.add(tuple(events))
                found = frozenset(readings)
            self._completions[context] = found
        return found

    def finish(self, context: int, digits: int = 0) -> list[int] | None:
        """The events of the lexeme pending at the end of the input (None: the input cannot
        end here, e.g. inside a string or an f-string, or after a decimal integer of more
        than :data:`MAX_INT_DIGITS` ``digits``)."""
        modes, state, _ = self.contexts[context]
        events: list[int] = []
        if state != 0:
            automaton = self.automaton(modes)
            if (
                automaton is self.code
                and automaton.accept[state] == self._int_label
                and digits > MAX_INT_DIGITS
            ):
                return None
            done = self._emit(modes, automaton, automaton.accept[state], events)
            if done is None:
                return None
            modes = done
        return events if not modes else None

    def _start(
        self, modes: Modes, automaton: _Automaton, byte: int, events: list[int]
    ) -> tuple[Modes, _Automaton, int] | None:
        """Begin a lexeme with ``byte``: a ':' that opens a format spec is read on its own."""
        if byte == 0x3A and modes and modes[-1][0] == "x" and modes[-1][1] == 0:
            events.append(self.groups.spec_colon + self.groups.count)
            level = modes[-1][2]
            enclosing = self._enclosing_literal(modes)
            modes = (*modes[:-1], ("s", *enclosing, level + 1))
            return modes, self.automaton(modes), 0
        state = automaton.rows[0][byte]
        if state == DEAD:
            return None
        if automaton.final[state]:
            done = self._emit(modes, automaton, automaton.accept[state], events)
            if done is None:
                return None
            return done, self.automaton(done), 0
        return modes, automaton, state

    @staticmethod
    def _enclosing_literal(modes: Modes) -> tuple:
        for mode in reversed(modes):
            if mode[0] in ("f", "s"):
                return mode[1:4]
        raise ValueError("a replacement field outside an f-string")

    def _emit(
        self, modes: Modes, automaton: _Automaton, label: int, events: list[int]
    ) -> Modes | None:
        """Apply a completed lexeme: append its events, return the new mode stack (None: an
        error)."""
        if label < 0:
            return None
        groups = self.groups
        inner = groups.count
        if automaton is not self.code:
            name = automaton.dfa.labels[label]
            top = modes[-1]
            if name == "FMID":
                events.append(groups.fstring_middle + inner)
                return modes
            if name == "FOPEN":
                level = top[4] if top[0] == "s" else 0
                if top[0] == "s" and level > self.max_spec_level:
                    return None
                events.append(groups.field_open + inner)
                return (*modes, ("x", 0, level, False))
            if name == "FEND" and top[0] == "f":
                events.append(groups.fstring_end + inner)
                return modes[:-1]
            if name == "FCLOSE":
                events.append(groups.field_close + inner)
                return modes[:-1]
            return None
        in_field = bool(modes)
        layout = self._layout.get(label)
        if layout is not None:
            if not in_field:
                events.append(layout)
            elif modes[-1][3] and not self.pep701:
                return None
            return modes
        fstring = self._fstart.get(label)
        if fstring is not None:
            events.append(groups.fstring_start + (inner if in_field else 0))
            return (*modes, ("f", *fstring))
        if label == self._two_dots:
            offset = inner if in_field else 0
            events.extend((self._dot + offset, self._dot + offset))
            return modes
        if label == self._femptly:
            offset = inner if in_field else 0
            events.extend((groups.fstring_start + offset, groups.fstring_end + offset))
            return modes
        group = self._code_actions[label]
        if not in_field:
            if group is None:
                return None
            events.append(group)
            return modes
        _, depth, level, converted = modes[-1]
        if label == self._conv:
            if depth:
                return None
            events.append(groups.conversion + inner)
            return (*modes[:-1], ("x", depth, level, True))
        if group is None:
            return None
        if group in groups.openers:
            depth += 1
        elif group in groups.closers:
            if depth == 0:
                if group != self._close_brace:
                    return None
                events.append(groups.field_close + inner)
                return modes[:-1]
            depth -= 1
        if converted or depth != modes[-1][1]:
            modes = (*modes[:-1], ("x", depth, level, False))
        events.append(group + inner)
        return modes

    def forbidden(self, modes: Modes) -> frozenset[int]:
        """Bytes that may be refused in ``modes`` before Python 3.12 (see
        :meth:`_legacy_rule`; a superset: whether such a byte is refused also depends on
        where it falls, which :meth:`lex` decides)."""
        if self.pep701 or not modes:
            return frozenset()
        return self._legacy_rule(modes).care

    def _legacy_rule(self, modes: Modes) -> _LegacyRule:
        """What the pre-3.12 reading refuses in ``modes``. An f-string was one string token,
        so inside the replacement field of an *enclosing* f-string (one with an expression
        mode above it) its closing quote cannot appear: the quote character if it is
        single-quoted (then no line break either), three of them in a row if it is
        triple-quoted. The text of a field could hold no backslash, even inside a string,
        and no ``#`` outside a string. The innermost literal's own quotes are its
        automaton's business."""
        found = self._legacy_cache.get(modes)
        if found is None:
            enclosing = [
                mode
                for index, mode in enumerate(modes)
                if mode[0] == "f" and any(inner[0] == "x" for inner in modes[index + 1 :])
            ]
            banned = {ord(mode[1]) for mode in enclosing if not mode[2]}
            if banned:
                banned.update(b"\r\n")
            if enclosing:
                banned.add(ord("\\"))
            triples = frozenset(ord(mode[1]) for mode in enclosing if mode[2])
            comment = modes[-1][0] == "x"
            care = banned | triples | ({ord("#")} if comment else set())
            found = _LegacyRule(frozenset(banned), triples, comment, frozenset(care))
            self._legacy_cache[modes] = found
        return found

    def _legacy_step(self, modes: Modes, byte: int, run: int, starting: bool) -> int:
        """The quote run after ``byte`` is read in ``modes`` (extending the lexeme in
        progress, or ``starting`` one) before Python 3.12, or -1 if that reading refuses
        it. A run is ``quote << 2 | count``: ``count`` (1 or 2) closing quotes of an
        enclosing triple-quoted f-string just read."""
        rule = self._legacy_rule(modes)
        if byte in rule.banned or (starting and rule.comment and byte == 0x23):
            return -1
        if byte not in rule.triples:
            return 0
        count = (run & 3) + 1 if run >> 2 == byte else 1
        return -1 if count == 3 else byte << 2 | count


@dataclass(frozen=True)
class _LegacyRule:
    """Bytes refused in one mode stack before Python 3.12: ``banned`` anywhere, ``triples``
    three in a row, ``#`` at the start of a lexeme when ``comment``; ``care`` is all of
    them (tokens holding one are read byte by byte when masks are built)."""

    banned: frozenset[int]
    triples: frozenset[int]
    comment: bool
    care: frozenset[int]


def _digits(data: bytes) -> int:
    """The digits among the bytes of a number (the bytes less its underscores)."""
    return len(data) - data.count(b"_")
