"""The program data model: the ops a model writes over a numbered document."""

from __future__ import annotations

from dataclasses import dataclass


class ProgramError(ValueError):
    """A program that cannot be parsed or resolved against its document.

    ``position`` is a character offset into the program text (parse errors), ``op_index``
    the 0-based index of the offending op (resolve errors); ``expected`` and ``found``
    say what the parser or resolver wanted and what it saw instead.
    """

    def __init__(
        self,
        message: str,
        *,
        expected: str = "",
        found: str = "",
        position: int | None = None,
        op_index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found
        self.position = position
        self.op_index = op_index


@dataclass(frozen=True, slots=True)
class CopyLines:
    """``<copy lines="start-end"/>``: whole lines ``start..end`` (1-based, inclusive)."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class CopySpan:
    """``<copy span="L:C-L:C"/>``: characters from (start_line, start_col) to
    (end_line, end_col), both inclusive, 1-based; a line's terminator counts as columns."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int


@dataclass(frozen=True, slots=True)
class Gen:
    """``<gen>text</gen>``: new text, literal."""

    text: str


Op = CopyLines | CopySpan | Gen


@dataclass(frozen=True, slots=True)
class Program:
    """An ordered sequence of ops; resolving it against a document yields the new text."""

    ops: tuple[Op, ...] = ()

    def __len__(self) -> int:
        return len(self.ops)
