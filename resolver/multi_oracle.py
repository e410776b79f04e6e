"""Multi-file oracle programs: the minimal program that turns a set of files into another.

Every file that changes gets a section; its text is covered by copies from any file as it
was before (one suffix automaton of all of them) and generated runs, minimising generated
units first and ops second, as the single-file oracle does for one file. A copy from another
file is charged the generated cost of its file attribute, so it is chosen only where it is
cheaper than writing the text; among equally cheap copies, one from the section's own file
is preferred.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cad.resolver.cover import (
    CopyKind,
    CopySegment,
    MatchIndex,
    cover_from_matches,
    longest_matches,
)
from cad.resolver.document import Document
from cad.resolver.multi_resolve import as_workspace
from cad.resolver.multi_syntax import FILE_ATTRIBUTE
from cad.resolver.oracle import (
    Granularity,
    Pieces,
    copy_op,
    line_costs,
    oracle_units,
    token_pieces,
)
from cad.resolver.program import (
    CopyFrom,
    CreateFile,
    DeleteFile,
    EditFile,
    FileOp,
    Gen,
    MultiProgram,
    Section,
)
from cad.resolver.workspace import Workspace, path_problem


@dataclass(frozen=True)
class _Sources:
    """The files before the edit, cut into units and indexed together."""

    units: list[list[str]]
    starts: list[list[int]]
    index: MatchIndex


def _sources(workspace: Workspace, granularity: Granularity, pieces: Pieces | None) -> _Sources:
    units = [oracle_units(doc.text, granularity, pieces) for doc in workspace.documents]
    starts = []
    for file_units in units:
        offsets = [0]
        for unit in file_units:
            offsets.append(offsets[-1] + len(unit))
        starts.append(offsets)
    return _Sources(units, starts, MatchIndex(units))


def attribute_cost(workspace: Workspace, pieces: Pieces | None) -> int:
    """What a copy's file attribute (`` file="k"``, for the largest id) costs in generated
    units: characters, or tokens with ``pieces``. A cross-file copy is charged it, so one
    is chosen only where it saves more generated text than it adds."""
    attribute = f'{FILE_ATTRIBUTE}{len(workspace)}"'
    return len(attribute) if pieces is None else len(token_pieces(attribute, pieces(attribute)))


def _section_ops(
    sources: _Sources,
    workspace: Workspace,
    own: int | None,
    after: str,
    granularity: Granularity,
    min_copy: int,
    pieces: Pieces | None,
) -> tuple[FileOp, ...]:
    """The minimal ops that write ``after`` in the section of file ``own`` (``None``: a
    created file): copies from the own file (kind 0) cost nothing extra, copies from any
    file (kind 1) their file attribute."""
    target = oracle_units(after, granularity, pieces)
    costs = line_costs(after, target, pieces) if granularity == "line" else None
    kinds = [CopyKind(*sources.index.scan(target), attribute_cost(workspace, pieces))]
    if own is not None:
        kinds.insert(0, CopyKind(*longest_matches(sources.units[own - 1], target)))
    segments = cover_from_matches(kinds, len(target), costs=costs, min_copy=min_copy)
    ops: list[FileOp] = []
    for segment in segments:
        if not isinstance(segment, CopySegment):
            end = segment.target_start + segment.length
            ops.append(Gen("".join(target[segment.target_start : end])))
            continue
        if segment.kind == 0 and own is not None:
            file, offset = own, segment.source_start
        else:
            source, offset = sources.index.locate(segment.source_start)
            file = source + 1
        starts = sources.starts[file - 1]
        copy = copy_op(
            workspace.document(file), starts[offset], starts[offset + segment.length], granularity
        )
        ops.append(copy if file == own else CopyFrom(file, copy))
    return tuple(ops)


def _targets(
    workspace: Workspace, after: Mapping[str, str]
) -> tuple[list[tuple[int | None, str, str]], list[int]]:
    """The files to write, as (own file or ``None`` for a new one, path, text), edits in
    file order then creations in ``after``'s order; and the files to delete."""
    edits: list[tuple[int | None, str, str]] = []
    creations: list[tuple[int | None, str, str]] = []
    kept: set[int] = set()
    for path, text in after.items():
        file = workspace.file_at(path)
        if file is None:
            if (problem := path_problem(path)) is not None:
                raise ValueError(f"cannot create {path!r}: {problem}")
            creations.append((None, path, text))
            continue
        if file in kept:
            raise ValueError(f"{path!r} names file {file} a second time")
        kept.add(file)
        if workspace.document(file).text != text:
            edits.append((file, path, text))
    edits.sort(key=lambda target: target[0] or 0)
    deleted = [file for file in range(1, len(workspace) + 1) if file not in kept]
    return edits + creations, deleted


def oracle_multi(
    before: Workspace | Mapping[str, str] | Iterable[tuple[str, str]],
    after: Mapping[str, str],
    *,
    granularity: Granularity = "line",
    min_copy: int = 1,
    pieces: Pieces | None = None,
) -> MultiProgram:
    """The minimal multi-file program that turns the files ``before`` (path to text,
    numbered from 1 in their order) into the files ``after``: a file of ``before`` missing
    from ``after`` is deleted, a path of ``after`` missing from ``before`` is created, and
    a file whose text is the same gets no section.

    Minimal means, per section, fewest generated units first and fewest ops second, with
    copies from any file as ``oracle`` counts them (``granularity``, ``min_copy`` and
    ``pieces`` as there). When nothing changes the program is the copy of file 1 (a program
    has at least one section); with no files at all there is none (``ValueError``)."""
    workspace = as_workspace(before)
    targets, deleted = _targets(workspace, after)
    sources = _sources(workspace, granularity, pieces) if targets else None
    sections: list[Section] = []
    for own, path, text in targets:
        assert sources is not None
        ops = _section_ops(sources, workspace, own, text, granularity, min_copy, pieces)
        sections.append(EditFile(own, ops) if own is not None else CreateFile(path, ops))
    sections.extend(DeleteFile(file) for file in deleted)
    if not sections:
        if not len(workspace):
            raise ValueError("no files before or after: there is no program to write")
        first = workspace.document(1)
        sections.append(EditFile(1, _unchanged(first, granularity)))
    return MultiProgram(tuple(sections))


def _unchanged(document: Document, granularity: Granularity) -> tuple[FileOp, ...]:
    """The ops that copy a document whole (none for an empty one)."""
    if not document.n_lines:
        return ()
    return (copy_op(document, 0, len(document.text), granularity),)


def per_file_programs(
    before: Workspace | Mapping[str, str] | Iterable[tuple[str, str]],
    after: Mapping[str, str],
    *,
    granularity: Granularity = "line",
    min_copy: int = 1,
    pieces: Pieces | None = None,
) -> MultiProgram:
    """The same edit written file by file: each section copies only from its own file (a
    created file is generated whole), as single-file programs would write it. What the
    multi-file oracle is measured against."""
    workspace = as_workspace(before)
    targets, deleted = _targets(workspace, after)
    sections: list[Section] = []
    for own, path, text in targets:
        alone = Workspace([(path, workspace.document(own).text if own is not None else "")])
        sources = _sources(alone, granularity, pieces)
        ops = _section_ops(sources, alone, 1, text, granularity, min_copy, pieces)
        sections.append(EditFile(own, ops) if own is not None else CreateFile(path, ops))
    sections.extend(DeleteFile(file) for file in deleted)
    return MultiProgram(tuple(sections))
