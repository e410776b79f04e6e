"""``not``: what a negated schema takes away from each JSON type of a conjunction.

Types the negated schema does not accept stay whole; a type it accepts without any
constraint goes; otherwise the negated part is subtracted within the type: strings and
numbers as automata (exact: numbers are then plain decimals), finite values one by one,
objects by which keys are present. ``not`` over arrays' contents, or over objects' values
(beyond the ``if`` discriminators the expansion handles), cannot be enforced."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cad.grammar.cfg.char_automata import AutomatonTooLarge, Dfa, literal_dfa
from cad.grammar.cfg.schema_context import (
    ARRAY_KEYWORDS,
    OBJECT_KEYWORDS,
    Conjunction,
    SchemaContext,
    kinds,
)
from cad.grammar.cfg.schema_objects import Formula, presence_formula
from cad.grammar.cfg.schema_scalars import (
    finite_values,
    has_number_constraints,
    has_string_constraints,
    number_dfa,
    string_dfa,
)


@dataclass
class Negation:
    """What the ``not`` keywords of a conjunction take away, per JSON type."""

    types: set[str]
    strings: list[Dfa]
    numbers: list[Dfa]
    literals: set[str]
    formulas: list[Formula]


def negate(ctx: SchemaContext, schema: Any, negation: Negation) -> None:
    """Take away from ``negation.types`` what ``schema`` accepts (``not`` is the
    conjunction of the negated alternatives)."""
    try:
        _negate_alternatives(ctx, schema, negation)
    except AutomatonTooLarge as error:
        ctx.unsupported("not", f"its automaton is too large ({error})")


def _negate_alternatives(ctx: SchemaContext, schema: Any, negation: Negation) -> None:
    for alternative in ctx.schema_alternatives(schema):
        values = finite_values(ctx, alternative)
        nested = alternative.has("not")
        for kind in sorted(kinds(negation.types) & kinds(alternative.types())):
            if values is not None:
                _negate_values(ctx, kind, alternative, values, negation)
            elif kind == "string":
                if has_string_constraints(alternative) or nested or _lengths(alternative):
                    negation.strings.append(string_dfa(ctx, alternative))
                else:
                    negation.types.discard("string")
            elif kind == "number":
                _negate_numbers(ctx, alternative, nested, negation)
            elif kind in ("boolean", "null"):
                if nested:
                    ctx.unsupported("not", f"a 'not' inside 'not' for {kind} values")
                else:
                    negation.types.discard(kind)
            elif kind == "object":
                _negate_objects(ctx, alternative, nested, negation)
            elif kind == "array":
                if nested or any(alternative.has(k) for k in ARRAY_KEYWORDS):
                    ctx.unsupported("not", "excluding arrays by their items or length")
                else:
                    negation.types.discard("array")


def _negate_values(
    ctx: SchemaContext, kind: str, alternative: Conjunction, values: list[Any], negation: Negation
) -> None:
    chosen = [v for v in values if _kind_of(v) == kind]
    if not chosen:
        return
    if kind == "string":
        negation.strings.append(literal_dfa((v, "accept") for v in chosen))
    elif kind == "number":
        negation.numbers.append(number_dfa(ctx, alternative, "number"))
    elif kind in ("boolean", "null"):
        negation.literals.update(json.dumps(v) for v in chosen)
    else:
        ctx.unsupported("not", f"excluding particular {kind} values")


def _negate_numbers(
    ctx: SchemaContext, alternative: Conjunction, nested: bool, negation: Negation
) -> None:
    types = alternative.types()
    if has_number_constraints(alternative) or nested:
        negation.numbers.append(number_dfa(ctx, alternative, "number"))
    elif "number" in types:
        negation.types.difference_update({"number", "integer"})
    elif "number" in negation.types:
        negation.numbers.append(number_dfa(ctx, alternative, "integral"))
    else:
        negation.types.discard("integer")


def _negate_objects(
    ctx: SchemaContext, alternative: Conjunction, nested: bool, negation: Negation
) -> None:
    relevant = [k for k in OBJECT_KEYWORDS if alternative.has(k)]
    if not relevant and not nested:
        negation.types.discard("object")
        return
    kept = ("required", "properties", "not")
    terms = [
        presence_formula({k: v for k, v in part.items() if k in kept}) for part in alternative.parts
    ]
    if any(term is None for term in terms) or any(k not in kept[:2] for k in relevant):
        ctx.unsupported("not", "excluding objects by more than which keys are present")
        return
    negation.formulas.append(("not", ("and", tuple(terms))))


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _lengths(conjunction: Conjunction) -> bool:
    return conjunction.has("minLength") or conjunction.has("maxLength")
