"""Minimal LSP text edits between two versions of a document.

Editors keep cursors, folds and undo history across an edit only when the edit touches just
the changed text, so the new document is expressed as line hunks, each trimmed to the
characters that differ. Positions are LSP positions: lines end at LF, CRLF or CR, and
columns count UTF-16 code units (see ``cad.server.documents`` for the details).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from lsprotocol import types as lsp

from cad.resolver import Document


@dataclass(frozen=True)
class Replacement:
    """Replace ``old[start:end]`` (character offsets) with ``text``."""

    start: int
    end: int
    text: str


def replacements(old: str, new: str) -> list[Replacement]:
    """Changed regions of ``old``, in order and non-overlapping, that turn it into ``new``."""
    old_doc, new_doc = Document(old), Document(new)
    matcher = difflib.SequenceMatcher(None, old_doc.lines, new_doc.lines, autojunk=False)
    found = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end = old_doc.line_starts[i1], old_doc.line_starts[i2]
        text = new[new_doc.line_starts[j1] : new_doc.line_starts[j2]]
        removed = old[start:end]
        prefix = _common_prefix(removed, text)
        if _splits_crlf(old, start + prefix):
            prefix -= 1
        suffix = _common_prefix(removed[prefix:][::-1], text[prefix:][::-1])
        if _splits_crlf(old, end - suffix):
            suffix -= 1
        found.append(Replacement(start + prefix, end - suffix, text[prefix : len(text) - suffix]))
    return found


def _splits_crlf(text: str, at: int) -> bool:
    """An LSP position cannot sit between CR and LF: they end the same line."""
    return 0 < at < len(text) and text[at - 1] == "\r" and text[at] == "\n"


def _common_prefix(a: str, b: str) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


def position(document: Document, offset: int) -> lsp.Position:
    """The LSP position of a character offset (UTF-16 columns)."""
    if offset >= len(document.text):
        if document.text and document.text[-1] in "\r\n":
            return lsp.Position(line=document.n_lines, character=0)
        last = max(document.n_lines - 1, 0)
        line_text = document.lines[last] if document.lines else ""
        return lsp.Position(line=last, character=_utf16(line_text))
    line, col = document.position(offset)
    return lsp.Position(line=line - 1, character=_utf16(document.lines[line - 1][: col - 1]))


def offset(document: Document, where: lsp.Position) -> int:
    """The character offset of an LSP position (clamped to its line, as LSP asks)."""
    if where.line >= document.n_lines:
        return len(document.text)
    line_text = document.lines[where.line]
    body = line_text.rstrip("\r\n")
    units = 0
    for index, char in enumerate(body):
        if units >= where.character:
            return document.line_starts[where.line] + index
        units += 2 if ord(char) > 0xFFFF else 1
    return document.line_starts[where.line] + len(body)


def _utf16(text: str) -> int:
    """Length in UTF-16 code units; a lone surrogate (a UTF-16 editor can hold one) is one."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def text_edits(old: str, new: str) -> list[lsp.TextEdit]:
    """The minimal LSP ``TextEdit`` list that turns ``old`` into ``new``."""
    document = Document(old)
    return [
        lsp.TextEdit(
            range=lsp.Range(start=position(document, r.start), end=position(document, r.end)),
            new_text=r.text,
        )
        for r in replacements(old, new)
    ]


def apply_text_edits(old: str, edits: list[lsp.TextEdit]) -> str:
    """Apply non-overlapping LSP edits to ``old`` as an editor does (used by tests and the
    preview path)."""
    document = Document(old)
    spans = sorted(
        (
            (offset(document, e.range.start), offset(document, e.range.end), e.new_text)
            for e in edits
        ),
        reverse=True,
    )
    text = old
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text
