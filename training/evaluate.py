"""Evaluation of a span selector: what ``cad eval`` measures on an edit set.

Each edit is decoded by the same ``Decoder`` that ``cad edit`` uses and compared with the
gold file. Copy endpoints are scored against the edit's line-level oracle program (a
different program can still produce the gold file; exact match is what counts, endpoint
accuracy says where a selector goes wrong). Optionally each edit is also regenerated
token by token with the gold file forced, in the same process, for the wall-clock ratio.

An edit of several files is decoded by :class:`cad.selector.MultiDecoder` with the same
settings and is exact when every file after it is the gold one; it has no endpoints (its
oracle copies across files) and no AR baseline.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from cad.resolver import (
    CopyLines,
    CopySpan,
    DeleteFile,
    Document,
    Gen,
    Program,
    apply_changes,
    op_text,
    oracle,
)
from cad.selector import (
    Cancelled,
    ContextTooLongError,
    Decoder,
    LoadedModel,
    MultiDecoder,
    regenerate,
)
from cad.training.datasets import AnyExample, EditExample, MultiEditExample
from cad.training.scoring import Endpoints, share


@dataclass(frozen=True)
class EditScore:
    """One decoded edit: exact match, validity (a complete program that resolves), copy
    endpoints matched, copied and generated output tokens, wall-clock of CaD and of AR."""

    id: str
    exact: bool
    valid: bool
    start_hits: int
    end_hits: int
    endpoints: int
    copied_tokens: int
    output_tokens: int
    generated_tokens: int
    wall_s: float
    ar_wall_s: float | None


@dataclass
class EvalReport:
    """Pooled scores over ``n`` edits. ``coverage`` is the share of output tokens that came
    from copies; ``generated_tokens`` the mean model-decided tokens per edit. Wall-clock
    figures are medians over the ``timed`` edits that came out exact (the speed of a wrong
    edit says nothing), ``speedup`` the median per-edit ratio AR / CaD over them; ``None``
    when no edit was exact."""

    n: int
    em: float
    valid: float
    start_acc: float
    end_acc: float
    coverage: float
    generated_tokens: float
    wall_s: float | None
    ar_wall_s: float | None
    speedup: float | None
    timed: int = 0
    rows: list[EditScore] = field(default_factory=list)

    def to_dict(self, *, rows: bool = False) -> dict[str, object]:
        """Plain JSON-ready dict; per-edit rows only when asked."""
        data = asdict(self)
        if not rows:
            data.pop("rows")
        return data


def output_tokens(loaded: LoadedModel, program: Program, document: Document) -> tuple[int, int]:
    """Tokens of the program's output that came from copies, and in all (each op's text
    tokenised on its own, as the decoder appends it)."""
    copied = total = 0
    for index, op in enumerate(program.ops):
        count = len(loaded.tokenizer.encode(op_text(op, document, index), add_special_tokens=False))
        total += count
        if isinstance(op, CopyLines | CopySpan):
            copied += count
    return copied, total


def multi_decoder(decoder: Decoder) -> MultiDecoder:
    """A multi-file decoder with ``decoder``'s model and settings."""
    return MultiDecoder(
        decoder.loaded,
        max_new_tokens=decoder.max_new_tokens,
        subline=decoder.subline,
        sampling=decoder.sampling,
        draft_budget=decoder.budget,
    )


def score_multi_edit(
    decoder: MultiDecoder, edit: MultiEditExample, cancel: threading.Event | None
) -> EditScore:
    """Decode an edit of several files and score it (no endpoints, no AR baseline)."""
    before = edit.before_files
    try:
        result = decoder.edit(before, edit.instruction, cancel=cancel)
    except ContextTooLongError:
        return EditScore(edit.id, False, False, 0, 0, 0, 0, 0, 0, 0.0, None)
    valid = not result.stats.truncated
    generated = sum(
        len(decoder.encode(op.text))
        for section in result.program.sections
        if not isinstance(section, DeleteFile)
        for op in section.ops
        if isinstance(op, Gen)
    )
    copied = result.stats.copied_tokens
    exact = valid and apply_changes(before, result.changes) == edit.after_files
    return EditScore(
        id=edit.id,
        exact=exact,
        valid=valid,
        start_hits=0,
        end_hits=0,
        endpoints=0,
        copied_tokens=copied if valid else 0,
        output_tokens=copied + generated if valid else 0,
        generated_tokens=result.stats.generated_tokens,
        wall_s=result.stats.wall_s,
        ar_wall_s=None,
    )


