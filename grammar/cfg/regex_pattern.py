"""JSON Schema ``pattern`` (ECMA-262 regular expressions) as a character automaton.

Supported: literals and escapes (``\\t \\n \\v \\f \\r \\0 \\cX \\xHH \\uHHHH \\u{H..}``,
escaped metacharacters), ``.``, classes ``[a-z]`` / ``[^...]`` with ``\\d \\w \\s`` and their
negations (ECMAScript meanings: ASCII digits and word characters, Unicode white space),
groups ``(...)``, ``(?:...)``, ``(?<name>...)``, alternation, the quantifiers
``? * + {m} {m,} {m,n}`` (lazy forms match the same strings), and the anchors ``^`` / ``$``
anywhere (zero-width, at the start / end of the string). A pattern matches when it matches
*somewhere* in the string, as JSON Schema specifies.

Refused, with the construct named: lookahead and lookbehind, backreferences, word
boundaries ``\\b \\B``, Unicode property escapes ``\\p{..}``, inline flags. None of them is
regular in general (or, for properties, needs tables this module does not carry)."""

from __future__ import annotations

import re
from functools import lru_cache

from cad.grammar.cfg.char_automata import (
    Dfa,
    Ranges,
    Rx,
    RxAnchor,
    RxChars,
    RxConcat,
    RxRepeat,
    RxUnion,
    complement,
    normalize,
    rx_dfa,
)
from cad.grammar.cfg.errors import GrammarError

