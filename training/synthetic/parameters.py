"""The add-parameter and remove-parameter families."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from tree_sitter import Node

from cad.training.synthetic.scopes import Function, functions, identifiers
from cad.training.synthetic.syntax import Candidate, Splice, Unit

_PY_PARAMETERS = (
    ("verbose", "bool", "False"),
    ("timeout", "float | None", "None"),
    ("strict", "bool", "True"),
    ("limit", "int | None", "None"),
    ("encoding", "str", '"utf-8"'),
    ("retries", "int", "3"),
    ("debug", "bool", "False"),
)
_JS_PARAMETERS = (
    ("verbose", "false"),
    ("timeout", "1000"),
    ("strict", "true"),
    ("limit", "Infinity"),
    ("encoding", "'utf-8'"),
    ("retries", "3"),
    ("options", "{}"),
)


def _parameter_name(unit: Unit, node: Node) -> Node | None:
    """The identifier a plain parameter binds (``a``, ``a=1``, ``a: int``); ``None`` for
    splats, patterns and separators."""
    if node.type == "identifier":
        return node
    if node.type in ("default_parameter", "typed_default_parameter"):
        name = node.child_by_field_name("name")
        return name if name is not None and name.type == "identifier" else None
    if node.type == "typed_parameter":
        first = node.named_children[0] if node.named_children else None
        return first if first is not None and first.type == "identifier" else None
    if node.type == "assignment_pattern" and not unit.python:
        left = node.child_by_field_name("left")
        return left if left is not None and left.type == "identifier" else None
    return None


def _parameters(function: Function) -> list[Node]:
    if function.parameters is None:
        return []
    return [child for child in function.parameters.named_children if child.type != "comment"]


def add_parameter(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Add a parameter with a default value as the last named parameter of a function."""
    for function in functions(unit):
        taken = unit.text(function.node)
        if unit.python:
            typed = any("typed" in node.type for node in _parameters(function))
            options = [
                f"{name}: {kind} = {default}" if typed else f"{name}={default}"
                for name, kind, default in _PY_PARAMETERS
                if not re.search(rf"\b{name}\b", taken)
            ]
        else:
            options = [
                f"{name} = {default}"
                for name, default in _JS_PARAMETERS
                if not re.search(rf"\b{name}\b", taken)
            ]
        if not options or _is_accessor(function):
            continue
        parameter = rng.choice(options)
        splice = _parameter_splice(unit, function, parameter)
        if splice is not None:
            yield Candidate(f"Add a parameter `{parameter}` to `{function.name}`.", (splice,))


def _is_accessor(function: Function) -> bool:
    """A JavaScript getter or setter, whose parameter count is fixed by the language."""
    return any(child.type in ("get", "set") for child in function.node.children)


def _parameter_splice(unit: Unit, function: Function, parameter: str) -> Splice | None:
    if function.parameters is None:
        single = function.node.child_by_field_name("parameter")
        if single is None:
            return None
        return single.start_byte, single.end_byte, f"({unit.text(single)}, {parameter})"
    existing = _parameters(function)
    if not existing:
        if function.parameters.type not in ("parameters", "formal_parameters"):
            return None
        start = function.parameters.start_byte + 1
        return start, start, parameter
    last = existing[-1]
    if last.type in ("dictionary_splat_pattern", "rest_pattern"):
        return last.start_byte, last.start_byte, f"{parameter}, "
    if last.start_point.row != function.parameters.start_point.row:
        indent = unit.indent(last)
        if indent is not None:
            return last.end_byte, last.end_byte, f",{unit.newline}{indent}{parameter}"
    return last.end_byte, last.end_byte, f", {parameter}"


def remove_parameter(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Remove a plain parameter that the function's body never mentions."""
    del rng
    for function in functions(unit):
        existing = _parameters(function)
        if function.parameters is None:
            single = function.node.child_by_field_name("parameter")
            if single is not None and unit.text(single) not in identifiers(unit, function.body):
                yield Candidate(
                    f"Remove the unused parameter `{unit.text(single)}` from `{function.name}`.",
                    ((single.start_byte, single.end_byte, "()"),),
                )
            continue
        if _is_accessor(function) or any(
            node.type in ("keyword_separator", "positional_separator") for node in existing
        ):
            continue
        used = identifiers(unit, function.body)
        if used & {"locals", "vars", "arguments"}:
            continue
        method = _is_method(function)
        for index, node in enumerate(existing):
            name = _parameter_name(unit, node)
            if name is None or unit.text(name) in used or (method and index == 0 and unit.python):
                continue
            if index + 1 < len(existing):
                span = (node.start_byte, existing[index + 1].start_byte)
            elif index > 0:
                span = (existing[index - 1].end_byte, node.end_byte)
            else:
                span = (function.parameters.start_byte + 1, function.parameters.end_byte - 1)
            yield Candidate(
                f"Remove the unused parameter `{unit.text(name)}` from `{function.name}`.",
                ((*span, ""),),
            )


def _is_method(function: Function) -> bool:
    """A Python ``def`` directly in a class body (its first parameter is ``self``/``cls``)."""
    parent = function.node.parent
    if parent is not None and parent.type == "decorated_definition":
        parent = parent.parent
    owner = parent.parent if parent is not None and parent.type == "block" else None
    return owner is not None and owner.type == "class_definition"
