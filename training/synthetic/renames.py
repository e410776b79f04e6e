"""The rename-local family: rename a variable a function binds, at every use."""

from __future__ import annotations

import random
from collections.abc import Iterator

from tree_sitter import Node

from cad.training.synthetic.naming import dunder, new_name
from cad.training.synthetic.scopes import (
    JS_SHORTHANDS,
    Function,
    bound_in_nested_scopes,
    functions,
    identifiers,
    local_names,
)
from cad.training.synthetic.syntax import Candidate, Unit, walk


def _renamable_uses(unit: Unit, function: Function, name: str) -> list[Node] | None:
    """Every identifier node of ``name`` in the function's body, or ``None`` when a rename
    could not be done by renaming identifiers alone (globals, imports, object shorthands)."""
    uses: list[Node] = []
    for node in walk(function.body):
        if node.type in JS_SHORTHANDS and unit.text(node) == name:
            return None
        if node.type != "identifier" or unit.text(node) != name:
            continue
        parent = node.parent
        assert parent is not None
        if unit.python and parent.type in (
            "global_statement",
            "nonlocal_statement",
            "dotted_name",
            "aliased_import",
        ):
            return None
        if parent.type == "attribute" and parent.child_by_field_name("attribute") == node:
            continue
        if parent.type == "keyword_argument" and parent.child_by_field_name("name") == node:
            continue
        uses.append(node)
    return uses


def rename_local(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Rename a variable bound in a function to a fresh name, at every use in its body."""
    taken = unit.source.decode("utf-8")
    for function in functions(unit):
        signature = function.parameters
        if signature is None:
            signature = function.node.child_by_field_name("parameter")
        parameters = identifiers(unit, signature) if signature is not None else set()
        nested = bound_in_nested_scopes(unit, function.body)
        for old in local_names(unit, function):
            if old in parameters or old in nested or old in ("self", "cls", "_") or dunder(old):
                continue
            uses = _renamable_uses(unit, function, old)
            new = new_name(old, unit.python, taken, rng)
            if not uses or new is None:
                continue
            yield Candidate(
                f"Rename the local variable `{old}` to `{new}` in `{function.name}`.",
                tuple((use.start_byte, use.end_byte, new) for use in uses),
            )
