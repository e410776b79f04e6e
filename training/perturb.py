"""The span-perturbation study: how exact match falls when copy endpoints are slightly off.

Each edit's line-level oracle program round-trips to the gold file. Here every copy endpoint
is moved by a uniform random integer in ``[-eps, eps]``, clamped to the document's lines
(``1..n``) and put back in order when the two ends cross; the perturbed program is resolved
and compared with the gold file. Several trials per edit with a fixed seed make the table
reproducible. No model is involved: this measures how precise a span selector must be.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from cad.resolver import CopyLines, Document, Program, ProgramError, oracle, resolve
from cad.training.datasets import EditExample
from cad.training.scoring import Endpoints, share


@dataclass(frozen=True)
class PerturbationResult:
    """Exact match (byte-exact) and trimmed match (trailing whitespace ignored per line and at
    the end) over ``trials`` perturbed programs per edit, pooled over ``n`` edits; the share
    of copy starts and ends the noise left in place; ``valid`` is the share of perturbed
    programs that resolve (always 1: endpoints are clamped to the document)."""

    eps: int
    n: int
    trials: int
    em: float
    trimmed_em: float
    valid: float
    start_acc: float
    end_acc: float

    def to_dict(self) -> dict[str, float | int]:
        """Plain JSON-ready dict."""
        return asdict(self)


def perturb_program(program: Program, eps: int, lines: int, rng: random.Random) -> Program:
    """``program`` with every ``CopyLines`` endpoint moved by up to ``eps`` lines at random,
    clamped to ``1..lines``; generated text and sub-line copies are left alone."""
    ops = []
    for op in program.ops:
        if isinstance(op, CopyLines):
            start = min(max(op.start + rng.randint(-eps, eps), 1), lines)
            end = min(max(op.end + rng.randint(-eps, eps), 1), lines)
            op = CopyLines(min(start, end), max(start, end))
        ops.append(op)
    return Program(tuple(ops))


def trimmed(text: str) -> str:
    """``text`` with trailing whitespace removed from each line and from the end."""
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip()


def perturbation_study(
    edits: Sequence[EditExample], eps: int, *, trials: int = 5, seed: int = 0
) -> PerturbationResult:
    """Exact and trimmed match of perturbed oracle programs over ``edits`` at noise ``eps``.

    The random stream depends only on ``seed``, ``eps`` and the order of ``edits``."""
    if eps < 0:
        raise ValueError(f"the perturbation must be at least 0 lines, not {eps}")
    if trials < 1:
        raise ValueError(f"at least one trial is needed, not {trials}")
    rng = random.Random(f"{seed}:{eps}")
    exact = trim = valid = total = 0
    endpoints = Endpoints()
    for edit in edits:
        document = Document(edit.before)
        program = oracle(edit.before, edit.after, granularity="line")
        gold_trimmed = trimmed(edit.after)
        for _ in range(trials):
            perturbed = perturb_program(program, eps, max(document.n_lines, 1), rng)
            endpoints.add(perturbed, program)
            total += 1
            try:
                text = resolve(perturbed, document)
            except ProgramError:
                continue
            valid += 1
            exact += text == edit.after
            trim += trimmed(text) == gold_trimmed
    return PerturbationResult(
        eps=eps,
        n=len(edits),
        trials=trials,
        em=share(exact, total),
        trimmed_em=share(trim, total),
        valid=share(valid, total),
        start_acc=endpoints.start_acc,
        end_acc=endpoints.end_acc,
    )
