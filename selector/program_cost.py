"""Programs priced in forwards: the sub-line oracle that never costs more than the line one.

A sub-line program copies inside lines (``<copy span="L:C-L:C"/>``), so it generates fewer
tokens than the line program of the same edit; but every copy is an op with four numbers to
decide, and with speculative decoding a gen body that resembles the line it rewrites is
drafted from that line anyway. Which of the two needs fewer forwards depends on the edit, so
the sub-line oracle here starts from the line oracle and refines one gen at a time into
sub-line copies and smaller gens, keeping a refinement only when forced decoding (replayed
without a model) needs fewer forwards. A program without spans is decoded in line mode, so
the result never costs more forwards than the line program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cad.grammar import ProgramTokenIndex
from cad.resolver import CopyLines, CopySpan, Document, Gen, Op, Program, oracle
from cad.selector.decoder import replay_forced
from cad.selector.draft_config import ProgramPrior

Pieces = Callable[[str], Sequence[tuple[int, int]]]


@dataclass(frozen=True)
class Pricing:
    """What forced decoding is replayed with: the decoder's token index and tokenizer, its
    draft budget and program prior."""

    index: ProgramTokenIndex
    encode: Callable[[str], list[int]]
    budget: int
    prior: ProgramPrior | None = None

    def forwards(self, document: str, program: Program) -> int:
        """Forwards of forced decoding of ``program`` (sub-line mode when it has spans)."""
        stats = replay_forced(
            self.index, self.encode, document, program, budget=self.budget, prior=self.prior
        )
        return stats.forwards


def _shifted(op: Op, lines: int) -> Op:
    """``op`` of a program over a slice of the document, moved down by ``lines`` lines."""
    if isinstance(op, CopyLines):
        return CopyLines(op.start + lines, op.end + lines)
    if isinstance(op, CopySpan):
        return CopySpan(op.start_line + lines, op.start_col, op.end_line + lines, op.end_col)
    return op


def _refinement(document: Document, ops: tuple[Op, ...], at: int, pieces: Pieces | None):
    """The ops with the gen at index ``at`` replaced by the sub-line oracle of the lines it
    rewrites (those between the copies around it), or ``None`` if it rewrites none."""
    first = ops[at - 1].end + 1 if at and isinstance(ops[at - 1], CopyLines) else None
    last = (
        ops[at + 1].start - 1 if at + 1 < len(ops) and isinstance(ops[at + 1], CopyLines) else None
    )
    if first is None and at == 0:
        first = 1
    if last is None and at + 1 == len(ops):
        last = document.n_lines
    if first is None or last is None or last < first:
        return None
    region = "".join(document.lines[first - 1 : last])
    gen = ops[at]
    assert isinstance(gen, Gen)
    local = oracle(region, gen.text, granularity="subline", pieces=pieces)
    if not any(isinstance(op, CopySpan) for op in local.ops):
        return None
    return (*ops[:at], *(_shifted(op, first - 1) for op in local.ops), *ops[at + 1 :])


def subline_oracle(
    before: str, after: str, pricing: Pricing, *, pieces: Pieces | None = None
) -> Program:
    """The cheapest of the line oracle and its sub-line refinements, in forwards of forced
    decoding: each gen of the line program is replaced by the sub-line oracle of the lines it
    rewrites when that saves forwards (ties keep the line program's ops)."""
    document = Document(before)
    program = oracle(before, after)
    best = pricing.forwards(before, program)
    ops = program.ops
    index = len(ops) - 1
    while index >= 0:
        if isinstance(ops[index], Gen):
            refined = _refinement(document, ops, index, pieces)
            if refined is not None:
                cost = pricing.forwards(before, Program(refined))
                if cost < best:
                    ops, best = refined, cost
        index -= 1
    return Program(ops)
