"""Copy coverage of multi-file edits: how much of the new text cross-file copies reach beyond
what copies within each file reach.

Every written file's gold text is covered four ways: by per-file programs (each file copies
only from its own old text; a created file is generated whole) and by the multi-file
oracle (copies from every old file), each at line and sub-line granularity. A token of the
gold text counts as copied when it lies entirely inside copied text, and as copied across
files when that text is a copy from another file.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from cad.resolver.multi_oracle import oracle_multi, per_file_programs
from cad.resolver.multi_resolve import file_op_text
from cad.resolver.multi_syntax import format_multi
from cad.resolver.oracle import Granularity, Pieces
from cad.resolver.program import (
    CopyFrom,
    DeleteFile,
    EditFile,
    Gen,
    MultiProgram,
    Program,
)
from cad.resolver.syntax import format_program
from cad.resolver.workspace import Workspace

SCHEMES = ("per_file_line", "per_file_subline", "multi_line", "multi_subline")
"""The four programs every edit is covered by: per-file or multi-file, line or sub-line."""


@dataclass(frozen=True)
class ProgramCost:
    """What one program of an edit copies and costs: gold tokens copied (``cross``: by
    copies from another file), ops (section tags counted), and tokens of program text (the
    ops the model writes; copied text is not in it)."""

    copied: int
    cross: int
    ops: int
    program_tokens: int


@dataclass(frozen=True)
class MultiEditCoverage:
    """Coverage of one multi-file edit: the files it writes, their gold tokens, and the cost
    of each scheme of ``SCHEMES``."""

    files: int
    tokens: int
    costs: dict[str, ProgramCost]


def _copied_tokens(
    program: MultiProgram, workspace: Workspace, offsets: Mapping[int, Sequence[tuple[int, int]]]
) -> tuple[int, int]:
    """Gold tokens (``offsets`` per section index) inside copied text, and inside text
    copied from another file."""
    copied = cross = 0
    for index, section in enumerate(program.sections):
        if isinstance(section, DeleteFile):
            continue
        own = section.file if isinstance(section, EditFile) else None
        flags = bytearray()
        for op in section.ops:
            size = len(file_op_text(op, workspace, own))
            is_cross = isinstance(op, CopyFrom) and op.file != own
            flags += bytes([0 if isinstance(op, Gen) else 2 if is_cross else 1]) * size
        copied_prefix = [0, *accumulate(flag > 0 for flag in flags)]
        cross_prefix = [0, *accumulate(flag == 2 for flag in flags)]
        for start, end in offsets.get(index, ()):
            if end > start:
                copied += copied_prefix[end] - copied_prefix[start] == end - start
                cross += cross_prefix[end] - cross_prefix[start] == end - start
    return copied, cross


def _program_tokens(program: MultiProgram, per_file: bool, count: Callable[[str], int]) -> int:
    """Tokens of the program text; per-file programs are one single-file program per
    written file (deletions cost nothing)."""
    if not per_file:
        return count(format_multi(program))
    return sum(
        count(format_program(Program(section.ops)))  # type: ignore[arg-type]
        for section in program.sections
        if not isinstance(section, DeleteFile)
    )


def analyze_multi_edit(
    before: Mapping[str, str],
    after: Mapping[str, str],
    pieces: Pieces,
    count_tokens: Callable[[str], int],
    *,
    min_copy: int = 1,
) -> MultiEditCoverage:
    """Token coverage of the files an edit writes, per scheme of ``SCHEMES`` (sub-line
    copies at least ``min_copy`` tokens long)."""
    workspace = Workspace(before)
    costs: dict[str, ProgramCost] = {}
    offsets: dict[int, Sequence[tuple[int, int]]] = {}
    tokens = files = 0
    for scheme in SCHEMES:
        granularity: Granularity = "line" if scheme.endswith("_line") else "subline"
        build = per_file_programs if scheme.startswith("per_file") else oracle_multi
        minimum = min_copy if granularity == "subline" else 1
        program = build(workspace, after, granularity=granularity, min_copy=minimum, pieces=pieces)
        if not offsets:
            for index, section in enumerate(program.sections):
                if not isinstance(section, DeleteFile):
                    path = (
                        workspace.paths[section.file - 1]
                        if isinstance(section, EditFile)
                        else section.path
                    )
                    offsets[index] = list(pieces(after[path]))
            tokens = sum(1 for spans in offsets.values() for start, end in spans if end > start)
            files = len(offsets)
        copied, cross = _copied_tokens(program, workspace, offsets)
        costs[scheme] = ProgramCost(
            copied=copied,
            cross=cross,
            ops=program.op_count,
            program_tokens=_program_tokens(program, scheme.startswith("per_file"), count_tokens),
        )
    return MultiEditCoverage(files=files, tokens=tokens, costs=costs)


def summarize_multi(results: list[MultiEditCoverage]) -> dict[str, object]:
    """Pooled coverage per scheme, what multi-file copies add over per-file ones, how many
    edits copy across files, and ops and program tokens in total and per edit."""
    tokens = sum(r.tokens for r in results) or 1
    schemes: dict[str, dict[str, float]] = {}
    for scheme in SCHEMES:
        costs = [r.costs[scheme] for r in results]
        schemes[scheme] = {
            "pooled": sum(c.copied for c in costs) / tokens,
            "cross_pooled": sum(c.cross for c in costs) / tokens,
            "ops": sum(c.ops for c in costs),
            "ops_median": statistics.median(c.ops for c in costs),
            "program_tokens": sum(c.program_tokens for c in costs),
            "program_tokens_median": statistics.median(c.program_tokens for c in costs),
        }
    gain = {
        granularity: schemes[f"multi_{granularity}"]["pooled"]
        - schemes[f"per_file_{granularity}"]["pooled"]
        for granularity in ("line", "subline")
    }
    return {
        "n": len(results),
        "files": sum(r.files for r in results),
        "tokens": tokens,
        "schemes": schemes,
        "cross_file_gain": gain,
        "edits_copying_across_files": sum(
            1 for r in results if r.costs["multi_subline"].cross or r.costs["multi_line"].cross
        ),
    }
