"""The multi-file resolver: program + numbered files -> the files it writes, byte for byte.

Every copy addresses the files as they were before the program, so a section's text depends
on nothing but its own ops. A copy without a file takes from the file its section edits; a
``CopyFrom`` names its file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cad.resolver.document import Document
from cad.resolver.multi_syntax import format_file_op, section_header
from cad.resolver.program import (
    CopyFrom,
    CopyLines,
    CopySpan,
    CreateFile,
    DeleteFile,
    EditFile,
    FileOp,
    Gen,
    MultiProgram,
    ProgramError,
    Section,
)
from cad.resolver.resolve import MAX_OUTPUT_CHARS, op_span
from cad.resolver.workspace import Workspace

Changes = dict[str, str | None]
"""What a multi-file program writes: each file's path (a created file's as the program names
it) with its new text, or ``None`` for a deleted file, in section order."""


def as_workspace(files: Workspace | Mapping[str, str] | Iterable[tuple[str, str]]) -> Workspace:
    """``files`` as a :class:`Workspace` (a mapping or pairs of path and text)."""
    return files if isinstance(files, Workspace) else Workspace(files)


def _no_file(workspace: Workspace) -> str:
    """What a file id was expected to be."""
    return f"a file from 1 to {len(workspace)}" if len(workspace) else "a file (there are none)"


def _where(section: Section, bare: bool) -> str:
    """How an error names the section it is in (nothing for a bare program)."""
    return "" if bare else f"{section_header(section)} "


def check_section(section: Section, workspace: Workspace, section_index: int = 0) -> str:
    """The path a section writes, after checking its file exists (an edit or deletion) or
    its path is no file's (a creation); raises :class:`ProgramError` otherwise."""
    header = section_header(section)
    if isinstance(section, CreateFile):
        existing = workspace.file_at(section.path)
        if existing is None:
            return section.path
        expected = f'a new path (to change file {existing}, <edit file="{existing}">)'
        raise ProgramError(
            f"{header}: expected {expected}, found file {existing}",
            expected=expected,
            found=f"file {existing}",
            section_index=section_index,
        )
    if not workspace.has(section.file):
        expected = _no_file(workspace)
        raise ProgramError(
            f"{header}: no file {section.file}: expected {expected}",
            expected=expected,
            found=f"file {section.file}",
            section_index=section_index,
        )
    return workspace.paths[section.file - 1]


def file_op_span(
    op: CopyLines | CopySpan | CopyFrom,
    workspace: Workspace,
    own: int | None,
    op_index: int = 0,
    section_index: int | None = None,
    where: str = "",
) -> tuple[Document, int, int]:
    """The document a copy takes from and the character offsets ``[start, end)`` it takes;
    ``own`` is the file the section edits (``None`` for a created file). A file that does
    not exist or a range outside its file raises :class:`ProgramError`, never clamps."""
    file = op.file if isinstance(op, CopyFrom) else own
    copy = op.copy if isinstance(op, CopyFrom) else op
    found = format_file_op(op)
    prefix = f"{where}op {op_index + 1}: {found}"
    if file is None or not workspace.has(file):
        expected = "a copy that names its file" if file is None else _no_file(workspace)
        raise ProgramError(
            f"{prefix} names no file: expected {expected}",
            expected=expected,
            found=found,
            op_index=op_index,
            section_index=section_index,
        )
    document = workspace.document(file)
    try:
        start, end = op_span(copy, document, op_index)
    except ProgramError as error:
        expected = error.expected + (f" of file {file}" if isinstance(op, CopyFrom) else "")
        raise ProgramError(
            f"{prefix} is out of range: expected {expected}",
            expected=expected,
            found=found,
            op_index=op_index,
            section_index=section_index,
        ) from None
    return document, start, end


def file_op_text(
    op: FileOp, workspace: Workspace, own: int | None, op_index: int = 0, where: str = ""
) -> str:
    """The text one op of a section contributes (see :func:`file_op_span`)."""
    if isinstance(op, Gen):
        return op.text
    document, start, end = file_op_span(op, workspace, own, op_index, where=where)
    return document.text[start:end]


def _own(section: EditFile | CreateFile) -> int | None:
    return section.file if isinstance(section, EditFile) else None


def _measure(program: MultiProgram, workspace: Workspace, max_chars: int | None) -> None:
    """Check every section and op, and that the files written together stay within
    ``max_chars`` characters, before any text is built."""
    bare = program.is_bare
    total = 0
    for s_index, section in enumerate(program.sections):
        check_section(section, workspace, s_index)
        if isinstance(section, DeleteFile):
            continue
        where = _where(section, bare)
        for index, op in enumerate(section.ops):
            if isinstance(op, Gen):
                total += len(op.text)
            else:
                _, start, end = file_op_span(op, workspace, _own(section), index, s_index, where)
                total += end - start
            if max_chars is not None and total > max_chars:
                expected = f"an output of at most {max_chars:,} characters"
                raise ProgramError(
                    f"{where}op {index + 1}: the output would pass {max_chars:,} characters, "
                    "the most a program may write; copy less",
                    expected=expected,
                    found=f"{total:,} characters by op {index + 1}",
                    op_index=index,
                    section_index=s_index,
                )


