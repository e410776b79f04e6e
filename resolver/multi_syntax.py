"""The text form of multi-file programs: a strict parser and the canonical formatter.

Grammar (whitespace as in the single-file language, allowed between ops and sections)::

    program  := ws (section ws)+ "</program>" ws   -- sections
              | ws (op ws)* "</program>" ws        -- bare: the edit of file 1
    section  := '<edit file="' N '">' ws (op ws)* '</edit>'
              | '<create path="' PATH '">' ws (op ws)* '</create>'
              | '<delete file="' N '"/>'
    op       := the single-file ops
              | '<copy file="' N '" lines="' N '-' N '"/>'
              | '<copy file="' N '" span="' N ':' N '-' N ':' N '"/>'

A copy without ``file`` copies from the file its section edits, so a single-file program is
a bare multi-file program as it is. A created file has no lines of its own: its copies name
their file. No two sections may name the same file or create the same path.
"""

from __future__ import annotations

import posixpath

from cad.resolver.program import (
    CopyFrom,
    CreateFile,
    DeleteFile,
    EditFile,
    FileOp,
    MultiProgram,
    Section,
)
from cad.resolver.syntax import (
    COPY_LINES_OPEN,
    COPY_OPEN,
    COPY_SPAN_OPEN,
    OP_SEPARATOR,
    PROGRAM_END,
    _Parser,
    format_op,
)
from cad.resolver.workspace import MAX_PATH_CHARS, path_problem

FILE_ATTRIBUTE = ' file="'
COPY_FILE_OPEN = COPY_OPEN + FILE_ATTRIBUTE
EDIT_OPEN = '<edit file="'
EDIT_CLOSE = "</edit>"
CREATE_OPEN = '<create path="'
CREATE_CLOSE = "</create>"
DELETE_OPEN = '<delete file="'
DELETE_CLOSE = '"/>'
HEADER_CLOSE = '">'
_SECTION_EXPECTED = "'<edit', '<create', '<delete' or '</program>'"


def format_file_op(op: FileOp) -> str:
    """Canonical text of one op of a multi-file program, without separator."""
    if isinstance(op, CopyFrom):
        return f'{COPY_FILE_OPEN}{op.file}"{format_op(op.copy).removeprefix(COPY_OPEN)}'
    return format_op(op)


def section_header(section: Section) -> str:
    """The tag that opens a section (all of a deletion): ``<edit file="2">``."""
    if isinstance(section, EditFile):
        return f"{EDIT_OPEN}{section.file}{HEADER_CLOSE}"
    if isinstance(section, CreateFile):
        return f"{CREATE_OPEN}{section.path}{HEADER_CLOSE}"
    return f"{DELETE_OPEN}{section.file}{DELETE_CLOSE}"


def _format_ops(ops: tuple[FileOp, ...]) -> str:
    return "".join(format_file_op(op) + OP_SEPARATOR for op in ops)


def format_section(section: Section) -> str:
    """Canonical text of one section: its tag, each op on a line, its closing tag, each
    followed by a newline."""
    header = section_header(section) + OP_SEPARATOR
    if isinstance(section, DeleteFile):
        return header
    if isinstance(section, CreateFile) and (problem := path_problem(section.path)) is not None:
        raise ValueError(f"cannot create {section.path!r}: {problem}")
    closer = EDIT_CLOSE if isinstance(section, EditFile) else CREATE_CLOSE
    return header + _format_ops(section.ops) + closer + OP_SEPARATOR


def format_multi(program: MultiProgram) -> str:
    """Canonical text: a bare program (the single-file form) when the program is one edit of
    file 1, else every section in order; then ``</program>``. A program without sections
    has no text (``ValueError``)."""
    if program.is_bare:
        return _format_ops(program.sections[0].ops) + PROGRAM_END  # type: ignore[union-attr]
    if not program.sections:
        raise ValueError("a multi-file program needs at least one section")
    return "".join(format_section(section) for section in program.sections) + PROGRAM_END


class _MultiParser(_Parser):
    """The single-file parser with copies from named files and file sections."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.own_lines = True

    def op(self) -> FileOp:  # type: ignore[override]
        start = self.pos
        if self.text.startswith(COPY_FILE_OPEN, self.pos):
            self.pos += len(COPY_FILE_OPEN)
            file = self.number()
            self.expect('"')
            return CopyFrom(file, self.copy_range(start))
        if not self.own_lines and (
            self.text.startswith(COPY_LINES_OPEN, self.pos)
            or self.text.startswith(COPY_SPAN_OPEN, self.pos)
        ):
            raise self.error(f"{COPY_FILE_OPEN!r} (a created file has no lines of its own)")
        return super().op()

    def section_ops(self, closer: str, *, own_lines: bool) -> tuple[FileOp, ...]:
        self.expect(HEADER_CLOSE)
        self.skip_whitespace()
        self.own_lines = own_lines
        ops = self.ops_until(closer)
        self.own_lines = True
        return tuple(ops)

    def path(self) -> str:
        start = self.pos
        end = self.text.find('"', start, start + MAX_PATH_CHARS + 1)
        if end < 0:
            raise self.error("a path and '\"'")
        path = self.text[start:end]
        if (problem := path_problem(path)) is not None:
            raise self.error("a relative path without '.' or '..' segments", start, problem)
        self.pos = end
        return path

    def section(self) -> Section:
        if self.text.startswith(EDIT_OPEN, self.pos):
            self.pos += len(EDIT_OPEN)
            file = self.number()
            return EditFile(file, self.section_ops(EDIT_CLOSE, own_lines=True))
        if self.text.startswith(CREATE_OPEN, self.pos):
            self.pos += len(CREATE_OPEN)
            path = self.path()
            return CreateFile(path, self.section_ops(CREATE_CLOSE, own_lines=False))
        if self.text.startswith(DELETE_OPEN, self.pos):
            self.pos += len(DELETE_OPEN)
            file = self.number()
            self.expect(DELETE_CLOSE)
            return DeleteFile(file)
        raise self.error(_SECTION_EXPECTED)

    def sections(self) -> tuple[Section, ...]:
        sections: list[Section] = []
        named: dict[int | str, Section] = {}
        while not self.text.startswith(PROGRAM_END, self.pos):
            if self.pos >= len(self.text):
                raise self.error(_SECTION_EXPECTED)
            start = self.pos
            section = self.section()
            key = (
                posixpath.normpath(section.path)
                if isinstance(section, CreateFile)
                else section.file
            )
            if key in named:
                what = "path" if isinstance(section, CreateFile) else "file"
                raise self.error(
                    f"a {what} no earlier section names",
                    start,
                    f"{section_header(section)} after {section_header(named[key])}",
                )
            named[key] = section
            sections.append(section)
            self.skip_whitespace()
        self.pos += len(PROGRAM_END)
        return tuple(sections)

    def multi_program(self) -> MultiProgram:
        self.skip_whitespace()
        if any(
            self.text.startswith(tag, self.pos) for tag in (EDIT_OPEN, CREATE_OPEN, DELETE_OPEN)
        ):
            program = MultiProgram(self.sections())
        else:
            program = MultiProgram((EditFile(1, tuple(self.ops_until(PROGRAM_END))),))
        self.end()
        return program


def parse_multi(text: str) -> MultiProgram:
    """Parse a multi-file program (a bare single-file program is the edit of file 1); raises
    :class:`ProgramError` with position, expected and found. File ids and ranges are checked
    against the files when the program is resolved."""
    return _MultiParser(text).multi_program()
