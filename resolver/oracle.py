"""Oracle programs: the minimal program that turns ``before`` into ``after`` exactly."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Literal

from cad.resolver.cover import CopySegment, minimal_cover
from cad.resolver.document import Document, split_lines
from cad.resolver.program import CopyLines, CopySpan, Gen, Op, Program

Granularity = Literal["line", "subline"]
Pieces = Callable[[str], Sequence[tuple[int, int]]]
"""A tokenizer seen as a function from text to token (start, end) character offsets."""


def token_pieces(text: str, offsets: Sequence[tuple[int, int]]) -> list[str]:
    """Cut ``text`` at token starts into pieces that tile it exactly.

    Byte-level tokenizers may split one character over two tokens (overlapping offsets);
    such tokens merge into one piece, so pieces always concatenate back to ``text``."""
    cuts = sorted({start for start, _ in offsets if 0 < start < len(text)})
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def oracle_units(text: str, granularity: Granularity, pieces: Pieces | None) -> list[str]:
    """The units the oracle covers ``text`` with: lines, characters, or token pieces."""
    if granularity == "line":
        return split_lines(text)
    if pieces is None:
        return list(text)
    return token_pieces(text, pieces(text))


def line_costs(after: str, lines: list[str], pieces: Pieces | None) -> list[int]:
    """What generating each line of ``after`` costs: its characters, or its tokens."""
    if pieces is None:
        return [len(line) for line in lines]
    doc = Document(after)
    costs = [0] * len(lines)
    for start, _ in pieces(after):
        if start < len(after):
            costs[doc.position(start)[0] - 1] += 1
    return costs


def copy_op(
    before: Document, start: int, end: int, granularity: Granularity
) -> CopyLines | CopySpan:
    """The copy of characters ``[start, end)`` of ``before``: whole lines where it starts
    and ends on line starts (always, for ``line``), else a span."""
    if granularity == "line" or (before.is_line_start(start) and before.is_line_start(end)):
        first = before.position(start)[0]
        last = before.position(end - 1)[0]
        return CopyLines(first, last)
    l1, c1 = before.position(start)
    l2, c2 = before.position(end - 1)
    return CopySpan(l1, c1, l2, c2)


def oracle(
    before: str,
    after: str,
    *,
    granularity: Granularity = "line",
    min_copy: int = 1,
    pieces: Pieces | None = None,
) -> Program:
    """The minimal program P with ``resolve(P, before) == after``.

    Minimal means fewest generated units first, fewest ops second. Units are lines
    (``granularity="line"``) or characters (``"subline"``); ``min_copy`` is the shortest
    copy in those units. With ``pieces`` (a tokenizer's offsets) generated text is counted
    in tokens instead of characters, and sub-line copies move whole token pieces.
    """
    if granularity not in ("line", "subline"):
        raise ValueError(f"granularity must be 'line' or 'subline', not {granularity!r}")
    source = oracle_units(before, granularity, pieces)
    target = oracle_units(after, granularity, pieces)
    costs = line_costs(after, target, pieces) if granularity == "line" else None
    segments = minimal_cover(source, target, costs=costs, min_copy=min_copy)

    source_starts = [0]
    for unit in source:
        source_starts.append(source_starts[-1] + len(unit))
    before_doc = Document(before)
    ops: list[Op] = []
    for segment in segments:
        if isinstance(segment, CopySegment):
            start = source_starts[segment.source_start]
            end = source_starts[segment.source_start + segment.length]
            ops.append(copy_op(before_doc, start, end, granularity))
        else:
            text = "".join(target[segment.target_start : segment.target_start + segment.length])
            ops.append(Gen(text))
    return Program(tuple(ops))
