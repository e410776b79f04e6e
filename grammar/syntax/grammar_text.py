"""Reading a token-level grammar written in the PEG-like text format of ``python.cfg``.

``rule: alt | alt`` (indented lines starting with ``|`` continue a rule); UPPERCASE names
are token kinds, ``'x'`` keywords and operators, ``"x"`` soft keywords; ``x?``, ``x*``,
``x+``, ``( ... )`` and the gather ``s.x+`` (``x (s x)*``). Every alternative of a line that
ends in ``@M.N`` exists from Python M.N on; one that ends in ``@<M.N`` only before it.

The result is a plain context-free grammar: optional parts are expanded in place (both
readings become productions), repetition becomes left-recursive helper rules, rules the
start rule cannot reach are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import product

_TOKEN = re.compile(
    r"""\s*(?:(?P<single>'[^']*')|(?P<double>"[^"]*")|(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>[()|?*+.]))""",
    re.VERBOSE,
)
_VERSION = re.compile(r"@(<?)(\d+)\.(\d+)\s*$")


class GrammarTextError(ValueError):
    """The grammar text cannot be read."""


@dataclass
class Cfg:
    """A context-free grammar over named symbols: ``productions`` are ``(lhs, rhs)`` pairs,
    terminals are the symbols no production defines."""

    start: str
    productions: list[tuple[str, tuple[str, ...]]]
    nonterminals: list[str] = field(default_factory=list)
    terminals: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        heads = list(dict.fromkeys(lhs for lhs, _ in self.productions))
        self.nonterminals = heads
        defined = set(heads)
        seen: dict[str, None] = {}
        for _, rhs in self.productions:
            for symbol in rhs:
                if symbol not in defined:
                    seen.setdefault(symbol)
        self.terminals = list(seen)


# expression trees: ("sym", name) | ("seq", [..]) | ("alt", [..]) | ("opt", x) | ("star", x)
# | ("plus", x) | ("gather", sep, x)
Expr = tuple


def read_grammar(text: str, version: tuple[int, int]) -> Cfg:
    """The grammar of ``text`` for Python ``version``; the first rule is the start rule."""
    rules: dict[str, list[Expr]] = {}
    order: list[str] = []
    current: str | None = None
    for number, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.split("#", 1)[0] if not _has_quoted_hash(raw_line) else raw_line
        if not line.strip():
            continue
        since = _VERSION.search(line)
        if since:
            line = line[: since.start()]
        if line[0].isspace():
            body = line.strip()
            if current is None or not body.startswith("|"):
                raise GrammarTextError(f"line {number}: continuation without a rule")
            body = body[1:]
        else:
            name, sep, body = line.partition(":")
            if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*", name.strip()):
                raise GrammarTextError(f"line {number}: expected 'rule: ...'")
            current = name.strip()
            if current not in rules:
                rules[current] = []
                order.append(current)
        if since:
            bound = (int(since[2]), int(since[3]))
            if (version < bound) != (since[1] == "<"):
                continue
        alternatives = _Parser(body, number).alternatives()
        rules[current].extend(alternatives)
    return _expand(order[0], rules)


def _has_quoted_hash(line: str) -> bool:
    return "'#'" in line or '"#"' in line


