"""The files a multi-file program addresses: numbered from 1, each a document of its own."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping

from cad.resolver.document import Document

MAX_PATH_CHARS = 4096
"""The longest path a program may create (Linux's ``PATH_MAX``)."""
_PATH_FORBIDDEN = frozenset('"<>\\') | frozenset(chr(c) for c in (*range(0x20), 0x7F))


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file a program creates, or ``None`` when it can: a
    relative POSIX path of at most ``MAX_PATH_CHARS`` characters, without empty, ``.`` or
    ``..`` segments, control characters, quotes, angle brackets or backslashes (so it sits
    inside a tag as it is, and names the same file on every system)."""
    if not path:
        return "an empty path"
    if len(path) > MAX_PATH_CHARS:
        return f"a path of {len(path):,} characters, over {MAX_PATH_CHARS:,}"
    bad = next((char for char in path if char in _PATH_FORBIDDEN), None)
    if bad is not None:
        return f"the character {bad!r}"
    if path.startswith("/"):
        return "an absolute path"
    if any(segment in ("", ".", "..") for segment in path.split("/")):
        return "an empty, '.' or '..' segment"
    return None


class Workspace:
    """Files with 1-based ids in the order given: what a multi-file program's copies and
    sections address. Paths are the caller's (a program names existing files by id, so
    they may be absolute or relative); two files may not share a path."""

    def __init__(self, files: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        pairs = list(files.items() if isinstance(files, Mapping) else files)
        self.paths: tuple[str, ...] = tuple(path for path, _ in pairs)
        self.documents: tuple[Document, ...] = tuple(Document(text) for _, text in pairs)
        self._ids = {path: number for number, path in enumerate(self.paths, 1)}
        if len(self._ids) != len(self.paths):
            raise ValueError("two files of a workspace have the same path")
        self._normal = {posixpath.normpath(path): number for path, number in self._ids.items()}

    def __len__(self) -> int:
        """How many files there are."""
        return len(self.paths)

    def document(self, file: int) -> Document:
        """File ``file`` (1-based); the caller validates the id (see ``has``)."""
        return self.documents[file - 1]

    def has(self, file: int) -> bool:
        """Whether ``file`` is the id of one of the files."""
        return 1 <= file <= len(self.paths)

    def file_at(self, path: str) -> int | None:
        """The id of the file at ``path`` (compared after ``posixpath.normpath``), or
        ``None``."""
        return self._normal.get(posixpath.normpath(path))

    def texts(self) -> dict[str, str]:
        """Every file's text by path, in id order."""
        return {path: doc.text for path, doc in zip(self.paths, self.documents, strict=True)}

    def numbered(self) -> str:
        """The files as a model sees them: per file a header line ``[k] path (n lines)``,
        then its lines numbered from 1 as ``Document.numbered`` shows them (a last line
        without terminator gets a newline, so the next header starts a line)."""
        parts = []
        for number, (path, doc) in enumerate(zip(self.paths, self.documents, strict=True), 1):
            shown = doc.numbered()
            if shown and not shown.endswith(("\n", "\r")):
                shown += "\n"
            parts.append(f"[{number}] {path} ({doc.n_lines} lines)\n{shown}")
        return "".join(parts)
