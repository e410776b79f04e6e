"""The multi-file program FSM: the matcher a decoder runs for an edit of several files.

It accepts the canonical multi-file programs of docs/program.md ("Multi-file programs") that
are valid for one :class:`cad.resolver.Workspace`: sections ``<edit file="k">``,
``<create path="p">`` and ``<delete file="k"/>`` (or the bare single-file form, the edit of
file 1), copies that name their file (``<copy file="k" lines="i-j"/>``) with every number held
to that file's lines, file ids only of files that exist (and, in a section tag, of files that
may be edited and no earlier section names), created paths as the resolver allows them.
Same interface and per-tokenizer index as :class:`cad.grammar.ProgramMatcher`; the states and
masks run natively (``grammar/native/multi_states.*``, ``multi_index.cpp``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Sequence
from typing import Any

from cad.grammar import _native
from cad.grammar.bitmask import NativeMaskFill
from cad.grammar.program_matcher import ProgramTokenIndex
from cad.resolver import (
    CopyFrom,
    CopyLines,
    CopySpan,
    CreateFile,
    DeleteFile,
    EditFile,
    FileOp,
    Gen,
    MultiProgram,
    Section,
    Workspace,
    unescape_gen_text,
)

__all__ = ["MultiProgramMatcher"]


class MultiProgramMatcher(NativeMaskFill, _native.MultiProgramMatcher):
    """The program FSM as a :class:`cad.grammar.Matcher` for a set of numbered files.

    ``line_widths[k-1]`` are the line widths of file ``k`` (characters, terminator included,
    each at least 1; an empty file has none). Only files in ``editable`` (1-based ids; all by
    default) may be edited or deleted, the others are context to copy from; ``paths`` are the
    files' paths, which a created file may not take. With ``subline=True`` spans are allowed.
    ``accept_token``, ``accept_bytes``, ``forced_bytes`` (the structural literals every
    continuation starts with, up to the end of the line: the decoder feeds them without
    asking the model), ``completion_bytes``, ``own_file`` (the file a copy without a file
    takes from here, 0 for none) and ``text`` run natively."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        line_widths: Sequence[Sequence[int]],
        *,
        editable: Collection[int] | None = None,
        paths: Sequence[str] = (),
        subline: bool = False,
    ) -> None:
        if any(width < 1 for widths in line_widths for width in widths):
            raise ValueError("every line has at least one character")
        files = range(1, len(line_widths) + 1)
        allowed = set(files) if editable is None else set(editable)
        if not allowed <= set(files):
            raise ValueError(f"editable files must be ids from 1 to {len(line_widths)}")
        forbidden = [posixpath.normpath(path).encode("utf-8") for path in paths]
        super().__init__(
            index.native,
            [list(widths) for widths in line_widths],
            [file in allowed for file in files],
            forbidden,
            subline,
        )
        self.index = index

    @classmethod
    def for_workspace(
        cls,
        index: ProgramTokenIndex,
        workspace: Workspace,
        *,
        editable: Collection[int] | None = None,
        subline: bool = False,
    ) -> MultiProgramMatcher:
        """The matcher for ``workspace``'s files (context files: those not in ``editable``)."""
        widths = [[len(line) for line in doc.lines] for doc in workspace.documents]
        return cls(index, widths, editable=editable, paths=workspace.paths, subline=subline)

    @property
    def program(self) -> MultiProgram:
        """The sections written so far, the open one with the ops it has so far (a bare
        program is the edit of file 1)."""
        sections: list[Section] = []
        ops: list[FileOp] = []
        opened: EditFile | CreateFile | None = None
        for position in range(self.record_count):
            record = self.record(position)
            kind = record[0]
            if kind == "edit":
                opened, ops = EditFile(record[1]), []
            elif kind == "create":
                opened, ops = CreateFile(record[1].decode("utf-8")), []
            elif kind == "delete":
                sections.append(DeleteFile(record[1]))
            elif kind == "close":
                sections.append(_with_ops(opened, ops))
                opened = None
            else:
                ops.append(file_op_from_record(record))
        if opened is not None:
            sections.append(_with_ops(opened, ops))
        elif not sections and (ops or self.is_accepting()):
            sections.append(EditFile(1, tuple(ops)))
        return MultiProgram(tuple(sections))


def _with_ops(section: EditFile | CreateFile | None, ops: list[FileOp]) -> Section:
    if isinstance(section, EditFile):
        return EditFile(section.file, tuple(ops))
    if isinstance(section, CreateFile):
        return CreateFile(section.path, tuple(ops))
    raise ValueError("a section closed that was never opened")


def file_op_from_record(record: tuple[Any, ...]) -> FileOp:
    """The op of a multi-file matcher's ``record`` (a copy or a gen body)."""
    if record[0] == "gen":
        return Gen(unescape_gen_text(record[1].decode("utf-8")))
    _, file, kind, numbers = record
    copy = CopyLines(*numbers) if kind == "lines" else CopySpan(*numbers)
    return CopyFrom(file, copy) if file else copy
