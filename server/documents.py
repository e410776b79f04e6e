"""The documents the editor has open, kept exactly as the editor holds them.

``textDocument/didOpen`` gives a document's text, each ``textDocument/didChange`` replaces
it or changes ranges of it, ``textDocument/didClose`` forgets it. Ranges are read with the
project's line semantics, which are also LSP's: a line ends at LF, CR or CRLF and nowhere
else (form feeds, vertical tabs, NEL and the Unicode line and paragraph separators are
ordinary characters), and a column counts UTF-16 code units. A position past the end of its
line means the line's end (before its line break), a line past the end of the document means
the document's end, and a column inside a character that takes two UTF-16 units means the
position after it. A lone surrogate (which a UTF-16 editor can hold) is one character of one
unit. A change that cannot be applied (a range that ends before it starts) leaves the
document marked as out of step, and edits of it are refused until the editor sends it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from lsprotocol import types as lsp

from cad.resolver import Document
from cad.server.text_edits import offset


@dataclass(frozen=True)
class OpenDocument:
    """One open document: its text, the version the editor gave it, its language, and why
    the server's copy is out of step with the editor's (``None`` while it is not). A change
    makes a new one, so a snapshot of the store never changes under its holder."""

    uri: str
    text: str
    version: int
    language_id: str = ""
    out_of_step: str | None = None


def apply_change(text: str, change: lsp.TextDocumentContentChangeEvent) -> str:
    """``text`` after one ``didChange`` content change (a whole text, or a range and its
    replacement). Raises ``ValueError`` for a range that ends before it starts."""
    if isinstance(change, lsp.TextDocumentContentChangeWholeDocument):
        return change.text
    document = Document(text)
    start, end = offset(document, change.range.start), offset(document, change.range.end)
    if end < start:
        raise ValueError(
            f"the range {_where(change.range.start)}-{_where(change.range.end)} ends before it starts"
        )
    return text[:start] + change.text + text[end:]


def _where(position: lsp.Position) -> str:
    return f"{position.line}:{position.character}"


class DocumentStore:
    """The open documents by URI."""

    def __init__(self) -> None:
        self._documents: dict[str, OpenDocument] = {}

    def open(self, item: lsp.TextDocumentItem) -> None:
        """Take a document the editor opened (or sent again)."""
        self._documents[item.uri] = OpenDocument(
            item.uri, item.text, item.version, item.language_id
        )

    def change(self, params: lsp.DidChangeTextDocumentParams) -> str | None:
        """Apply the editor's changes in order and take its new version. Returns why the
        document fell out of step with this change (or why there is none to change), else
        ``None``."""
        document = self._documents.get(params.text_document.uri)
        if document is None:
            return f"{params.text_document.uri} changed but is not open"
        version = params.text_document.version
        text, out_of_step = document.text, document.out_of_step
        for change in params.content_changes:
            if isinstance(change, lsp.TextDocumentContentChangeWholeDocument):
                text, out_of_step = change.text, None
            elif out_of_step is None:
                try:
                    text = apply_change(text, change)
                except ValueError as exc:
                    out_of_step = f"a change of version {version} failed: {exc}"
        self._documents[document.uri] = replace(
            document, text=text, version=version, out_of_step=out_of_step
        )
        return out_of_step if out_of_step != document.out_of_step else None

    def close(self, uri: str) -> None:
        """Forget a document the editor closed."""
        self._documents.pop(uri, None)

    def get(self, uri: str) -> OpenDocument | None:
        """The open document at ``uri``, if any."""
        return self._documents.get(uri)

    def snapshot(self) -> Mapping[str, OpenDocument]:
        """The open documents as they are now, by URI; later changes leave it as it is (a
        request reads the documents as of its arrival)."""
        return MappingProxyType(dict(self._documents))
