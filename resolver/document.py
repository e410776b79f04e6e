"""A document as the program sees it: numbered lines that keep their own terminators."""

from __future__ import annotations

import bisect
import re
from functools import cached_property

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Split ``text`` into lines, each keeping its terminator (LF, CRLF or CR).

    Unlike ``str.splitlines`` only CR and LF end a line, so form feeds, vertical tabs and
    Unicode separators stay inside their line and ``"".join(split_lines(t)) == t`` always.
    """
    return _LINE.findall(text)


class Document:
    """Immutable text with 1-based line numbers and (line, column) addressing."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines: tuple[str, ...] = tuple(split_lines(text))

    @property
    def n_lines(self) -> int:
        """How many lines the document has (an empty document has none)."""
        return len(self.lines)

    @cached_property
    def line_starts(self) -> list[int]:
        """Character offset of each line's start, plus ``len(text)`` at the end."""
        starts = [0]
        for line in self.lines:
            starts.append(starts[-1] + len(line))
        return starts

    def numbered(self, start: int = 1) -> str:
        """The document as shown to a model: each line prefixed by its number and ``|``."""
        return "".join(f"{i}|{line}" for i, line in enumerate(self.lines, start))

    def offset(self, line: int, col: int) -> int:
        """Character offset of 1-based (line, col); the caller validates the range."""
        return self.line_starts[line - 1] + col - 1

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, col) of the character at ``offset``."""
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line + 1, offset - self.line_starts[line] + 1

    def is_line_start(self, offset: int) -> bool:
        """Whether ``offset`` is where a line begins (or the end of the text)."""
        index = bisect.bisect_left(self.line_starts, offset)
        return index < len(self.line_starts) and self.line_starts[index] == offset