def score_edit(
    decoder: Decoder, edit: EditExample, *, baseline: bool, cancel: threading.Event | None
) -> EditScore:
    """Decode ``edit`` with ``decoder`` and score it; with ``baseline``, an exact edit is also
    regenerated with AR (the speed of a wrong edit is not reported, so neither is its AR time).
    An edit too long for the model's context scores as invalid."""
    reference = oracle(edit.before, edit.after, granularity="line")
    endpoints = Endpoints()
    try:
        result = decoder.edit(edit.before, edit.instruction, cancel=cancel)
    except ContextTooLongError:
        endpoints.add(None, reference)
        return EditScore(edit.id, False, False, 0, 0, endpoints.count, 0, 0, 0, 0.0, None)
    valid = result.program is not None and not result.stats.truncated
    endpoints.add(result.program if valid else None, reference)
    copied, total = (0, 0)
    if valid and result.program is not None:
        copied, total = output_tokens(decoder.loaded, result.program, Document(edit.before))
    exact = valid and result.text == edit.after
    ar_wall = None
    if baseline and exact:  # only exact edits are timed, so only they need the AR baseline
        ar_wall = regenerate(decoder.loaded, edit.before, edit.instruction, edit.after).stats.wall_s
    return EditScore(
        id=edit.id,
        exact=exact,
        valid=valid,
        start_hits=endpoints.start_hits,
        end_hits=endpoints.end_hits,
        endpoints=endpoints.count,
        copied_tokens=copied,
        output_tokens=total,
        generated_tokens=result.stats.generated_tokens,
        wall_s=result.stats.wall_s,
        ar_wall_s=ar_wall,
    )


def summarize(rows: Sequence[EditScore]) -> EvalReport:
    """Pool per-edit scores into a report."""
    n = len(rows)
    count = sum(row.endpoints for row in rows)
    exact = [row for row in rows if row.exact]
    ratios = [row.ar_wall_s / row.wall_s for row in exact if row.ar_wall_s and row.wall_s > 0]
    ar_walls = [row.ar_wall_s for row in exact if row.ar_wall_s is not None]
    return EvalReport(
        n=n,
        em=share(sum(row.exact for row in rows), n),
        valid=share(sum(row.valid for row in rows), n),
        start_acc=share(sum(row.start_hits for row in rows), count),
        end_acc=share(sum(row.end_hits for row in rows), count),
        coverage=share(
            sum(row.copied_tokens for row in rows), sum(row.output_tokens for row in rows)
        ),
        generated_tokens=share(sum(row.generated_tokens for row in rows), n),
        wall_s=statistics.median(row.wall_s for row in exact) if exact else None,
        ar_wall_s=statistics.median(ar_walls) if ar_walls else None,
        speedup=statistics.median(ratios) if ratios else None,
        timed=len(exact),
        rows=list(rows),
    )


def evaluate(
    decoder: Decoder,
    edits: Sequence[AnyExample],
    *,
    baseline: bool = False,
    on_edit: Callable[[EditScore], None] | None = None,
    cancel: threading.Event | None = None,
) -> EvalReport:
    """Decode and score every edit; ``on_edit`` sees each score as it lands. A cancel stops
    between (or inside) edits and raises ``Cancelled``."""
    rows: list[EditScore] = []
    several: MultiDecoder | None = None
    for edit in edits:
        if cancel is not None and cancel.is_set():
            raise Cancelled("evaluation cancelled")
        if isinstance(edit, MultiEditExample):
            several = several or multi_decoder(decoder)
            row = score_multi_edit(several, edit, cancel)
        else:
            row = score_edit(decoder, edit, baseline=baseline, cancel=cancel)
        rows.append(row)
        if on_edit is not None:
            on_edit(row)
    return summarize(rows)
