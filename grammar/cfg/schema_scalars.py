"""Strings, numbers and finite value sets of a conjunction, as character automata.

A string's ``pattern``s, known ``format``s, length bounds and ``not``-excluded sets
intersect into one DFA (``string_dfa``); a number's bounds, ``multipleOf`` and exclusions
likewise (``number_dfa``). Unconstrained strings and numbers do not need an automaton and
use the shared ``json-string`` / ``json-number`` / ``json-integer`` rules instead."""

from __future__ import annotations

import json
from collections.abc import Hashable
from decimal import Decimal
from functools import cache
from typing import Any

from cad.grammar.cfg.char_automata import (
    EMPTY_DFA,
    AutomatonTooLarge,
    Dfa,
    Rx,
    RxChars,
    RxConcat,
    RxRepeat,
    RxUnion,
    any_string,
    intersect,
    length_dfa,
    literal_dfa,
    rx_dfa,
    rx_literal,
    subtract,
    union,
)
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.json_text import QUOTE
from cad.grammar.cfg.regex_pattern import pattern_dfa
from cad.grammar.cfg.schema_context import (
    KNOWN_KEYWORDS,
    MAX_COUNTED,
    NUMBER_KEYWORDS,
    Conjunction,
    SchemaContext,
)
from cad.grammar.cfg.schema_formats import format_pattern
from cad.grammar.cfg.schema_numbers import bound_dfa, multiple_dfa, number_syntax_dfa
from cad.grammar.cfg.syntax_tree import Expr, RuleRef, Sequence

_LESS, _EQUAL, _GREATER = -1, 0, 1
_BOUNDS = (("minimum", "exclusiveMinimum", _GREATER), ("maximum", "exclusiveMaximum", _LESS))


def finite_values(ctx: SchemaContext, conjunction: Conjunction) -> list[Any] | None:
    """The values allowed when some part has ``enum`` or ``const`` (each candidate checked
    against every part, and against known ``format``s), else None.

    ``enum`` and ``const`` are decided by hashing (with JSON Schema's equality: ``1`` equals
    ``1.0``, ``true`` does not equal ``1``) and only the other keywords of a part go to the
    validator, so a long ``enum`` costs linear time, not a validator pass over the whole
    list for each of its values."""
    candidates: list[Any] | None = None
    for part in conjunction.parts:
        if "const" in part:
            candidates = [part["const"]]
            break
        if "enum" in part:
            if not isinstance(part["enum"], list):
                raise GrammarError("'enum' must be an array")
            candidates = list(part["enum"])
            break
    if candidates is None:
        return None
    checks = [_FiniteCheck(part) for part in conjunction.parts]
    unique = {json.dumps(value, sort_keys=True): value for value in candidates}
    return [
        value
        for value in unique.values()
        if all(check.holds(ctx, value) for check in checks)
        and _formats_hold(ctx, conjunction, value)
    ]


class _FiniteCheck:
    """Whether a value satisfies one part: its ``const`` and ``enum`` by lookup, its other
    constraining keywords (if any) with the validator."""

    def __init__(self, part: dict[str, Any]) -> None:
        self.allowed: list[set[Hashable]] = []
        if "const" in part:
            self.allowed.append({json_key(part["const"])})
        if "enum" in part:
            if not isinstance(part["enum"], list):
                raise GrammarError("'enum' must be an array")
            self.allowed.append({json_key(value) for value in part["enum"]})
        rest = {k: v for k, v in part.items() if k not in ("const", "enum")}
        self.rest = rest if rest.keys() & KNOWN_KEYWORDS else None

    def holds(self, ctx: SchemaContext, value: Any) -> bool:
        if self.allowed:
            key = json_key(value)
            if not all(key in allowed for allowed in self.allowed):
                return False
        return self.rest is None or ctx.is_valid(self.rest, value)


def json_key(value: Any) -> Hashable:
    """A hashable key equal for two JSON values exactly when JSON Schema's ``enum`` and
    ``const`` call them equal: numbers by value, booleans apart from numbers, arrays item
    by item, objects member by member."""
    if value is None or isinstance(value, bool):
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, json_key(item)) for name, item in value.items()))
    raise GrammarError(f"{value!r} is not a JSON value")


def _formats_hold(ctx: SchemaContext, conjunction: Conjunction, value: Any) -> bool:
    if not isinstance(value, str):
        return True
    for name in conjunction.values("format"):
        pattern = format_pattern(name) if isinstance(name, str) else None
        if pattern is not None and not pattern_dfa(pattern).run(value):
            return False
    return True


