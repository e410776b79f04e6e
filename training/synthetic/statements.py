"""The delete-statement and wrap-try families: edits of whole statements."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

from tree_sitter import Node

from cad.training.synthetic.naming import MAX_NAMED_TEXT
from cad.training.synthetic.scopes import enclosing, functions, within
from cad.training.synthetic.syntax import Candidate, Splice, Unit, is_docstring, walk

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
_EXCEPTIONS = ("Exception", "ValueError", "KeyError", "OSError", "TypeError")


def delete_statement(unit: Unit, rng: random.Random) -> Iterator[Candidate]:
    """Delete a one-line expression statement (a call, an assignment) that has a line of its
    own and leaves a sibling statement behind, and whose text occurs once in its scope."""
    del rng
    blocks = ("block", "module") if unit.python else ("statement_block", "program")
    statements = [
        (node, unit.text(node))
        for node in walk(unit.tree.root_node)
        if node.type == "expression_statement" and not is_docstring(node)
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
        scope, name = enclosing(unit, node)
        if sum(1 for other, same in statements if same == text and within(other, scope)) != 1:
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
            _describe(unit, node) for node in walk(function.body) if node.type in wrappable
        )
        for node in function.body.named_children:
            description = _describe(unit, node)
            indent = unit.indent(node)
            if (
                node.type not in wrappable
                or is_docstring(node)
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
        for child in walk(node)
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
