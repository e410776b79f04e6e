"""Parsed source units, tree walking, and edits as byte splices."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

from tree_sitter import Language, Node, Parser, Tree

Splice = tuple[int, int, str]
"""Replace bytes ``[start, end)`` of a unit's source with a text."""


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
class Candidate:
    """One possible edit of a unit."""

    instruction: str
    splices: tuple[Splice, ...]


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


def walk(node: Node, stop: frozenset[str] = frozenset()) -> Iterator[Node]:
    """``node``'s descendants in source order, not entering (but yielding) ``stop`` types.
    Iterative, so deeply nested code cannot exhaust Python's recursion limit."""
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        yield child
        if child.type not in stop:
            stack.extend(reversed(child.children))


def apply_splices(source: bytes, splices: Iterable[Splice]) -> str:
    """``source`` with ``splices`` made, last first so earlier offsets stay valid, as text."""
    out = source
    for start, end, text in sorted(splices, key=lambda splice: splice[0], reverse=True):
        out = out[:start] + text.encode("utf-8") + out[end:]
    return out.decode("utf-8")


def is_docstring(node: Node) -> bool:
    """Whether ``node`` is a statement of a lone string literal (a docstring or directive)."""
    return (
        node.type == "expression_statement"
        and node.named_child_count == 1
        and node.named_children[0].type in ("string", "concatenated_string")
    )
