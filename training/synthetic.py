"""Synthetic edits from real code, for warm-up training of a span selector.

Each family finds places in a Python or JavaScript file where one kind of edit applies
(rename a local variable, add a parameter, ...) using tree-sitter, and writes the edit as
byte splices with a templated instruction that names the thing precisely. ``before`` is the
real file, or one whole top-level definition of it when the file is longer than
``max_lines``. Every ``after`` differs from ``before`` and parses without errors (Python:
also compiles with ``ast`` when ``before`` does), so the warm-up never teaches broken code.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tree_sitter import Language, Node, Parser, Tree

from training.datasets import DatasetError, EditExample, content_id

EXTENSIONS = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript"}
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv"})
MAX_LINES = 200
MAX_NAMED_TEXT = 80
Splice = tuple[int, int, str]
"""Replace bytes ``[start, end)`` of a unit's source with a text."""

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
_JS_SHORTHANDS = frozenset(
    {"shorthand_property_identifier", "shorthand_property_identifier_pattern"}
)
_PY_TOP_LEVEL = frozenset({"function_definition", "class_definition", "decorated_definition"})
_JS_TOP_LEVEL = frozenset(
    {"function_declaration", "generator_function_declaration", "class_declaration"}
)
_JS_DECLARATIONS = frozenset({"lexical_declaration", "variable_declaration"})
_PY_WRAPPABLE = frozenset(
    {
        "expression_statement",
        "return_statement",
        "if_statement",
        "for_statement",
        "while_statement",
        "with_statement",
    }
)
_JS_WRAPPABLE = frozenset(
    {
        "expression_statement",
        "return_statement",
        "if_statement",
        "for_statement",
        "for_in_statement",
        "while_statement",
    }
)
_INTEGER = re.compile(r"0|[1-9][0-9]*")
_FLOAT = re.compile(r"[0-9]+\.[0-9]+")
_WORDY = re.compile(r"[A-Za-z]")
_VERBS = frozenset(
    """
    abort accept acquire activate add allocate append apply assign attach bind build cache call
    cancel check clean clear close collect commit compare compile complete compute configure
    connect convert copy count create decode define delete describe destroy detach diff disable
    dispatch display dispose draw dump emit enable encode ensure escape evaluate exec execute
    expand explain export extend extract fetch fill filter find finish fix flush format gather generate
    get group handle hash import init insert install invoke join list load lock log lookup make
    map mark match measure merge migrate mount move normalize notify open pack parse patch pick
    pop prepare print process publish pull push put query read rebuild refresh register reject
    release reload remove rename render replace report request reset resize resolve restore
    retry run sample save scale scan schedule search select send serialize set setup show sign
    sort split start stop store strip subscribe swap sync toggle track transform translate trim
    unlock unpack unregister update upload validate verify view visit wait walk warn watch wrap
    write
    """.split()  # noqa: SIM905 - a word list reads best as text
)
_MODULE_LOADERS = frozenset({"require", "import", "import_module", "__import__"})
_PREDICATES = frozenset({"is", "has", "can", "should"})
_PREPOSITIONS = frozenset({"as", "by", "for", "from", "in", "of", "on", "to", "with"})
_SYNONYMS = {
    "total": ("subtotal", "running_total"),
    "result": ("output", "outcome"),
    "results": ("outputs", "collected"),
    "count": ("counter", "tally"),
    "data": ("payload", "raw_data"),
    "items": ("entries", "elements"),
    "item": ("entry", "element"),
    "value": ("val", "current_value"),
    "values": ("vals", "numbers"),
    "name": ("label", "title"),
    "line": ("row", "text_line"),
    "lines": ("rows", "text_lines"),
    "key": ("k", "lookup_key"),
    "i": ("index", "idx"),
    "j": ("inner_index", "col"),
    "n": ("size", "length"),
    "x": ("value", "element"),
    "tmp": ("temp", "scratch"),
    "res": ("result", "answer"),
    "path": ("file_path", "location"),
    "text": ("content", "source"),
    "out": ("output", "buffer"),
    "acc": ("accumulator", "running"),
}
_NAME_PATTERNS = ("new_{}", "{}_value", "current_{}", "local_{}")
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
_EXCEPTIONS = ("Exception", "ValueError", "KeyError", "OSError", "TypeError")