def has_string_constraints(conjunction: Conjunction) -> bool:
    """Whether strings need an automaton (beyond length bounds)."""
    return conjunction.has("pattern") or any(
        isinstance(name, str) and format_pattern(name) is not None
        for name in conjunction.values("format")
    )


def length_bounds(conjunction: Conjunction) -> tuple[int, int | None]:
    """The tightest ``minLength`` / ``maxLength``."""
    low = max([count_value(v, "minLength") for v in conjunction.values("minLength")], default=0)
    highs = [count_value(v, "maxLength") for v in conjunction.values("maxLength")]
    return low, min(highs) if highs else None


def count_value(value: Any, keyword: str) -> int:
    """A count keyword's value (``minLength``, ``maxProperties``, ...) as an int; GrammarError
    unless it is a non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise GrammarError(f"{keyword!r} must be a non-negative integer, not {value!r}")
    return int(value)


def string_dfa(ctx: SchemaContext, conjunction: Conjunction) -> Dfa:
    """Every string the conjunction accepts, as a DFA (raises GrammarError when it cannot
    be built; keywords the caller ignores are skipped). Kept per conjunction: a ``not``
    nested in a ``not`` asks for the same languages again, and would otherwise double the
    work at every level."""
    key = ("string-dfa", conjunction.key)
    found = ctx.cache.get(key)
    if found is None:
        found = ctx.cache[key] = _string_dfa(ctx, conjunction)
    return found


def _string_dfa(ctx: SchemaContext, conjunction: Conjunction) -> Dfa:
    if "string" not in conjunction.types():
        return EMPTY_DFA
    values = finite_values(ctx, conjunction)
    if values is not None:
        return literal_dfa((v, "accept") for v in values if isinstance(v, str))
    dfa = any_string()
    for pattern in conjunction.values("pattern"):
        dfa = _restrict(ctx, dfa, pattern, "pattern")
    for name in conjunction.values("format"):
        pattern = format_pattern(name) if isinstance(name, str) else None
        if pattern is not None:
            dfa = intersect(dfa, pattern_dfa(pattern))
    low, high = length_bounds(conjunction)
    if low or high is not None:
        dfa = _limit(ctx, dfa, low, high)
    for negated in conjunction.values("not"):
        for alternative in ctx.schema_alternatives(negated):
            dfa = subtract(dfa, string_dfa(ctx, alternative))
    return dfa


def _restrict(ctx: SchemaContext, dfa: Dfa, pattern: Any, keyword: str) -> Dfa:
    if not isinstance(pattern, str):
        raise GrammarError(f"{keyword!r} must be a string, not {pattern!r}")
    try:
        return intersect(dfa, pattern_dfa(pattern))
    except GrammarError as error:
        ctx.unsupported(keyword, str(error))
        return dfa


def _limit(ctx: SchemaContext, dfa: Dfa, low: int, high: int | None) -> Dfa:
    try:
        return intersect(dfa, length_dfa(low, high))
    except AutomatonTooLarge:
        keyword = "minLength" if high is None else "maxLength"
        detail = "the length bound with a pattern or format makes too large an automaton"
        ctx.unsupported(keyword, detail)
        return dfa


def string_expr(ctx: SchemaContext, conjunction: Conjunction, exclusions: list[Dfa]) -> Expr | None:
    """A JSON string the conjunction accepts, minus the ``exclusions``; None when there is
    none."""
    low, high = length_bounds(conjunction)
    if high is not None and high < low:
        return None
    if not has_string_constraints(conjunction) and not exclusions:
        if high is not None and high > MAX_COUNTED:
            ctx.unsupported("maxLength", f"{high} is above the enforced limit of {MAX_COUNTED}")
            high = None
        if low > MAX_COUNTED:
            ctx.unsupported("minLength", f"{low} is above the enforced limit of {MAX_COUNTED}")
            low = 0
        chars = ctx.chain("chars", lambda _: _JSON_CHAR, low, high)
        return Sequence((QUOTE, chars, QUOTE))
    dfa = string_dfa(ctx, conjunction)
    for excluded in exclusions:
        dfa = subtract(dfa, excluded)
    if dfa.is_empty():
        return None
    return Sequence((QUOTE, ctx.dfa_body("str", dfa), QUOTE))


def number_dfa(ctx: SchemaContext, conjunction: Conjunction, spelling: str) -> Dfa:
    """The numbers the conjunction accepts in plain decimal notation. ``spelling``:
    ``"integer"`` (no fraction), ``"integral"`` (integer values, ``.0`` allowed) or
    ``"number"``. Kept per conjunction and spelling, as :func:`string_dfa` is."""
    key = ("number-dfa", conjunction.key, spelling)
    found = ctx.cache.get(key)
    if found is None:
        found = ctx.cache[key] = _number_dfa(ctx, conjunction, spelling)
    return found


def _number_dfa(ctx: SchemaContext, conjunction: Conjunction, spelling: str) -> Dfa:
    types = conjunction.types()
    if not types & {"number", "integer"}:
        return EMPTY_DFA
    if "number" not in types and spelling == "number":
        spelling = "integral"
    dfa = _syntax(spelling)
    values = finite_values(ctx, conjunction)
    if values is not None:
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        found = EMPTY_DFA
        for value in numbers:
            found = union(found, rx_dfa(_value_spellings(Decimal(str(value)))))
        return intersect(dfa, found)
    for keyword, exclusive, strict in _BOUNDS:
        inclusive = frozenset({strict, _EQUAL})
        for part in conjunction.parts:
            if keyword in part:
                kept = frozenset({strict}) if part.get(exclusive) is True else inclusive
                dfa = intersect(dfa, bound_dfa(_decimal(part[keyword], keyword), kept))
            value = part.get(exclusive)
            if value is not None and not isinstance(value, bool):
                dfa = intersect(dfa, bound_dfa(_decimal(value, exclusive), frozenset({strict})))
    for divisor in conjunction.values("multipleOf"):
        try:
            dfa = intersect(dfa, multiple_dfa(_decimal(divisor, "multipleOf")))
        except GrammarError as error:
            ctx.unsupported("multipleOf", str(error))
    for negated in conjunction.values("not"):
        for alternative in ctx.schema_alternatives(negated):
            dfa = subtract(dfa, number_dfa(ctx, alternative, "number"))
    return dfa


@cache
def _syntax(spelling: str) -> Dfa:
    if spelling == "integral":
        digits = RxChars(((48, 57),))
        whole = RxUnion(
            (rx_literal("0"), RxConcat((RxChars(((49, 57),)), RxRepeat(digits, 0, None))))
        )
        zeros = RxRepeat(RxConcat((rx_literal("."), RxRepeat(rx_literal("0"), 1, None))), 0, 1)
        return rx_dfa(RxConcat((RxRepeat(rx_literal("-"), 0, 1), whole, zeros)))
    return number_syntax_dfa(integer=spelling == "integer")


def _decimal(value: Any, keyword: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GrammarError(f"{keyword!r} must be a number, not {value!r}")
    return Decimal(str(value))


def _value_spellings(value: Decimal) -> Rx:
    """Every plain-decimal spelling of ``value``: ``1``, ``1.0``, ``1.00``, ...; ``-0``."""
    whole, _, fraction = format(abs(value), "f").partition(".")
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    sign = rx_literal("-") if value < 0 else RxRepeat(rx_literal("-"), 0, 1 if value == 0 else 0)
    zeros = RxRepeat(rx_literal("0"), 0, None)
    if fraction:
        tail = RxConcat((rx_literal("." + fraction), zeros))
    else:
        tail = RxRepeat(RxConcat((rx_literal("."), RxRepeat(rx_literal("0"), 1, None))), 0, 1)
    return RxConcat((sign, rx_literal(whole), tail))


def has_number_constraints(conjunction: Conjunction) -> bool:
    """Whether numbers need an automaton."""
    return any(conjunction.has(keyword) for keyword in NUMBER_KEYWORDS)


def number_expr(
    ctx: SchemaContext, conjunction: Conjunction, integer: bool, exclusions: list[Dfa]
) -> Expr | None:
    """A JSON number (``integer``: an integer) the conjunction accepts, minus exclusions;
    None when there is none."""
    if not has_number_constraints(conjunction) and not exclusions:
        return _INTEGER if integer else _NUMBER
    dfa = number_dfa(ctx, conjunction, "integer" if integer else "number")
    for excluded in exclusions:
        dfa = subtract(dfa, excluded)
    if dfa.is_empty():
        return None
    return ctx.dfa_body("num", dfa)


_JSON_CHAR = RuleRef("json-char")
_NUMBER = RuleRef("json-number")
_INTEGER = RuleRef("json-integer")
