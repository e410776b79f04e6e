"""Grammar expressions shared by the EBNF parser, the JSON Schema translator and lowering.

Characters are Unicode code points; lowering turns them into UTF-8 byte classes.

Expressions are values: hashed by content, shared between rules, and never changed once
built (the translators' dictionaries and the lowering's sharing rely on it). They are not
frozen dataclasses only because a frozen one takes about 2.5 times as long to build, and a
schema's translation builds thousands."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(unsafe_hash=True, slots=True)
class Literal:
    """A fixed string, matched as its UTF-8 bytes."""

    text: str


@dataclass(unsafe_hash=True, slots=True)
class CharClass:
    """One code point out of inclusive ranges (or outside them when ``negated``)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(unsafe_hash=True, slots=True)
class RuleRef:
    """A reference to a named rule."""

    name: str


@dataclass(unsafe_hash=True, slots=True)
class Sequence:
    """Its parts one after another (empty: the empty string)."""

    parts: tuple[Expr, ...]


@dataclass(unsafe_hash=True, slots=True)
class Choice:
    """Any one of its options."""

    options: tuple[Expr, ...]


@dataclass(unsafe_hash=True, slots=True)
class Repeat:
    """``body`` between ``low`` and ``high`` times (``high`` None: unbounded)."""

    body: Expr
    low: int
    high: int | None


Expr = Literal | CharClass | RuleRef | Sequence | Choice | Repeat

EMPTY = Sequence(())
ANY_CHAR = CharClass(((0, 0x10FFFF),))


@dataclass(frozen=True)
class RuleSet:
    """Named rules and the start rule's name: what every front end produces."""

    rules: dict[str, Expr]
    start: str
