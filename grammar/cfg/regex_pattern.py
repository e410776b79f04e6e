"""The JSON Schema ``pattern`` subset, as grammar expressions over a string's characters.

Supported: literals, ``.``, classes ``[a-z]`` / ``[^...]``, ``\\d \\w \\s`` (and negations),
escaped metacharacters, groups ``(...)`` and ``(?:...)``, ``|``, ``? * + {m} {m,} {m,n}``
(lazy ``?`` suffixes are accepted and ignored), and ``^``/``$`` anchors at the ends. A
pattern without ``^`` (or ``$``) may have any characters before (after) its match, as JSON
Schema searches rather than matches. Characters that JSON must escape (quote, backslash,
control characters) match only through their escape sequence when written literally, and
never through a class or ``.``."""

from __future__ import annotations

import json

from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.syntax_tree import CharClass, Choice, Expr, Literal, Repeat, RuleRef, Sequence
from cad.grammar.cfg.utf8_ranges import complement

_DIGIT = ((48, 57),)
_WORD = ((48, 57), (65, 90), (95, 95), (97, 122))
_SPACE = ((9, 13), (32, 32))
_FORBIDDEN = ((0, 31), (34, 34), (92, 92))
_CLASS_ESCAPES = {"d": (_DIGIT, False), "D": (_DIGIT, True), "w": (_WORD, False),
                  "W": (_WORD, True), "s": (_SPACE, False), "S": (_SPACE, True)}  # fmt: skip
_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


def pattern_expr(pattern: str, any_char_rule: str) -> Expr:
    """Expression for the *contents* of a JSON string matching ``pattern``;
    ``any_char_rule`` names the rule for one arbitrary JSON string character."""
    parser = _PatternParser(pattern)
    anchored_start = pattern.startswith("^")
    if anchored_start:
        parser.pos = 1
    body = parser.alternation()
    anchored_end = parser.pos < len(pattern) and pattern[parser.pos] == "$"
    if anchored_end:
        parser.pos += 1
    if parser.pos != len(pattern):
        raise GrammarError(f"unsupported pattern {pattern!r}: unexpected {pattern[parser.pos]!r}")
    anything = Repeat(RuleRef(any_char_rule), 0, None)
    parts = ([] if anchored_start else [anything]) + [body] + ([] if anchored_end else [anything])
    return Sequence(tuple(parts))


def _allowed(ranges: tuple[tuple[int, int], ...], negated: bool) -> CharClass:
    positive = complement(ranges) if negated else ranges
    kept = complement(_FORBIDDEN + complement(positive))
    return CharClass(kept)


def _literal(char: str) -> Expr:
    return Literal(json.dumps(char, ensure_ascii=False)[1:-1])


class _PatternParser:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0

    def _fail(self, what: str) -> None:
        raise GrammarError(f"unsupported pattern {self.pattern!r}: {what}")

    def _peek(self) -> str:
        return self.pattern[self.pos] if self.pos < len(self.pattern) else ""

    def alternation(self) -> Expr:
        options = [self.concatenation()]
        while self._peek() == "|":
            self.pos += 1
            options.append(self.concatenation())
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def concatenation(self) -> Expr:
        parts: list[Expr] = []
        while (char := self._peek()) and char not in "|)":
            if char == "$" and self.pos == len(self.pattern) - 1:
                break
            parts.append(self.quantified(self.atom()))
        return parts[0] if len(parts) == 1 else Sequence(tuple(parts))

    def quantified(self, expr: Expr) -> Expr:
        while True:
            char = self._peek()
            if char == "*":
                expr, self.pos = Repeat(expr, 0, None), self.pos + 1
            elif char == "+":
                expr, self.pos = Repeat(expr, 1, None), self.pos + 1
            elif char == "?":
                expr, self.pos = Repeat(expr, 0, 1), self.pos + 1
            elif char == "{" and (bounds := self._bounds()) is not None:
                expr = Repeat(expr, *bounds)
            else:
                return expr
            if self._peek() == "?":
                self.pos += 1

    def _bounds(self) -> tuple[int, int | None] | None:
        end = self.pattern.find("}", self.pos)
        if end < 0:
            return None
        low, comma, high = self.pattern[self.pos + 1 : end].partition(",")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        self.pos = end + 1
        return int(low), (int(high) if high else None) if comma else int(low)

    def atom(self) -> Expr:
        char = self._peek()
        self.pos += 1
        if char == "(":
            if self.pattern.startswith("?:", self.pos):
                self.pos += 2
            elif self._peek() == "?":
                self._fail("lookaround and named groups")
            expr = self.alternation()
            if self._peek() != ")":
                self._fail("unclosed group")
            self.pos += 1
            return expr
        if char == "[":
            return self.char_class()
        if char == ".":
            return _allowed(((10, 10),), True)
        if char == "\\":
            return self.escape()
        if char in "^$":
            self._fail("anchor inside the pattern")
        if char in "*+?{":
            self._fail(f"nothing to repeat before {char!r}")
        return _literal(char)

    def escape(self) -> Expr:
        char = self._peek()
        self.pos += 1
        if char in _CLASS_ESCAPES:
            ranges, negated = _CLASS_ESCAPES[char]
            return _allowed(ranges, negated)
        if (char.isdigit() and char != "0") or char in "bBpPk":
            self._fail(f"escape \\{char}")
        return _literal(_CHAR_ESCAPES.get(char, char))

    def char_class(self) -> Expr:
        negated = self._peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            char = self._peek()
            if not char:
                self._fail("unclosed class")
            if char == "]" and not first:
                self.pos += 1
                break
            first = False
            low = self._class_member(ranges)
            if low is None:
                continue
            if self._peek() == "-" and self.pattern[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                high = self._class_member(ranges)
                if high is None or high < low:
                    self._fail("bad class range")
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        return _allowed(tuple(ranges), negated)

    def _class_member(self, ranges: list[tuple[int, int]]) -> int | None:
        char = self._peek()
        self.pos += 1
        if char != "\\":
            return ord(char)
        escaped = self._peek()
        self.pos += 1
        if escaped in _CLASS_ESCAPES:
            class_ranges, negated = _CLASS_ESCAPES[escaped]
            ranges.extend(complement(class_ranges) if negated else class_ranges)
            return None
        return ord(_CHAR_ESCAPES.get(escaped, escaped))
