"""Snapping a line range to the smallest function or class around it.

An instruction such as "make this faster" means the whole function even when the selection
covers only a few of its lines; with ``snap`` the edit widens to the smallest enclosing
definition (decorators and ``export`` included) so the model sees, and may rewrite, all of
it. Parsing uses tree-sitter; an unknown language or a range outside every definition
keeps the range as given.
"""

from __future__ import annotations

import bisect
import re
from functools import cache
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from tree_sitter import Language, Node, Parser

from cad.resolver import Document

_LANGUAGE_IDS = {
    "python": "python",
    "javascript": "javascript",
    "javascriptreact": "javascript",
}
_EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
}
_DEFINITIONS = {
    "python": frozenset({"function_definition", "class_definition"}),
    "javascript": frozenset(
        {
            "function_declaration",
            "generator_function_declaration",
            "class_declaration",
            "class",
            "method_definition",
        }
    ),
}
_LONE_CR = re.compile(r"\r(?!\n)")
_WRAPPERS = frozenset({"decorated_definition", "export_statement"})
_JS_VARIABLES = frozenset({"lexical_declaration", "variable_declaration"})
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression"})


def language_of(language_id: str | None, uri: str) -> str | None:
    """The snapping language of a document: its LSP ``languageId`` if known, else its file
    extension; ``None`` when neither names a supported language."""
    if language_id and language_id.lower() in _LANGUAGE_IDS:
        return _LANGUAGE_IDS[language_id.lower()]
    suffix = PurePosixPath(unquote(urlparse(uri).path)).suffix.lower()
    return _EXTENSIONS.get(suffix)


@cache
def _language(name: str) -> Language:
    if name == "python":
        import tree_sitter_python

        return Language(tree_sitter_python.language())
    import tree_sitter_javascript

    return Language(tree_sitter_javascript.language())


def _is_definition(node: Node, language: str) -> bool:
    if node.type in _DEFINITIONS[language]:
        return True
    if node.type in _WRAPPERS:
        return any(_is_definition(child, language) for child in node.named_children)
    if node.type == "field_definition":
        value = node.child_by_field_name("value")
        return value is not None and value.type in _JS_FUNCTION_VALUES
    if language == "javascript" and node.type in _JS_VARIABLES:
        return any(
            (value := declarator.child_by_field_name("value")) is not None
            and value.type in _JS_FUNCTION_VALUES
            for declarator in node.named_children
            if declarator.type == "variable_declarator"
        )
    return False


class _Lines:
    """Maps UTF-8 byte offsets (tree-sitter's) to 0-based document lines (LF, CRLF or CR); a
    lone surrogate takes the three bytes of any other character of its range."""

    def __init__(self, document: Document) -> None:
        self.starts = [0]
        for line in document.lines:
            self.starts.append(self.starts[-1] + len(line.encode("utf-8", "surrogatepass")))

    def first(self, node: Node) -> int:
        return bisect.bisect_right(self.starts, node.start_byte) - 1

    def last(self, node: Node) -> int:
        return bisect.bisect_right(self.starts, max(node.end_byte - 1, node.start_byte)) - 1


def snap_lines(text: str, language: str | None, first: int, last: int) -> tuple[int, int]:
    """The 0-based inclusive line range of the smallest definition (function, method, class;
    JS: also a function or arrow function assigned to a variable or field) whose lines
    contain lines ``first``..``last`` of ``text``, widened to its decorators or ``export``;
    ``(first, last)`` unchanged for an unknown language or when no definition contains them."""
    if language not in _DEFINITIONS:
        return first, last
    document = Document(text)
    lines = _Lines(document)
    # A lone CR ends a line for the document but not for tree-sitter; LF has the same width.
    source = _LONE_CR.sub("\n", text).encode("utf-8", "surrogatepass")
    tree = Parser(_language(language)).parse(source)
    found: Node | None = None
    node = tree.root_node
    while True:
        inner = next(
            (
                child
                for child in node.named_children
                if lines.first(child) <= first and lines.last(child) >= last
            ),
            None,
        )
        if inner is None:
            break
        if _is_definition(inner, language):
            found = inner
        node = inner
    if found is None:
        return first, last
    while found.parent is not None and found.parent.type in _WRAPPERS:
        found = found.parent
    return lines.first(found), lines.last(found)
