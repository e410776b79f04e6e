"""The change-constant family: give a number or string literal another value."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from tree_sitter import Node

from cad.training.synthetic.naming import MAX_NAMED_TEXT
from cad.training.synthetic.scopes import enclosing, within
from cad.training.synthetic.syntax import Candidate, Unit, walk

_INTEGER = re.compile(r"0|[1-9][0-9]*")
_FLOAT = re.compile(r"[0-9]+\.[0-9]+")
_WORDY = re.compile(r"[A-Za-z]")
_MODULE_LOADERS = frozenset({"require", "import", "import_module", "__import__"})


def _literals(unit: Unit) -> Iterator[tuple[Node, str]]:
    """Number literals and plain one-line string literals, with their text."""
    for node in walk(unit.tree.root_node):
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
        scope, name = enclosing(unit, node)
        twins = sum(1 for other, same in literals if same == text and within(other, scope))
        new = _new_literal(text, rng)
        if twins != 1 or new is None or len(text) > MAX_NAMED_TEXT:
            continue
        where = f"in `{name}`" if name else "at the top level"
        yield Candidate(
            f"Change the constant `{text}` to `{new}` {where}.",
            ((node.start_byte, node.end_byte, new),),
        )
