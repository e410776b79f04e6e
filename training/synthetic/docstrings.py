"""The add-docstring family: a Python docstring or a JSDoc comment for a function."""

from __future__ import annotations

import random
from collections.abc import Iterator

from cad.training.synthetic.naming import summary
from cad.training.synthetic.scopes import JS_DECLARATIONS, Function, functions
from cad.training.synthetic.syntax import Candidate, Splice, Unit, is_docstring


def add_docstring(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Document a function that has no documentation: a Python docstring as the first line
    of its body, or a one-line JSDoc comment above a JavaScript function."""
    del rng
    for function in functions(unit):
        text = summary(function.name)
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
    if not statements or not colons or is_docstring(statements[0]):
        return None
    if statements[0].start_point.row == colons[-1].end_point.row:
        return None
    indent = unit.indent(statements[0])
    if indent is None:
        return None
    start = unit.line_end(colons[-1].end_byte)
    return start, start, f'{indent}"""{text}"""{unit.newline}'


def _jsdoc(unit: Unit, function: Function, text: str) -> Splice | None:
    anchor = function.anchor
    if anchor.type in JS_DECLARATIONS and anchor.named_child_count != 1:
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