def resolve_multi(
    program: MultiProgram,
    files: Workspace | Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    max_chars: int | None = MAX_OUTPUT_CHARS,
) -> Changes:
    """The files ``program`` writes against ``files`` (numbered from 1 in their order): a
    path per section with its new text, ``None`` for a deletion. A bad file id or range, a
    created path that is already a file's, or an output of all files together longer than
    ``max_chars`` (None: no limit) raises :class:`ProgramError` before any text is built."""
    workspace = as_workspace(files)
    _measure(program, workspace, max_chars)
    changes: Changes = {}
    for section in program.sections:
        path = check_section(section, workspace)
        if isinstance(section, DeleteFile):
            changes[path] = None
            continue
        own = _own(section)
        changes[path] = "".join(file_op_text(op, workspace, own) for op in section.ops)
    return changes


def apply_changes(
    files: Workspace | Mapping[str, str] | Iterable[tuple[str, str]], changes: Changes
) -> dict[str, str]:
    """Every file after ``changes``: the unchanged ones, the changed ones with their new
    text (both in id order), then the created ones; deleted files are left out."""
    workspace = as_workspace(files)
    after = {path: changes.get(path, text) for path, text in workspace.texts().items()}
    after.update((path, text) for path, text in changes.items() if path not in after)
    return {path: text for path, text in after.items() if text is not None}


class IncrementalMultiResolver:
    """Resolves a multi-file program section by section and op by op, so decoders and
    servers can stream it: ``open`` a section, ``push`` its ops (each returns the text it
    adds), ``close`` it. A deletion is complete once opened. Whatever is invalid raises
    :class:`ProgramError` and leaves the resolver unchanged."""

    def __init__(self, files: Workspace | Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        self.workspace = as_workspace(files)
        self.sections: list[Section] = []
        self._changes: Changes = {}
        self._section: EditFile | CreateFile | None = None
        self._path = ""
        self._ops: list[FileOp] = []
        self._pieces: list[str] = []

    def open(self, section: Section) -> None:
        """Start a section and push its ops, if it has any; a deletion ends at once. A file
        or path an earlier section wrote raises."""
        if self._section is not None:
            raise ProgramError(
                f"{section_header(section)}: expected the end of "
                f"{section_header(self._section)} first",
                expected="the end of the open section",
                found=section_header(section),
                section_index=len(self.sections),
            )
        path = check_section(section, self.workspace, len(self.sections))
        if path in self._changes:
            raise ProgramError(
                f"{section_header(section)}: {path} is written by an earlier section",
                expected="a file no earlier section names",
                found=section_header(section),
                section_index=len(self.sections),
            )
        if isinstance(section, DeleteFile):
            self.sections.append(section)
            self._changes[path] = None
            return
        self._section, self._path = section, path
        self._ops, self._pieces = [], []
        try:
            for op in section.ops:
                self.push(op)
        except ProgramError:
            self._section = None
            self._ops, self._pieces = [], []
            raise

    def push(self, op: FileOp) -> str:
        """Append one op to the open section; returns the text it produced."""
        if self._section is None:
            raise ProgramError(
                f"op {format_file_op(op)}: expected a section to be open",
                expected="an open section",
                found=format_file_op(op),
            )
        where = f"{section_header(self._section)} "
        piece = file_op_text(op, self.workspace, _own(self._section), len(self._ops), where)
        self._ops.append(op)
        self._pieces.append(piece)
        return piece

    def close(self) -> str:
        """End the open section; returns the whole text of its file."""
        if self._section is None:
            raise ProgramError(
                "expected a section to be open", expected="an open section", found="none"
            )
        text = "".join(self._pieces)
        finished = self._section
        if isinstance(finished, EditFile):
            self.sections.append(EditFile(finished.file, tuple(self._ops)))
        else:
            self.sections.append(CreateFile(finished.path, tuple(self._ops)))
        self._changes[self._path] = text
        self._section = None
        return text

    @property
    def is_open(self) -> bool:
        """Whether a section is open, taking ops."""
        return self._section is not None

    @property
    def own_file(self) -> int | None:
        """The file a plain copy of the open section copies from (the file it edits), or
        ``None`` (no section open, or a created file)."""
        return None if self._section is None else _own(self._section)

    @property
    def text(self) -> str:
        """The open section's output so far (empty when none is open)."""
        return "".join(self._pieces) if self._section is not None else ""

    @property
    def changes(self) -> Changes:
        """The files the closed sections wrote, as :func:`resolve_multi` returns them."""
        return dict(self._changes)

    @property
    def program(self) -> MultiProgram:
        """The closed sections, as a program."""
        return MultiProgram(tuple(self.sections))
