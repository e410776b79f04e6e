"""Arrays: ``prefixItems`` (or ``items`` as a list, with ``additionalItems``), ``items``,
``minItems`` / ``maxItems``, as a left-linear chain of elements (flat parser stack)."""

from __future__ import annotations

from typing import Any

from cad.grammar.cfg.schema_context import MAX_COUNTED, Conjunction, SchemaContext
from cad.grammar.cfg.syntax_tree import EMPTY, Expr, Literal, Sequence


def _layout(part: dict[str, Any]) -> tuple[list[Any], Any]:
    """(per-position schemas, schema of the rest: None when unconstrained) of one part."""
    if "prefixItems" in part:
        return list(part["prefixItems"]), part.get("items")
    items = part.get("items")
    if isinstance(items, list):
        return items, part.get("additionalItems")
    return [], items


def array_layouts(conjunction: Conjunction) -> list[tuple[list[Any], Any]]:
    """Every part's (per-position schemas, rest schema)."""
    return [_layout(part) for part in conjunction.parts]


def schemas_at(layouts: list[tuple[list[Any], Any]], position: int) -> list[Any]:
    """The schemas the item at ``position`` must meet."""
    schemas = []
    for prefix, rest in layouts:
        if position < len(prefix):
            schemas.append(prefix[position])
        elif rest is not None:
            schemas.append(rest)
    return schemas


def array_expr(ctx: SchemaContext, conjunction: Conjunction) -> Expr | None:
    """The arrays the conjunction accepts; None when there are none."""
    for part in conjunction.parts:
        if part.get("uniqueItems") is True:
            ctx.unsupported("uniqueItems", "distinct items cannot be checked while generating")
        for keyword in ("contains", "minContains", "maxContains"):
            if keyword in part:
                ctx.unsupported(keyword, "counting matching items is not implemented")
    layouts = array_layouts(conjunction)
    prefix_length = max((len(prefix) for prefix, _ in layouts), default=0)
    low = max([int(v) for v in conjunction.values("minItems")], default=0)
    highs = [int(v) for v in conjunction.values("maxItems")]
    highs += [len(prefix) for prefix, rest in layouts if rest is False]
    high = min(highs) if highs else None
    if high is not None and high < low:
        return None
    if high is not None and high > max(MAX_COUNTED, prefix_length):
        ctx.unsupported("maxItems", f"{high} is above the enforced limit of {MAX_COUNTED}")
        high = None
    if low > max(MAX_COUNTED, prefix_length):
        ctx.unsupported("minItems", f"{low} is above the enforced limit of {MAX_COUNTED}")
        low = 0

    values: dict[int, Expr] = {}

    def element(position: int) -> Expr:
        if position not in values:
            values[position] = ctx.value_expr(schemas_at(layouts, position))
        separator: Expr = EMPTY if position == 0 else Sequence((Literal(","), ctx.ws))
        return Sequence((separator, values[position], ctx.ws))

    body = ctx.chain("items", element, low, high, max(prefix_length, 1))
    return Sequence((Literal("["), ctx.ws, body, Literal("]")))
