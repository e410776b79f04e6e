"""Copy-ceiling analysis: how much of an edit's output a program can copy instead of generate."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cad.resolver.document import Document
from cad.resolver.oracle import Granularity, Pieces, oracle
from cad.resolver.program import Gen, Program
from cad.resolver.resolve import op_text
from cad.resolver.syntax import format_program

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


def summarize(results: list[EditCoverage], kernel_speedup: float) -> dict[str, object]:
    """Pooled and median coverage, op and program-token statistics, speedup ceilings."""
    tokens = sum(r.tokens for r in results) or 1

    def fractions(values: list[int]) -> dict[str, float]:
        per_edit = [v / r.tokens for v, r in zip(values, results, strict=True) if r.tokens]
        return {
            "pooled": sum(values) / tokens,
            "median": statistics.median(per_edit) if per_edit else 0.0,
        }

    line = fractions([r.line_copied for r in results])
    subline = fractions([r.subline_copied for r in results])
    sweep = {str(m): fractions([r.sweep[m] for r in results])["pooled"] for m in results[0].sweep}
    return {
        "n": len(results),
        "tokens": tokens,
        "line_coverage": line,
        "subline_coverage": subline,
        "sweep_pooled": sweep,
        "line_ops_median": statistics.median(r.line_ops for r in results),
        "subline_ops_median": statistics.median(r.subline_ops for r in results),
        "line_program_tokens_median": statistics.median(r.line_program_tokens for r in results),
        "subline_program_tokens_median": statistics.median(
            r.subline_program_tokens for r in results
        ),
        "kernel_speedup": kernel_speedup,
        "line_speedup_ceiling": speedup_ceiling(line["pooled"], kernel_speedup),
        "subline_speedup_ceiling": speedup_ceiling(subline["pooled"], kernel_speedup),
    }
