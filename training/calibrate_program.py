"""Calibrating the program drafter from oracle programs, model-free.

The program drafter prices its guesses with a :class:`ProgramPrior`: how ops follow each
other, where copies start relative to the line the output has reached, how long they run,
when gens close. All of it is read off the oracle programs of an edit corpus (what a trained
selector learns to write). What cannot be counted off a program is then chosen by replaying
forced program decoding without a model (:func:`cad.selector.decoder.replay_forced`),
keeping what needs the fewest forwards at the configuration's draft budget: the reach
thresholds over a grid, then, one at a time, the weights of a gen body's guesses and of the
ops drafted ahead (``SEARCHED``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from cad.grammar import ProgramTokenIndex
from cad.resolver import CopyLines, Document, Gen, Program, oracle
from cad.selector.draft_config import (
    OP_KINDS,
    PREVIOUS,
    START_REACH,
    ProgramPrior,
    depth_bucket,
)
from cad.selector.program_drafting import Alignment
from cad.training.datasets import EditExample

FOLLOW_REACHES = (0.01, 0.05)
MIN_REACHES = (0.0005, 0.002)
SEARCHED: dict[str, tuple[float, ...]] = {
    "body_rate": (0.8, 0.9, 0.95),
    "follow_ops": (2, 3, 4),
    "follow_discount": (0.2, 0.3, 0.5),
    "anchor_share": (0.05, 0.15, 0.3),
    "repeat_share": (0.05, 0.15, 0.3),
}
"""The prior's weights chosen by replay, in this order, each over these values with the
others held (coordinate search from the shipped values)."""
REPLAYED_CHARACTERS = 8000
"""Edits longer than this are fitted but not replayed when choosing thresholds (replays of
long files take seconds each and decide the same way)."""


@dataclass(frozen=True)
class OracleEdit:
    """An edit with its oracle program (line granularity)."""

    before: str
    program: Program


@dataclass(frozen=True)
class PriorRow:
    """The replayed forwards and drafted tokens of one prior, summed over the replayed
    edits."""

    prior: ProgramPrior
    forwards: int
    drafted: int

    @property
    def min_reach(self) -> float:
        return self.prior.min_reach

    @property
    def follow_reach(self) -> float:
        return self.prior.follow_reach


def oracle_edits(examples: Iterable[EditExample]) -> list[OracleEdit]:
    """Each edit with its line-level oracle program."""
    return [OracleEdit(e.before, oracle(e.before, e.after)) for e in examples]


def _histogram(values: Counter[int], buckets: int) -> list[float]:
    """Shares of ``values`` (each >= 1) over doubling buckets, smoothed with half a count per
    bucket so that no length is ruled out."""
    counts = [0.5] * buckets
    for value, count in values.items():
        if value >= 1:
            counts[min(depth_bucket(value), buckets - 1)] += count
    total = sum(counts)
    return [round(c / total, 4) for c in counts]


def fit_prior(edits: list[OracleEdit], buckets: int = 12) -> ProgramPrior:
    """The op transitions, copy starts and lengths, and gen lengths of ``edits``' programs
    (counts smoothed with one pseudo-count per outcome)."""
    transitions = {previous: Counter() for previous in PREVIOUS}
    offsets: Counter[int] = Counter()
    skips: Counter[int] = Counter()
    to_end = [0, 0]
    lengths: Counter[int] = Counter()
    gens = gen_lines = 0
    for edit in edits:
        document = Document(edit.before)
        n = document.n_lines
        alignment = Alignment(document)
        ops: list = []
        for op in (*edit.program.ops, None):
            cursor = alignment.cursor(tuple(ops))
            if cursor > n:
                previous = "past_end"
            elif not ops:
                previous = "start"
            else:
                previous = "gen" if isinstance(ops[-1], Gen) else "copy"
            kind = "end" if op is None else "gen" if isinstance(op, Gen) else "copy"
            transitions[previous][kind] += 1
            if isinstance(op, CopyLines):
                offset = op.start - cursor
                if previous == "copy":
                    skips[offset] += offset >= 1
                elif abs(offset) <= START_REACH:
                    offsets[offset] += 1
                elif offset > 0:
                    offsets[START_REACH + 1] += 1
                    skips[offset - START_REACH] += 1
                to_end[op.end == n] += 1
                if op.end < n:
                    lengths[op.end - op.start + 1] += 1
            elif isinstance(op, Gen):
                gens += 1
                gen_lines += max(1, op.text.count("\n"))
            if op is not None:
                ops.append(op)
    next_op = {
        previous: {
            kind: round((counts[kind] + 1) / (sum(counts.values()) + len(OP_KINDS)), 4)
            for kind in OP_KINDS
        }
        for previous, counts in transitions.items()
    }
    span = range(-START_REACH, START_REACH + 2)
    total = sum(offsets[o] for o in span) + len(span)
    return ProgramPrior(
        next_op=next_op,
        start_offsets=[round((offsets[o] + 1) / total, 4) for o in span[:-1]],
        skip_lengths=_histogram(skips, buckets),
        to_end=round((to_end[1] + 1) / (sum(to_end) + 2), 4),
        copy_lengths=_histogram(lengths, buckets),
        gen_close=round((gens + 1) / (gen_lines + 2), 4),
    )


def replay_prior(
    edits: list[OracleEdit],
    prior: ProgramPrior,
    index: ProgramTokenIndex,
    encode: Callable[[str], list[int]],
    budget: int,
) -> tuple[int, int]:
    """Forwards and drafted tokens of forced program decoding of ``edits``, model-free."""
    from cad.selector.decoder import replay_forced

    forwards = drafted = 0
    for edit in edits:
        stats = replay_forced(index, encode, edit.before, edit.program, budget=budget, prior=prior)
        forwards += stats.forwards
        drafted += stats.drafted_tokens
    return forwards, drafted


def calibrate_prior(
    edits: list[OracleEdit],
    index: ProgramTokenIndex,
    encode: Callable[[str], list[int]],
    budget: int,
    *,
    sample: int = 40,
    on_row: Callable[[PriorRow], None] | None = None,
) -> tuple[ProgramPrior, list[PriorRow]]:
    """The prior fitted to ``edits``, with the reach thresholds and then the weights of
    ``SEARCHED`` that need the fewest forwards (then drafted tokens) when at most ``sample``
    of them (spread evenly) are replayed at ``budget``; also every prior replayed."""
    fitted = fit_prior(edits)
    small = [edit for edit in edits if len(edit.before) <= REPLAYED_CHARACTERS]
    stride = max(1, len(small) // max(sample, 1))
    chosen = small[::stride][:sample]
    rows: list[PriorRow] = []

    def measure(prior: ProgramPrior) -> PriorRow:
        forwards, drafted = replay_prior(chosen, prior, index, encode, budget)
        rows.append(PriorRow(prior, forwards, drafted))
        if on_row is not None:
            on_row(rows[-1])
        return rows[-1]

    def cost(row: PriorRow) -> tuple[int, int]:
        return row.forwards, row.drafted

    for min_reach in MIN_REACHES:
        for follow_reach in FOLLOW_REACHES:
            if follow_reach >= min_reach:
                measure(replace(fitted, min_reach=min_reach, follow_reach=follow_reach))
    best = min(rows, key=cost)
    for name, values in SEARCHED.items():
        for value in values:
            if value != getattr(best.prior, name):
                row = measure(replace(best.prior, **{name: value}))
                if cost(row) < cost(best):
                    best = row
    return best.prior, rows
