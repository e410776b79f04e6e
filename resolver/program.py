"""The program data model: the ops a model writes over a numbered document."""

from __future__ import annotations

from dataclasses import dataclass


class ProgramError(ValueError):
    """A program that cannot be parsed or resolved against its document.

    ``position`` is a character offset into the program text (parse errors), ``op_index``
    the 0-based index of the offending op (resolve errors) and, in a multi-file program,
    ``section_index`` the 0-based index of its section; ``expected`` and ``found`` say what
    the parser or resolver wanted and what it saw instead.
    """

    def __init__(
        self,
        message: str,
        *,
        expected: str = "",
        found: str = "",
        position: int | None = None,
        op_index: int | None = None,
        section_index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found
        self.position = position
        self.op_index = op_index
        self.section_index = section_index


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


@dataclass(frozen=True, slots=True)
class CopyFrom:
    """``<copy file="k" lines="i-j"/>`` or ``<copy file="k" span="L:C-L:C"/>``: a copy from
    file ``k`` (1-based) of a multi-file program's numbered files, ``copy`` addressing that
    file's lines."""

    file: int
    copy: CopyLines | CopySpan


FileOp = Op | CopyFrom
"""An op of a multi-file program: a copy from the section's own file, a copy from any file,
or generated text."""


@dataclass(frozen=True, slots=True)
class EditFile:
    """``<edit file="k">ops</edit>``: file ``k`` becomes what its ops write."""

    file: int
    ops: tuple[FileOp, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateFile:
    """``<create path="p">ops</create>``: a new file at the relative path ``p``."""

    path: str
    ops: tuple[FileOp, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """``<delete file="k"/>``: file ``k`` is removed."""

    file: int


Section = EditFile | CreateFile | DeleteFile


@dataclass(frozen=True, slots=True)
class MultiProgram:
    """A program over several numbered files: one section per file it writes. Copies
    address the files as they were before the program, so sections are independent of their
    order; a file no section names is left as it is."""

    sections: tuple[Section, ...] = ()

    @classmethod
    def single(cls, program: Program) -> MultiProgram:
        """A single-file program as the multi-file program that edits file 1."""
        return cls((EditFile(1, program.ops),))

    @property
    def is_bare(self) -> bool:
        """Whether the program is one edit of file 1, written without section tags (the
        single-file form)."""
        if len(self.sections) != 1:
            return False
        section = self.sections[0]
        return isinstance(section, EditFile) and section.file == 1

    @property
    def op_count(self) -> int:
        """How many ops the program writes, each section tag counted as one (a bare program
        has none): what the oracle minimises after generated text."""
        ops = sum(len(s.ops) for s in self.sections if not isinstance(s, DeleteFile))
        return ops + (0 if self.is_bare else len(self.sections))
