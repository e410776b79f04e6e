"""Functions, their names and scopes, and the names they bind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from cad.training.synthetic.syntax import Unit, walk

JS_SHORTHANDS = frozenset(
    {"shorthand_property_identifier", "shorthand_property_identifier_pattern"}
)
"""Object shorthands (``{name}``): one identifier that is both a key and a variable."""
JS_DECLARATIONS = frozenset({"lexical_declaration", "variable_declaration"})
"""``const``, ``let`` and ``var`` statements."""

_PY_FUNCTIONS = frozenset({"function_definition"})
_JS_FUNCTIONS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_expression",
        "generator_function",
        "arrow_function",
        "method_definition",
    }
)
_PY_SCOPES = frozenset(
    {
        "function_definition",
        "lambda",
        "class_definition",
        "list_comprehension",
        "set_comprehension",
        "dictionary_comprehension",
        "generator_expression",
    }
)
_JS_SCOPES = _JS_FUNCTIONS | {"class_declaration", "class"}
_PY_TARGET_GROUPS = frozenset(
    {"pattern_list", "tuple_pattern", "list_pattern", "list_splat_pattern", "tuple", "list"}
)
_JS_NAME_TYPES = frozenset({"identifier", "property_identifier", "private_property_identifier"})


@dataclass(frozen=True)
class Function:
    """A named function of a unit: its qualified name (``Class.method``) and parts."""

    node: Node
    name: str
    parameters: Node | None
    body: Node
    anchor: Node
    """The node a JSDoc comment goes above (the declaration, its ``export``, the method)."""


def _named(unit: Unit, node: Node | None) -> str | None:
    if node is None or node.type not in ("identifier", *_JS_NAME_TYPES):
        return None
    return unit.text(node)


def _js_function_name(unit: Unit, node: Node) -> str | None:
    if node.type in ("function_expression", "generator_function", "arrow_function"):
        parent = node.parent
        if parent is not None and parent.type == "variable_declarator":
            return _named(unit, parent.child_by_field_name("name"))
        if parent is not None and parent.type == "field_definition":
            return _named(unit, parent.child_by_field_name("property"))
        return None
    return _named(unit, node.child_by_field_name("name"))


def _label(unit: Unit, node: Node) -> str | None:
    """The name of a function or class node as instructions call it; ``None`` for other
    nodes and anonymous functions."""
    if node.type in ("class_definition", "class_declaration", "class"):
        return _named(unit, node.child_by_field_name("name"))
    if unit.python:
        return (
            _named(unit, node.child_by_field_name("name")) if node.type in _PY_FUNCTIONS else None
        )
    return _js_function_name(unit, node) if node.type in _JS_FUNCTIONS else None


def enclosing(unit: Unit, node: Node) -> tuple[Node, str | None]:
    """The innermost named function or class around ``node`` and its qualified name
    (``Class.method``); the root and ``None`` at the top level."""
    names: list[str] = []
    innermost: Node | None = None
    current = node.parent
    while current is not None:
        label = _label(unit, current)
        if label is not None:
            names.append(label)
            innermost = innermost or current
        current = current.parent
    return innermost or unit.tree.root_node, ".".join(reversed(names)) or None


def within(node: Node, scope: Node) -> bool:
    """Whether ``node`` lies inside ``scope`` (or is it)."""
    return scope.start_byte <= node.start_byte and node.end_byte <= scope.end_byte


def _js_anchor(node: Node) -> Node:
    anchor = node
    if node.type in ("function_expression", "generator_function", "arrow_function"):
        declarator = node.parent
        assert declarator is not None
        anchor = declarator
        if declarator.type == "variable_declarator" and declarator.parent is not None:
            anchor = declarator.parent
    if anchor.parent is not None and anchor.parent.type == "export_statement":
        anchor = anchor.parent
    return anchor


def functions(unit: Unit) -> list[Function]:
    """The named functions of ``unit`` in source order: Python ``def``s; JavaScript function
    declarations, methods, and function or arrow values of a variable or class field. A
    name given to two functions (a getter and its setter, a redefinition) is left out, so
    every instruction names one function."""
    kinds = _PY_FUNCTIONS if unit.python else _JS_FUNCTIONS
    found: list[Function] = []
    for node in walk(unit.tree.root_node):
        body = node.child_by_field_name("body")
        if node.type not in kinds or body is None:
            continue
        label = _label(unit, node)
        if label is None:
            continue
        _, outer = enclosing(unit, node)
        name = f"{outer}.{label}" if outer else label
        parameters = node.child_by_field_name("parameters")
        anchor = node if unit.python else _js_anchor(node)
        found.append(Function(node, name, parameters, body, anchor))
    counts = Counter(function.name for function in found)
    return [function for function in found if counts[function.name] == 1]


def identifiers(unit: Unit, node: Node) -> set[str]:
    """The variable names in ``node`` and below (identifiers and JS object shorthands)."""
    return {
        unit.text(child)
        for child in (node, *walk(node))
        if child.type == "identifier" or child.type in JS_SHORTHANDS
    }


def _py_targets(node: Node) -> Iterator[Node]:
    if node.type == "identifier":
        yield node
    elif node.type in _PY_TARGET_GROUPS:
        for child in node.named_children:
            yield from _py_targets(child)


def _py_bindings(node: Node) -> Iterator[Node]:
    """Identifiers bound by assignments and ``for`` targets in ``node``."""
    if node.type in ("assignment", "augmented_assignment", "for_statement", "for_in_clause"):
        left = node.child_by_field_name("left")
        if left is not None:
            yield from _py_targets(left)
    elif node.type == "named_expression":
        name = node.child_by_field_name("name")
        if name is not None:
            yield name


def _bindings(unit: Unit, node: Node) -> set[str]:
    """The names ``node`` itself binds: parameters, assignment and loop targets, JS
    declarations and ``catch`` parameters."""
    if node.type in ("parameters", "lambda_parameters", "formal_parameters"):
        return identifiers(unit, node)
    if unit.python:
        return {unit.text(target) for target in _py_bindings(node)}
    field = {
        "variable_declarator": "name",
        "catch_clause": "parameter",
        "for_in_statement": "left",
        "arrow_function": "parameter",
    }.get(node.type)
    target = node.child_by_field_name(field) if field else None
    return identifiers(unit, target) if target is not None else set()


def bound_in_nested_scopes(unit: Unit, body: Node) -> set[str]:
    """Names bound anywhere inside the functions, classes and comprehensions nested in
    ``body`` (a rename skips these names rather than reason about shadowing)."""
    scopes = _PY_SCOPES if unit.python else _JS_SCOPES
    bound: set[str] = set()
    for scope in (node for node in walk(body) if node.type in scopes):
        for node in (scope, *walk(scope)):
            bound |= _bindings(unit, node)
    return bound


def local_names(unit: Unit, function: Function) -> list[str]:
    """Names the function itself binds (not its nested scopes), in order of first binding."""
    scopes = _PY_SCOPES if unit.python else _JS_SCOPES
    names: dict[str, None] = {}
    for node in walk(function.body, scopes):
        if unit.python:
            names.update((unit.text(target), None) for target in _py_bindings(node))
        elif node.type == "variable_declarator":
            name = node.child_by_field_name("name")
            if name is not None and name.type == "identifier":
                names[unit.text(name)] = None
    return list(names)