class _Parser:
    def __init__(self, body: str, line: int) -> None:
        self.tokens = []
        position = 0
        body = body.rstrip()
        while position < len(body):
            match = _TOKEN.match(body, position)
            if match is None or match.end() == position:
                raise GrammarTextError(f"line {line}: cannot read {body[position:]!r}")
            self.tokens.append((match.lastgroup, match.group(match.lastgroup)))
            position = match.end()
        self.position = 0
        self.line = line

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def alternatives(self) -> list[Expr]:
        options = [self.sequence()]
        while self.peek() == ("op", "|"):
            self.position += 1
            options.append(self.sequence())
        if self.peek() is not None and self.peek() != ("op", ")"):
            raise GrammarTextError(f"line {self.line}: unexpected {self.peek()[1]!r}")
        return options

    def sequence(self) -> Expr:
        items = []
        while (token := self.peek()) is not None and token not in (("op", "|"), ("op", ")")):
            items.append(self.item())
        return ("seq", items)

    def item(self) -> Expr:
        kind, value = self.tokens[self.position]
        self.position += 1
        if (kind, value) == ("op", "("):
            inner = ("alt", self.alternatives())
            if self.peek() != ("op", ")"):
                raise GrammarTextError(f"line {self.line}: missing ')'")
            self.position += 1
            atom: Expr = inner
        elif kind == "op":
            raise GrammarTextError(f"line {self.line}: unexpected {value!r}")
        else:
            atom = ("sym", value)
        if self.peek() == ("op", ".") and kind != "op":
            self.position += 1
            element = self.item()
            if element[0] != "plus":
                raise GrammarTextError(f"line {self.line}: a gather is written s.x+")
            return ("gather", atom, element[1])
        while (token := self.peek()) in (("op", "?"), ("op", "*"), ("op", "+")):
            self.position += 1
            atom = ({"?": "opt", "*": "star", "+": "plus"}[token[1]], atom)
        return atom


def _expand(start: str, rules: dict[str, list[Expr]]) -> Cfg:
    productions: list[tuple[str, tuple[str, ...]]] = []
    helpers: dict[tuple, str] = {}

    def helper(key: tuple, owner: str, build) -> str:
        name = helpers.get(key)
        if name is None:
            name = helpers[key] = f"{owner}__{len(helpers)}"
            for rhs in build(name):
                productions.append((name, rhs))
        return name

    def readings(expr: Expr, owner: str) -> list[tuple[str, ...]]:
        kind = expr[0]
        if kind == "sym":
            return [(_symbol(expr[1]),)]
        if kind == "seq":
            parts = [readings(part, owner) for part in expr[1]]
            return [tuple(s for piece in combo for s in piece) for combo in product(*parts)]
        if kind == "alt":
            return list(dict.fromkeys(r for option in expr[1] for r in readings(option, owner)))
        if kind == "opt":
            return list(dict.fromkeys([(), *readings(expr[1], owner)]))
        if kind in ("plus", "star"):
            body = readings(expr[1], owner)
            name = helper(("plus", tuple(body)), owner, lambda n: [*body, *((n, *r) for r in body)])
            return [(name,), ()] if kind == "star" else [(name,)]
        if kind == "gather":
            separators = readings(expr[1], owner)
            body = readings(expr[2], owner)
            name = helper(
                ("gather", tuple(separators), tuple(body)),
                owner,
                lambda n: [*body, *((n, *s, *r) for s in separators for r in body)],
            )
            return [(name,)]
        raise GrammarTextError(f"unknown expression {kind}")

    for name, alternatives in rules.items():
        for alternative in alternatives:
            for rhs in readings(alternative, name):
                productions.append((name, rhs))
    defined = {lhs for lhs, _ in productions}
    missing = sorted(
        {s for _, rhs in productions for s in rhs if s[0].islower() and s not in defined}
    )
    if missing:
        raise GrammarTextError(f"undefined rules: {', '.join(missing)}")
    reachable = {start}
    agenda = [start]
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for lhs, rhs in productions:
        by_lhs.setdefault(lhs, []).append(rhs)
    while agenda:
        for rhs in by_lhs.get(agenda.pop(), []):
            for symbol in rhs:
                if symbol in defined and symbol not in reachable:
                    reachable.add(symbol)
                    agenda.append(symbol)
    kept = list(dict.fromkeys((lhs, rhs) for lhs, rhs in productions if lhs in reachable))
    kept.sort(key=lambda item: item[0] != start)
    return Cfg(start, kept)


def _symbol(text: str) -> str:
    """Quoted terminals keep their quotes (``'if'``, ``"match"``); names stay as they are."""
    return text