@dataclass(frozen=True)
class Unit:
    """The text an edit is made in (a whole file or one top-level definition), parsed."""

    language: str
    source: bytes
    tree: Tree

    @property
    def python(self) -> bool:
        return self.language == "python"

    @property
    def newline(self) -> str:
        return "\r\n" if b"\r\n" in self.source else "\n"

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8")

    def line_start(self, offset: int) -> int:
        return self.source.rfind(b"\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        """The offset just past the newline ending the line of ``offset`` (or the end)."""
        end = self.source.find(b"\n", offset)
        return len(self.source) if end < 0 else end + 1

    def indent(self, node: Node) -> str | None:
        """The whitespace before ``node`` on its line; ``None`` if other text precedes it."""
        prefix = self.source[self.line_start(node.start_byte) : node.start_byte]
        return None if prefix.strip() else prefix.decode("utf-8")

    def ends_line(self, node: Node) -> bool:
        """Whether only whitespace or a line comment follows ``node`` on its last line."""
        rest = self.source[node.end_byte : self.line_end(node.end_byte)].strip()
        return not rest or rest.startswith(b"#" if self.python else b"//")


@dataclass(frozen=True)
class Function:
    """A named function of a unit: its qualified name (``Class.method``) and parts."""

    node: Node
    name: str
    parameters: Node | None
    body: Node
    anchor: Node
    """The node a JSDoc comment goes above (the declaration, its ``export``, the method)."""


@dataclass(frozen=True)
class Candidate:
    """One possible edit of a unit."""

    instruction: str
    splices: tuple[Splice, ...]


@dataclass(frozen=True)
class Family:
    """A kind of synthetic edit: its name, what it does, an example instruction, and the
    generator of its candidate edits in a unit."""

    name: str
    summary: str
    example: str
    generate: Callable[[Unit, random.Random], Iterator[Candidate]]


@dataclass(frozen=True)
class SyntheticEdit:
    """A generated edit and the family that made it."""

    family: str
    example: EditExample


@cache
def _language(name: str) -> Language:
    if name == "python":
        import tree_sitter_python

        return Language(tree_sitter_python.language())
    import tree_sitter_javascript

    return Language(tree_sitter_javascript.language())


def parse_unit(text: str, language: str) -> Unit:
    """Parse ``text`` (``python`` or ``javascript``) with tree-sitter."""
    source = text.encode("utf-8")
    return Unit(language, source, Parser(_language(language)).parse(source))


def parses(text: str, language: str, *, compiles: bool = False) -> bool:
    """Whether ``text`` parses without tree-sitter errors; with ``compiles``, Python text must
    also compile with ``ast`` (tree-sitter accepts a few things CPython rejects)."""
    if parse_unit(text, language).tree.root_node.has_error:
        return False
    if compiles and language == "python":
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False
    return True


def _walk(node: Node, stop: frozenset[str] = frozenset()) -> Iterator[Node]:
    """``node``'s descendants in source order, not entering (but yielding) ``stop`` types.
    Iterative, so deeply nested code cannot exhaust Python's recursion limit."""
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        yield child
        if child.type not in stop:
            stack.extend(reversed(child.children))


def _apply(source: bytes, splices: Iterable[Splice]) -> str:
    out = source
    for start, end, text in sorted(splices, key=lambda splice: splice[0], reverse=True):
        out = out[:start] + text.encode("utf-8") + out[end:]
    return out.decode("utf-8")


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


def _enclosing(unit: Unit, node: Node) -> tuple[Node, str | None]:
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


def _within(node: Node, scope: Node) -> bool:
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
    for node in _walk(unit.tree.root_node):
        body = node.child_by_field_name("body")
        if node.type not in kinds or body is None:
            continue
        label = _label(unit, node)
        if label is None:
            continue
        _, outer = _enclosing(unit, node)
        name = f"{outer}.{label}" if outer else label
        parameters = node.child_by_field_name("parameters")
        anchor = node if unit.python else _js_anchor(node)
        found.append(Function(node, name, parameters, body, anchor))
    counts = Counter(function.name for function in found)
    return [function for function in found if counts[function.name] == 1]


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


def _identifiers(unit: Unit, node: Node) -> set[str]:
    """The variable names in ``node`` and below (identifiers and JS object shorthands)."""
    return {
        unit.text(child)
        for child in (node, *_walk(node))
        if child.type == "identifier" or child.type in _JS_SHORTHANDS
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
        return _identifiers(unit, node)
    if unit.python:
        return {unit.text(target) for target in _py_bindings(node)}
    field = {
        "variable_declarator": "name",
        "catch_clause": "parameter",
        "for_in_statement": "left",
        "arrow_function": "parameter",
    }.get(node.type)
    target = node.child_by_field_name(field) if field else None
    return _identifiers(unit, target) if target is not None else set()


def _bound_in_nested_scopes(unit: Unit, body: Node) -> set[str]:
    """Names bound anywhere inside the functions, classes and comprehensions nested in
    ``body`` (a rename skips these names rather than reason about shadowing)."""
    scopes = _PY_SCOPES if unit.python else _JS_SCOPES
    bound: set[str] = set()
    for scope in (node for node in _walk(body) if node.type in scopes):
        for node in (scope, *_walk(scope)):
            bound |= _bindings(unit, node)
    return bound


def _locals(unit: Unit, function: Function) -> list[str]:
    """Names the function itself binds (not its nested scopes), in order of first binding."""
    scopes = _PY_SCOPES if unit.python else _JS_SCOPES
    names: dict[str, None] = {}
    for node in _walk(function.body, scopes):
        if unit.python:
            names.update((unit.text(target), None) for target in _py_bindings(node))
        elif node.type == "variable_declarator":
            name = node.child_by_field_name("name")
            if name is not None and name.type == "identifier":
                names[unit.text(name)] = None
    return list(names)


def _renamable_uses(unit: Unit, function: Function, name: str) -> list[Node] | None:
    """Every identifier node of ``name`` in the function's body, or ``None`` when a rename
    could not be done by renaming identifiers alone (globals, imports, object shorthands)."""
    uses: list[Node] = []
    for node in _walk(function.body):
        if node.type in _JS_SHORTHANDS and unit.text(node) == name:
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


def _new_name(old: str, python: bool, taken: str, rng: random.Random) -> str | None:
    """A fresh name for ``old`` that occurs nowhere in ``taken`` (snake_case for Python,
    camelCase for JavaScript; capitalised when ``old`` is)."""
    options = [*_SYNONYMS.get(old.lower(), ()), *(p.format(old) for p in _NAME_PATTERNS)]
    if not python:
        options = [_camel(option) for option in options]
    if old[:1].isupper():
        options = [option[:1].upper() + option[1:] for option in options]
    fresh = [
        option
        for option in options
        if option != old and not re.search(rf"(?<![\w$]){re.escape(option)}(?![\w$])", taken)
    ]
    return rng.choice(fresh) if fresh else None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.strip("_$#"))
    return [word.lower() for word in re.split(r"[\s_]+", spaced) if word]


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _summary(qualified: str) -> str | None:
    """A one-sentence description of a function from its name (``load_config`` → ``Load
    config.``, ``is_empty`` → ``Return whether empty.``, ``mean`` → ``Return the mean.``);
    ``None`` for special methods and names too bare to describe (``add``, ``run``)."""
    name = qualified.rsplit(".", 1)[-1]
    words = _words(name)
    if _dunder(name) or name == "constructor" or not words:
        return None
    first, rest = words[0], " ".join(words[1:])
    if first in _VERBS or first in _PREDICATES or first in _PREPOSITIONS:
        if not rest:
            return None
        if first in _PREDICATES:
            sentence = f"return whether {rest}"
        elif first in _PREPOSITIONS:
            sentence = f"return the value {first} {rest}"
        else:
            sentence = f"{first} {rest}"
    else:
        sentence = "return the " + " ".join(words)
    return sentence[0].upper() + sentence[1:] + "."


def rename_local(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Rename a variable bound in a function to a fresh name, at every use in its body."""
    taken = unit.source.decode("utf-8")
    for function in functions(unit):
        signature = function.parameters
        if signature is None:
            signature = function.node.child_by_field_name("parameter")
        parameters = _identifiers(unit, signature) if signature is not None else set()
        nested = _bound_in_nested_scopes(unit, function.body)
        for old in _locals(unit, function):
            if old in parameters or old in nested or old in ("self", "cls", "_") or _dunder(old):
                continue
            uses = _renamable_uses(unit, function, old)
            new = _new_name(old, unit.python, taken, rng)
            if not uses or new is None:
                continue
            yield Candidate(
                f"Rename the local variable `{old}` to `{new}` in `{function.name}`.",
                tuple((use.start_byte, use.end_byte, new) for use in uses),
            )


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
            if single is not None and unit.text(single) not in _identifiers(unit, function.body):
                yield Candidate(
                    f"Remove the unused parameter `{unit.text(single)}` from `{function.name}`.",
                    ((single.start_byte, single.end_byte, "()"),),
                )
            continue
        if _is_accessor(function) or any(
            node.type in ("keyword_separator", "positional_separator") for node in existing
        ):
            continue
        used = _identifiers(unit, function.body)
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


def add_docstring(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Document a function that has no documentation: a Python docstring as the first line
    of its body, or a one-line JSDoc comment above a JavaScript function."""
    del rng
    for function in functions(unit):
        text = _summary(function.name)
        if text is None:
            continue
        splice = (
            _py_docstring(unit, function, text) if unit.python else _jsdoc(unit, function, text)
        )
        if splice is not None:
            kind = "docstring" if unit.python else "JSDoc comment"
            yield Candidate(f'Add the {kind} "{text}" to `{function.name}`.', (splice,))


def _py_docstring(unit: Unit, function: Function, text: str) -> Splice | None:
    statements = [node for node in function.body.named_children if node.type != "comment"]
    colons = [child for child in function.node.children if child.type == ":"]
    if not statements or not colons or _is_docstring(statements[0]):
        return None
    if statements[0].start_point.row == colons[-1].end_point.row:
        return None
    indent = unit.indent(statements[0])
    if indent is None:
        return None
    start = unit.line_end(colons[-1].end_byte)
    return start, start, f'{indent}"""{text}"""{unit.newline}'


def _is_docstring(node: Node) -> bool:
    return (
        node.type == "expression_statement"
        and node.named_child_count == 1
        and node.named_children[0].type in ("string", "concatenated_string")
    )


def _jsdoc(unit: Unit, function: Function, text: str) -> Splice | None:
    anchor = function.anchor
    if anchor.type in _JS_DECLARATIONS and anchor.named_child_count != 1:
        return None
    previous = anchor.prev_sibling
    if (
        previous is not None
        and previous.type == "comment"
        and previous.end_point.row >= anchor.start_point.row - 1
    ):
        return None
    indent = unit.indent(anchor)
    if indent is None:
        return None
    start = unit.line_start(anchor.start_byte)
    return start, start, f"{indent}/** {text} */{unit.newline}"


def _literals(unit: Unit) -> Iterator[tuple[Node, str]]:
    """Number literals and plain one-line string literals, with their text."""
    for node in _walk(unit.tree.root_node):
        string = node.type == "string" and _plain_string(unit, node)
        if string or node.type in ("integer", "float", "number"):
            yield node, unit.text(node)


def _plain_string(unit: Unit, node: Node) -> bool:
    """A one-line string without prefixes, escapes or interpolation that is data: not a
    docstring or directive, and not a module name (``import``, ``require('x')``)."""
    parent = node.parent
    if parent is None or parent.type in (
        "expression_statement",
        "import_statement",
        "export_statement",
        "concatenated_string",
    ):
        return False
    call = parent.parent if parent.type in ("arguments", "argument_list") else None
    callee = call.child_by_field_name("function") if call is not None else None
    if callee is not None and unit.text(callee).rsplit(".", 1)[-1] in _MODULE_LOADERS:
        return False
    quote = unit.text(node.children[0]) if node.children else ""
    if quote not in ("'", '"') or node.start_point.row != node.end_point.row:
        return False
    inner = [
        child for child in node.named_children if child.type not in ("string_start", "string_end")
    ]
    content = "".join(unit.text(child) for child in inner)
    return (
        all(child.type in ("string_content", "string_fragment") for child in inner)
        and len(content) <= 40
        and "\\" not in content
        and "`" not in content
    )


def _new_literal(literal: str, rng: random.Random) -> str | None:
    if _INTEGER.fullmatch(literal):
        value = int(literal)
        options = {value + 1, value * 2, value + 10} | ({value - 1} if value > 0 else set())
        return str(rng.choice(sorted(options - {value})))
    if _FLOAT.fullmatch(literal):
        value = float(literal)
        options = [repr(round(v, 6)) for v in (value * 2, value / 2, value + 1)]
        fresh = [o for o in options if _FLOAT.fullmatch(o) and float(o) != value]
        return rng.choice(fresh) if fresh else None
    if len(literal) < 2 or literal[0] not in "'\"":
        return None
    quote, content = literal[0], literal[1:-1]
    if content and not _WORDY.search(content):
        return None
    variants = {
        content.upper(),
        content.lower(),
        content.title(),
        content.replace("_", "-"),
        content.replace("-", "_"),
        content or "default",
    }
    fresh = sorted(v for v in variants if v != content and quote not in v)
    return quote + rng.choice(fresh) + quote if fresh else None


def change_constant(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Change a number or string literal that occurs once in its function or class (or at
    the top level) to another value."""
    literals = list(_literals(unit))
    for node, text in literals:
        scope, name = _enclosing(unit, node)
        twins = sum(1 for other, same in literals if same == text and _within(other, scope))
        new = _new_literal(text, rng)
        if twins != 1 or new is None or len(text) > MAX_NAMED_TEXT:
            continue
        where = f"in `{name}`" if name else "at the top level"
        yield Candidate(
            f"Change the constant `{text}` to `{new}` {where}.",
            ((node.start_byte, node.end_byte, new),),
        )


def delete_statement(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Delete a one-line expression statement (a call, an assignment) that has a line of its
    own and leaves a sibling statement behind, and whose text occurs once in its scope."""
    del rng
    blocks = ("block", "module") if unit.python else ("statement_block", "program")
    statements = [
        (node, unit.text(node))
        for node in _walk(unit.tree.root_node)
        if node.type == "expression_statement" and not _is_docstring(node)
    ]
    for node, text in statements:
        parent = node.parent
        if (
            parent is None
            or parent.type not in blocks
            or node.start_point.row != node.end_point.row
            or unit.indent(node) is None
            or not unit.ends_line(node)
            or len(text) > MAX_NAMED_TEXT
            or "`" in text
            or not any(c.type != "comment" and c != node for c in parent.named_children)
        ):
            continue
        scope, name = _enclosing(unit, node)
        if sum(1 for other, same in statements if same == text and _within(other, scope)) != 1:
            continue
        instruction = (
            f"Delete the statement `{text}` from `{name}`."
            if name
            else f"Delete the top-level statement `{text}`."
        )
        start = unit.line_start(node.start_byte)
        yield Candidate(instruction, ((start, unit.line_end(node.end_byte), ""),))


def wrap_try(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Wrap one statement of a function body in try/except (Python, ignoring one exception
    type) or try/catch (JavaScript, logging the error); the statement's first line occurs
    once in the function."""
    wrappable = _PY_WRAPPABLE if unit.python else _JS_WRAPPABLE
    for function in functions(unit):
        line = unit.source[unit.line_start(function.node.start_byte) : function.node.start_byte]
        head_indent = line[: len(line) - len(line.lstrip())].decode("utf-8")
        descriptions = Counter(
            _describe(unit, node) for node in _walk(function.body) if node.type in wrappable
        )
        for node in function.body.named_children:
            description = _describe(unit, node)
            indent = unit.indent(node)
            if (
                node.type not in wrappable
                or _is_docstring(node)
                or description is None
                or descriptions[description] != 1
                or indent is None
                or not indent.startswith(head_indent)
                or len(indent) == len(head_indent)
                or node.start_point.row == function.node.start_point.row
                or not unit.ends_line(node)
                or _has_multiline_string(node)
            ):
                continue
            splice, handler = _try_splice(unit, node, indent, indent[len(head_indent) :], rng)
            yield Candidate(f"Wrap `{description}` in `{function.name}` in {handler}.", (splice,))


def _describe(unit: Unit, node: Node) -> str | None:
    first = unit.text(node).splitlines()[0].strip()
    text = first if node.start_point.row == node.end_point.row else first + " ..."
    return None if len(text) > MAX_NAMED_TEXT or "`" in text else text


def _has_multiline_string(node: Node) -> bool:
    return any(
        child.type in ("string", "template_string") and child.start_point.row != child.end_point.row
        for child in _walk(node)
    )


def _try_splice(
    unit: Unit, node: Node, indent: str, step: str, rng: random.Random
) -> tuple[Splice, str]:
    nl = unit.newline
    start = unit.line_start(node.start_byte)
    end = unit.line_end(node.end_byte)
    lines = unit.source[start:end].decode("utf-8").splitlines()
    body = "".join((step + line if line.strip() else line) + nl for line in lines)
    final = nl if unit.source[start:end].endswith(b"\n") else ""
    if unit.python:
        error = rng.choice(_EXCEPTIONS)
        text = f"{indent}try:{nl}{body}{indent}except {error}:{nl}{indent}{step}pass{final}"
        return (start, end, text), f"a try/except that ignores `{error}`"
    text = (
        f"{indent}try {{{nl}{body}{indent}}} catch (error) {{{nl}"
        f"{indent}{step}console.error(error);{nl}{indent}}}{final}"
    )
    return (start, end, text), "a try/catch that logs the error with `console.error`"


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "rename-local",
            "rename a local variable at every use in one function",
            "Rename the local variable `total` to `subtotal` in `mean`.",
            rename_local,
        ),
        Family(
            "add-parameter",
            "add a parameter with a default value to a function",
            "Add a parameter `verbose=False` to `load`.",
            add_parameter,
        ),
        Family(
            "remove-parameter",
            "remove a parameter the function body never uses",
            "Remove the unused parameter `strict` from `parse`.",
            remove_parameter,
        ),
        Family(
            "add-docstring",
            "add a docstring (Python) or JSDoc comment (JavaScript) to an undocumented function",
            'Add the docstring "Return the mean." to `mean`.',
            add_docstring,
        ),
        Family(
            "change-constant",
            "change a number or string literal that occurs once in its scope",
            "Change the constant `3` to `5` in `retry`.",
            change_constant,
        ),
        Family(
            "delete-statement",
            "delete a one-line expression statement or assignment",
            "Delete the statement `print(total)` from `mean`.",
            delete_statement,
        ),
        Family(
            "wrap-try",
            "wrap a statement of a function body in try/except (Python) or try/catch (JS)",
            "Wrap `data = json.load(handle)` in `load` in a try/except that ignores `ValueError`.",
            wrap_try,
        ),
    )
}


def choose_families(names: Sequence[str] | None) -> list[Family]:
    """The families called ``names`` (all of them for ``None`` or an empty list); an unknown
    name raises ``DatasetError`` listing the known ones."""
    if not names:
        return list(FAMILIES.values())
    unknown = [name for name in names if name not in FAMILIES]
    if unknown:
        raise DatasetError(f"unknown edit family {unknown[0]!r} (families: {', '.join(FAMILIES)})")
    return [FAMILIES[name] for name in dict.fromkeys(names)]


def source_files(paths: Iterable[Path]) -> list[Path]:
    """The Python and JavaScript files named by ``paths``: files as given, folders searched
    recursively (skipping hidden folders, ``node_modules`` and the like), each once, sorted
    per folder. A missing path or a named file of another language raises ``DatasetError``."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                parts = file.relative_to(path).parts
                if (
                    file.suffix in EXTENSIONS
                    and file.is_file()
                    and not any(p.startswith(".") or p in SKIPPED_FOLDERS for p in parts[:-1])
                ):
                    found[file] = None
        elif path.is_file():
            if path.suffix not in EXTENSIONS:
                raise DatasetError(
                    f"{path}: not a Python or JavaScript file ({', '.join(EXTENSIONS)})"
                )
            found[path] = None
        else:
            raise DatasetError(f"{path}: no such file or folder")
    return list(found)


def units(text: str, language: str, max_lines: int = MAX_LINES) -> list[Unit]:
    """The texts edits are made in: the whole file when it has at most ``max_lines`` lines,
    else each whole top-level function or class (with the comments just above it) of at
    most ``max_lines`` lines. Texts that do not parse cleanly are left out."""
    if text.count("\n") <= max_lines:
        pieces = [text]
    else:
        whole = parse_unit(text, language)
        pieces = []
        for node in whole.tree.root_node.named_children:
            if not _top_level_definition(node, language):
                continue
            first = node
            while (
                (previous := first.prev_named_sibling) is not None
                and previous.type == "comment"
                and previous.end_point.row >= first.start_point.row - 1
                and previous.start_point.column == 0
            ):
                first = previous
            start = whole.line_start(first.start_byte)
            piece = whole.source[start : whole.line_end(node.end_byte)].decode("utf-8")
            if node.end_point.row - first.start_point.row < max_lines:
                pieces.append(piece)
    return [
        parse_unit(piece, language) for piece in pieces if parses(piece, language, compiles=True)
    ]


def _top_level_definition(node: Node, language: str) -> bool:
    if language == "python":
        return node.type in _PY_TOP_LEVEL
    if node.type == "export_statement":
        return any(_top_level_definition(child, language) for child in node.named_children)
    if node.type in _JS_DECLARATIONS:
        return any(
            (value := declarator.child_by_field_name("value")) is not None
            and value.type in ("arrow_function", "function_expression")
            for declarator in node.named_children
            if declarator.type == "variable_declarator"
        )
    return node.type in _JS_TOP_LEVEL


def _read(path: Path) -> str | None:
    """A source file's text; ``None`` for one that is not UTF-8 or ends lines with a lone
    CR (tree-sitter and the resolver would count its lines differently)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return None if "\r" in text.replace("\r\n", "") else text


def edit_file(
    text: str,
    language: str,
    *,
    per_file: int,
    rng: random.Random,
    families: Sequence[Family],
    max_lines: int = MAX_LINES,
) -> list[SyntheticEdit]:
    """Up to ``per_file`` valid edits of one source text, spread over the families: each
    family's candidates are shuffled and the families take turns (in shuffled order), so a
    family with many candidates cannot crowd out the others."""
    queues: list[tuple[Family, list[tuple[Unit, Candidate]]]] = []
    pieces = units(text, language, max_lines)
    for family in families:
        queue = [(unit, candidate) for unit in pieces for candidate in family.generate(unit, rng)]
        rng.shuffle(queue)
        if queue:
            queues.append((family, queue))
    rng.shuffle(queues)
    edits: list[SyntheticEdit] = []
    while queues and len(edits) < per_file:
        family, queue = queues.pop(0)
        edit = _first_valid(family, queue)
        if edit is not None:
            edits.append(edit)
        if queue:
            queues.append((family, queue))
    return edits


def _first_valid(family: Family, queue: list[tuple[Unit, Candidate]]) -> SyntheticEdit | None:
    while queue:
        unit, candidate = queue.pop()
        before = unit.source.decode("utf-8")
        after = _apply(unit.source, candidate.splices)
        if after != before and parses(after, unit.language, compiles=True):
            identifier = content_id(candidate.instruction, before, after)
            return SyntheticEdit(
                family.name, EditExample(identifier, candidate.instruction, before, after)
            )
    return None


def generate(
    paths: Iterable[Path],
    *,
    per_file: int = 5,
    seed: int = 0,
    families: Sequence[str] | None = None,
    max_lines: int = MAX_LINES,
) -> list[SyntheticEdit]:
    """Synthetic edits of the Python and JavaScript files under ``paths``, with the family
    of each. Deterministic: each file draws from ``random.Random`` seeded by ``seed`` and the
    file's content, so adding a file never changes the edits of the others. Files that are
    not UTF-8 or do not parse are skipped; edits with the same id are kept once."""
    if per_file < 1:
        raise ValueError("per_file must be at least 1")
    chosen = choose_families(families)
    edits: list[SyntheticEdit] = []
    seen: set[str] = set()
    for path in source_files(paths):
        text = _read(path)
        if text is None:
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        rng = random.Random(f"{seed}:{digest}")
        for edit in edit_file(
            text,
            EXTENSIONS[path.suffix],
            per_file=per_file,
            rng=rng,
            families=chosen,
            max_lines=max_lines,
        ):
            if edit.example.id not in seen:
                seen.add(edit.example.id)
                edits.append(edit)
    return edits


def synthesize(
    paths: Iterable[Path],
    *,
    per_file: int = 5,
    seed: int = 0,
    families: Sequence[str] | None = None,
    max_lines: int = MAX_LINES,
) -> list[EditExample]:
    """Synthetic warm-up edits of the files under ``paths`` (see ``generate``), as
    ``EditExample`` rows ready for ``write_jsonl``."""
    return [
        edit.example
        for edit in generate(
            paths, per_file=per_file, seed=seed, families=families, max_lines=max_lines
        )
    ]
