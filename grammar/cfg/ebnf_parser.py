"""Parser for the grammar text format (GBNF-style EBNF; see docs/grammar.md).

    root   ::= "{" pair ("," pair)* "}"     # rules: name ::= expression
    pair   ::= key ":" [0-9]+               # literals, classes, rule references
    key    ::= "\"" [a-z_]{1,16} "\""       # ? * + {m} {m,} {m,n}, ( ) grouping, | choice

The start rule is ``root`` when defined, otherwise the first rule."""

from __future__ import annotations

import re

from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.syntax_tree import (
    ANY_CHAR,
    CharClass,
    Choice,
    Expr,
    Literal,
    Repeat,
    RuleRef,
    RuleSet,
    Sequence,
)

_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "f": "\f", "v": "\v", "b": "\b"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
# White space and comments, one character or comment a step (no backtracking blow-up when a
# rule-start match fails after a long run of spaces).
_SPACE = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_RULE_START = re.compile(_NAME.pattern + _SPACE.pattern + "::=")
# A literal's characters up to its closing quote or an escape.
_PLAIN_IN_STRING = {quote: re.compile(f"[^{quote}\\\\]*") for quote in "\"'"}
# Repetition bounds in ASCII digits; past 18 digits a count could not be written out anyway.
_BOUNDS = re.compile(r"([0-9]{1,18})(?:(,)([0-9]{1,18})?)?")
_LONG_BOUNDS = re.compile(r"[0-9]+(?:,[0-9]*)?")


MAX_GROUP_NESTING = 64
"""Deepest nesting of parenthesised groups."""
MAX_EXPRESSION_DEPTH = 256
"""Deepest expression tree of one rule: every group, choice, sequence and postfix operator
(``?``, ``*``, ``+``, ``{m,n}``) is one level. Parsing, lowering and comparing expressions
recurse through the tree, so a deeper one is refused with line and column rather than let
it exhaust Python's stack."""