DIGIT: Ranges = ((48, 57),)
WORD: Ranges = ((48, 57), (65, 90), (95, 95), (97, 122))
SPACE: Ranges = normalize(
    [(9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
     (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)  # fmt: skip
LINE_TERMINATORS: Ranges = ((10, 10), (13, 13), (0x2028, 0x2029))
_CLASS_ESCAPES = {"d": DIGIT, "w": WORD, "s": SPACE}
_BRACES = re.compile(r"([0-9]+)(?:(,)([0-9]*))?")
MAX_GROUP_NESTING = 64
"""Deepest nesting of groups in a pattern (the parser recurses per group)."""
_CONTROL_ESCAPES = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}


@lru_cache(maxsize=512)
def pattern_dfa(pattern: str) -> Dfa:
    """The minimal DFA of the strings in which ``pattern`` finds a match."""
    return rx_dfa(parse_pattern(pattern), search=True)


def parse_pattern(pattern: str) -> Rx:
    """The expression tree of an ECMA-262 pattern; GrammarError names what is unsupported."""
    parser = _PatternParser(pattern)
    tree = parser.disjunction()
    if parser.pos != len(pattern):
        parser.fail(f"unmatched {pattern[parser.pos]!r}")
    return tree


class _PatternParser:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.groups = 0
        self.brace = (0, -1)

    def fail(self, what: str) -> None:
        shown = self.pattern if len(self.pattern) <= 80 else self.pattern[:80] + "..."
        raise GrammarError(f"pattern {shown!r}: {what} is not supported")

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.pattern[index] if index < len(self.pattern) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            self.fail("an unexpected end")
        self.pos += 1
        return char

    def disjunction(self) -> Rx:
        options = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.alternative())
        return options[0] if len(options) == 1 else RxUnion(tuple(options))

    def alternative(self) -> Rx:
        parts: list[Rx] = []
        while (char := self.peek()) and char not in "|)":
            if char in "^$":
                self.pos += 1
                parts.append(RxAnchor(at_start=char == "^"))
                continue
            parts.append(self.quantified(self.atom()))
        return parts[0] if len(parts) == 1 else RxConcat(tuple(parts))

    def quantified(self, atom: Rx) -> Rx:
        char = self.peek()
        if char == "*":
            bounds: tuple[int, int | None] | None = (0, None)
            self.pos += 1
        elif char == "+":
            bounds = (1, None)
            self.pos += 1
        elif char == "?":
            bounds = (0, 1)
            self.pos += 1
        elif char == "{":
            bounds = self.braces()
        else:
            bounds = None
        if bounds is None:
            return atom
        if self.peek() == "?":
            self.pos += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._is_braces()):
            self.fail("a repeated quantifier")
        low, high = bounds
        if high is not None and high < low:
            self.fail(f"the quantifier {{{low},{high}}} (max < min)")
        return RxRepeat(atom, low, high)

    def _is_braces(self) -> bool:
        saved = self.pos
        found = self.braces() is not None
        self.pos = saved
        return found

    def braces(self) -> tuple[int, int | None] | None:
        """``{m}``, ``{m,}``, ``{m,n}``; anything else leaves ``{`` a literal (Annex B)."""
        end = self._closing_brace()
        if end < 0:
            return None
        bounds = _BRACES.fullmatch(self.pattern, self.pos + 1, end)
        if bounds is None:
            return None
        low, comma, high = bounds.groups()
        if max(len(low), len(high or "")) > 18:
            self.fail("a quantifier count of more than 18 digits")
        self.pos = end + 1
        return int(low), (int(high) if high else None) if comma else int(low)

    def _closing_brace(self) -> int:
        """The first ``}`` at or after the current position (-1: none). Remembered, so a
        pattern of many ``{`` without a ``}`` is scanned once, not once per ``{``."""
        start, found = self.brace
        if not start <= self.pos <= found:
            found = self.pattern.find("}", self.pos)
            if found < 0:
                found = len(self.pattern)
            self.brace = (self.pos, found)
        return -1 if found == len(self.pattern) else found

    def atom(self) -> Rx:
        char = self.take()
        if char == "(":
            return self.group()
        if char == "[":
            return RxChars(self.char_class())
        if char == ".":
            return RxChars(complement(LINE_TERMINATORS))
        if char == "\\":
            return RxChars(self.escape(in_class=False))
        if char in "*+?":
            self.fail(f"{char!r} with nothing to repeat")
        if char == "{" and self._braces_follow():
            self.fail("'{' with nothing to repeat")
        return _single(ord(char))

    def _braces_follow(self) -> bool:
        self.pos -= 1
        found = self._is_braces()
        self.pos += 1
        return found

    def group(self) -> Rx:
        if self.peek() == "?":
            kind = self.pattern[self.pos : self.pos + 3]
            if kind.startswith("?:"):
                self.pos += 2
            elif kind in ("?<=", "?<!") or kind.startswith(("?=", "?!")):
                self.fail("lookaround")
            elif kind.startswith(("?<", "?P<")):
                close = self.pattern.find(">", self.pos)
                if close < 0:
                    self.fail("an unterminated group name")
                self.pos = close + 1
            else:
                self.fail("an inline flag or group modifier")
        if self.groups >= MAX_GROUP_NESTING:
            self.fail(f"groups nested more than {MAX_GROUP_NESTING} deep")
        self.groups += 1
        inner = self.disjunction()
        self.groups -= 1
        if self.peek() != ")":
            self.fail("an unclosed group")
        self.pos += 1
        return inner

    def escape(self, *, in_class: bool) -> Ranges:
        char = self.take()
        lower = char.lower()
        if lower in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[lower]
            return complement(ranges) if char.isupper() else ranges
        if char in _CONTROL_ESCAPES:
            return _single_range(_CONTROL_ESCAPES[char])
        if char == "b" and in_class:
            return _single_range(8)
        if char in "bB":
            self.fail("a word boundary")
        if char == "0" and not self.peek().isdigit():
            return _single_range(0)
        if char.isdigit() or (char == "k" and self.peek() == "<"):
            self.fail("a backreference")
        if char in "pP" and self.peek() == "{":
            self.fail("a Unicode property escape")
        if char == "c" and self.peek().isalpha():
            return _single_range(ord(self.take()) % 32)
        if char == "x" and _is_hex(self.pattern[self.pos : self.pos + 2], 2):
            self.pos += 2
            return _single_range(int(self.pattern[self.pos - 2 : self.pos], 16))
        if char == "u":
            return _single_range(self.unicode_escape())
        return _single_range(ord(char))

    def unicode_escape(self) -> int:
        if self.peek() == "{":
            close = self.pattern.find("}", self.pos)
            digits = self.pattern[self.pos + 1 : close] if close > 0 else ""
            if not digits or not _is_hex(digits, len(digits)) or int(digits, 16) > 0x10FFFF:
                self.fail("a malformed \\u{...} escape")
            self.pos = close + 1
            return int(digits, 16)
        digits = self.pattern[self.pos : self.pos + 4]
        if not _is_hex(digits, 4):
            return ord("u")
        self.pos += 4
        value = int(digits, 16)
        low = self.pattern[self.pos + 2 : self.pos + 6]
        if (
            0xD800 <= value <= 0xDBFF
            and self.pattern.startswith("\\u", self.pos)
            and _is_hex(low, 4)
            and 0xDC00 <= int(low, 16) <= 0xDFFF
        ):
            self.pos += 6
            return 0x10000 + ((value - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        return value

    def char_class(self) -> Ranges:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            low = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high = self.class_atom()
                if _is_single(low) and _is_single(high):
                    if high[0][0] < low[0][0]:
                        self.fail("a reversed class range")
                    ranges.append((low[0][0], high[0][0]))
                else:
                    ranges.extend((*low, *high, (45, 45)))
            else:
                ranges.extend(low)
        self.pos += 1
        result = normalize(ranges)
        return complement(result) if negated else result

    def class_atom(self) -> Ranges:
        char = self.take()
        if char == "\\":
            return self.escape(in_class=True)
        return _single_range(ord(char))


def _single_range(code_point: int) -> Ranges:
    return ((code_point, code_point),)


def _is_single(ranges: Ranges) -> bool:
    return len(ranges) == 1 and ranges[0][0] == ranges[0][1]


def _single(code_point: int) -> Rx:
    return RxChars(_single_range(code_point))


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in "0123456789abcdefABCDEF" for c in text)
