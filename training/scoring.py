"""Scores shared by evaluation and the perturbation study: copy-endpoint accuracy, shares."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cad.resolver import CopyLines, Program


def share(part: int | float, whole: int | float) -> float:
    """``part / whole``, or 0 for an empty whole."""
    return part / whole if whole else 0.0


def copy_endpoints(program: Program) -> tuple[Counter[int], Counter[int]]:
    """The start lines and the end lines of the program's line copies, as multisets."""
    copies = [op for op in program.ops if isinstance(op, CopyLines)]
    return Counter(op.start for op in copies), Counter(op.end for op in copies)


@dataclass
class Endpoints:
    """Copy-endpoint accuracy pooled over many programs, starts and ends separately.

    Per program, the hits are the endpoints a predicted program shares with the reference
    (as multisets) and the count is the larger of the two programs' copy counts, so both a
    missed copy and a spurious one lower the score. A program with no copies on either side
    adds nothing."""

    start_hits: int = 0
    end_hits: int = 0
    count: int = 0

    def add(self, predicted: Program | None, reference: Program) -> None:
        """Score ``predicted`` (``None``: no program at all) against ``reference``."""
        gold_starts, gold_ends = copy_endpoints(reference)
        if predicted is None:
            self.count += gold_starts.total()
            return
        starts, ends = copy_endpoints(predicted)
        self.count += max(gold_starts.total(), starts.total())
        self.start_hits += (starts & gold_starts).total()
        self.end_hits += (ends & gold_ends).total()

    @property
    def start_acc(self) -> float:
        """Share of copy starts that match the reference."""
        return share(self.start_hits, self.count)

    @property
    def end_acc(self) -> float:
        """Share of copy ends that match the reference."""
        return share(self.end_hits, self.count)
