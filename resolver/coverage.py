"""Copy-ceiling analysis: how much of an edit's output a program can copy instead of generate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from resolver.document import Document
from resolver.oracle import Granularity, Pieces, oracle
from resolver.program import Gen, Program
from resolver.resolve import op_text
from resolver.syntax import format_program

DEFAULT_SWEEP = (1, 2, 4, 8, 16, 32)


def speedup_ceiling(copied_fraction: float, kernel_speedup: float) -> float:
    """Closed-form wall-clock ceiling ``1 / ((1 - f) + f / s)`` when a fraction ``f`` of
    the output tokens is copied at ``s`` times the cost-per-token of decoding."""
    if kernel_speedup <= 0:
        raise ValueError("kernel speedup must be positive")
    return 1.0 / ((1.0 - copied_fraction) + copied_fraction / kernel_speedup)


def copied_token_count(
    program: Program, before: str, after_offsets: Sequence[tuple[int, int]]
) -> int:
    """How many of the output's tokens (given as offsets) lie entirely inside copied text."""
    doc = Document(before)
    covered = [0]
    for index, op in enumerate(program.ops):
        piece = op_text(op, doc, index)
        flag = 0 if isinstance(op, Gen) else 1
        covered.extend([flag] * len(piece))
    prefix = [0] * len(covered)
    for i in range(1, len(covered)):
        prefix[i] = prefix[i - 1] + covered[i]
    return sum(
        1
        for start, end in after_offsets
        if end > start and prefix[end] - prefix[start] == end - start
    )


@dataclass(frozen=True)
class EditCoverage:
    """Coverage of one (before, after) pair under the line and sub-line oracles."""

    tokens: int
    line_copied: int
    subline_copied: int
    line_ops: int
    subline_ops: int
    line_program_tokens: int
    subline_program_tokens: int
    sweep: dict[int, int] = field(default_factory=dict)


def analyze_edit(
    before: str,
    after: str,
    pieces: Pieces,
    count_tokens: Callable[[str], int],
    *,
    min_copy: int = 1,
    sweep: Sequence[int] = DEFAULT_SWEEP,
) -> EditCoverage:
    """Token coverage of ``after`` by copies: line oracle, sub-line oracle at ``min_copy``
    tokens, and the sub-line oracle at every minimum span length in ``sweep``."""
    offsets = list(pieces(after))

    def run(granularity: Granularity, minimum: int) -> tuple[Program, int]:
        program = oracle(before, after, granularity=granularity, min_copy=minimum, pieces=pieces)
        return program, copied_token_count(program, before, offsets)

    line_program, line_copied = run("line", 1)
    subline_program, subline_copied = run("subline", min_copy)
    swept = {m: (subline_copied if m == min_copy else run("subline", m)[1]) for m in sweep}
    return EditCoverage(
        tokens=sum(1 for start, end in offsets if end > start),
        line_copied=line_copied,
        subline_copied=subline_copied,
        line_ops=len(line_program),
        subline_ops=len(subline_program),
        line_program_tokens=count_tokens(format_program(line_program)),
        subline_program_tokens=count_tokens(format_program(subline_program)),
        sweep=swept,
    )