def parse_ebnf(text: str) -> RuleSet:
    """Parse grammar text into named rules; raises GrammarError with line and column."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.groups = 0

    def parse(self) -> RuleSet:
        rules: dict[str, Expr] = {}
        order: list[str] = []
        self._skip_space()
        while self.pos < len(self.text):
            name = self._name()
            self._skip_space()
            if not self.text.startswith("::=", self.pos):
                self._fail("expected '::=' after rule name")
            self.pos += 3
            body_start = self.pos
            expr = self._choice()
            if _depth(expr) > MAX_EXPRESSION_DEPTH:
                self.pos = body_start
                self._fail(
                    f"rule {name!r} nests more than {MAX_EXPRESSION_DEPTH} levels (groups, "
                    "choices and postfix operators); split it into named rules"
                )
            if name in rules:
                rules[name] = Choice((rules[name], expr))
            else:
                rules[name] = expr
                order.append(name)
            self._skip_space()
        if not rules:
            raise GrammarError("grammar has no rules")
        start = "root" if "root" in rules else order[0]
        for name in order:
            _check_refs(rules[name], rules, name)
        return RuleSet(rules, start)

    def _fail(self, message: str) -> None:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        raise GrammarError(f"{message} at line {line}, column {column}")

    def _skip_space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def _peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def _name(self) -> str:
        found = _NAME.match(self.text, self.pos)
        if found is None:
            self._fail("expected a rule name")
            raise AssertionError
        self.pos = found.end()
        return found.group()

    def _at_rule_start(self) -> bool:
        return _RULE_START.match(self.text, self.pos) is not None

    def _choice(self) -> Expr:
        options = [self._sequence()]
        self._skip_space()
        while self._peek() == "|":
            self.pos += 1
            options.append(self._sequence())
            self._skip_space()
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def _sequence(self) -> Expr:
        parts: list[Expr] = []
        while True:
            self._skip_space()
            char = self._peek()
            if not char or char in "|)" or (char in _NAME_START and self._at_rule_start()):
                break
            parts.append(self._postfix(self._atom()))
        return parts[0] if len(parts) == 1 else Sequence(tuple(parts))

    def _atom(self) -> Expr:
        char = self._peek()
        if char in "\"'":
            return Literal(self._string(char))
        if char == "[":
            return self._char_class()
        if char == ".":
            self.pos += 1
            return ANY_CHAR
        if char == "(":
            if self.groups >= MAX_GROUP_NESTING:
                self._fail(
                    f"groups nested more than {MAX_GROUP_NESTING} deep; split them into named rules"
                )
            self.pos += 1
            self.groups += 1
            expr = self._choice()
            self.groups -= 1
            self._skip_space()
            if self._peek() != ")":
                self._fail("expected ')'")
            self.pos += 1
            return expr
        if char in _NAME_START:
            return RuleRef(self._name())
        self._fail(f"unexpected character {char!r}")
        raise AssertionError

    def _postfix(self, expr: Expr) -> Expr:
        while True:
            char = self._peek()
            if char == "*":
                expr = Repeat(expr, 0, None)
            elif char == "+":
                expr = Repeat(expr, 1, None)
            elif char == "?":
                expr = Repeat(expr, 0, 1)
            elif char == "{":
                expr = self._bounds(expr)
                continue
            else:
                return expr
            self.pos += 1

    def _bounds(self, expr: Expr) -> Expr:
        end = self.text.find("}", self.pos)
        if end < 0:
            self._fail("unclosed '{'")
        body = self.text[self.pos + 1 : end].replace(" ", "")
        bounds = _BOUNDS.fullmatch(body)
        if bounds is None:
            shown = body if len(body) <= 40 else body[:40] + "..."
            if _LONG_BOUNDS.fullmatch(body):
                self._fail(f"repetition count in {{{shown}}} has more than 18 digits")
            self._fail(f"bad repetition bounds {{{shown}}}: expected {{m}}, {{m,}} or {{m,n}}")
            raise AssertionError
        low_text, comma, high_text = bounds.groups()
        low = int(low_text)
        high = (int(high_text) if high_text else None) if comma else low
        if high is not None and high < low:
            self._fail(f"repetition bounds {{{body}}} have max < min")
        self.pos = end + 1
        return Repeat(expr, low, high)

    def _escape(self) -> str:
        self.pos += 1
        char = self._peek()
        if not char:
            self._fail("dangling backslash")
        if char in _HEX_ESCAPES:
            width = _HEX_ESCAPES[char]
            digits = self.text[self.pos + 1 : self.pos + 1 + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                self._fail(f"bad \\{char} escape")
            self.pos += 1 + width
            value = int(digits, 16)
            if value > 0x10FFFF:
                self._fail("code point out of range")
            return chr(value)
        self.pos += 1
        return _SIMPLE_ESCAPES.get(char, char)

    def _string(self, quote: str) -> str:
        self.pos += 1
        plain = _PLAIN_IN_STRING[quote]
        chars: list[str] = []
        while True:
            end = plain.match(self.text, self.pos).end()  # type: ignore[union-attr]
            chars.append(self.text[self.pos : end])
            self.pos = end
            char = self._peek()
            if not char:
                self._fail("unterminated string literal")
            if char == quote:
                self.pos += 1
                return "".join(chars)
            chars.append(self._escape())

    def _class_char(self) -> str:
        char = self._peek()
        if not char:
            self._fail("unterminated character class")
        if char == "\\":
            return self._escape()
        self.pos += 1
        return char

    def _char_class(self) -> CharClass:
        self.pos += 1
        negated = self._peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self._peek() != "]":
            low = self._class_char()
            if self._peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                high = self._class_char()
                if ord(high) < ord(low):
                    self._fail(f"reversed range {low!r}-{high!r}")
                ranges.append((ord(low), ord(high)))
            else:
                ranges.append((ord(low), ord(low)))
        self.pos += 1
        return CharClass(tuple(ranges), negated)


def _depth(expr: Expr) -> int:
    """Levels of the expression tree, measured with a stack of our own (no recursion)."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, Sequence):
            stack.extend((part, depth + 1) for part in node.parts)
        elif isinstance(node, Choice):
            stack.extend((option, depth + 1) for option in node.options)
        elif isinstance(node, Repeat):
            stack.append((node.body, depth + 1))
    return deepest


def _check_refs(expr: Expr, rules: dict[str, Expr], owner: str) -> None:
    if isinstance(expr, RuleRef):
        if expr.name not in rules:
            raise GrammarError(f"rule {owner!r} refers to undefined rule {expr.name!r}")
    elif isinstance(expr, Sequence):
        for part in expr.parts:
            _check_refs(part, rules, owner)
    elif isinstance(expr, Choice):
        for option in expr.options:
            _check_refs(option, rules, owner)
    elif isinstance(expr, Repeat):
        _check_refs(expr.body, rules, owner)
