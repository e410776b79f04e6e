"""Minimal covers of a target sequence by copies from a source sequence.

Shared by the line oracle (units are lines), the sub-line oracle (units are characters or
token pieces) and the coverage analysis. A cover is a list of segments: copies of a
contiguous source run, or generated target runs. It minimises the summed cost of generated
units first and the number of segments second (adjacent generated units form one segment).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CopySegment:
    """``length`` target units starting at ``target_start`` equal source units at ``source_start``."""

    target_start: int
    source_start: int
    length: int


@dataclass(frozen=True, slots=True)
class GenSegment:
    """Target units ``target_start .. target_start + length`` are generated."""

    target_start: int
    length: int


Segment = CopySegment | GenSegment


def longest_matches(
    source: Sequence[Hashable], target: Sequence[Hashable]
) -> tuple[list[int], list[int]]:
    """For every target position k: the longest run ``target[k:k+L]`` found in ``source``,
    and a source start of one occurrence. Linear time: a suffix automaton of the reversed
    source scanned with the reversed target."""
    ids: dict[Hashable, int] = {}
    src = [ids.setdefault(u, len(ids)) for u in reversed(source)]
    tgt = [ids.get(u, -1) for u in reversed(target)]

    nxt: list[dict[int, int]] = [{}]
    link = [-1]
    length = [0]
    first_end = [-1]
    last = 0
    for pos, symbol in enumerate(src):
        cur = len(nxt)
        nxt.append({})
        link.append(-1)
        length.append(length[last] + 1)
        first_end.append(pos)
        p = last
        while p != -1 and symbol not in nxt[p]:
            nxt[p][symbol] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][symbol]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                link.append(link[q])
                length.append(length[p] + 1)
                first_end.append(first_end[q])
                while p != -1 and nxt[p].get(symbol) == q:
                    nxt[p][symbol] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur

    n, m = len(src), len(tgt)
    match_len = [0] * m
    match_src = [0] * m
    state, matched = 0, 0
    for t, symbol in enumerate(tgt):
        while state != 0 and symbol not in nxt[state]:
            state = link[state]
            matched = length[state]
        if symbol in nxt[state]:
            state = nxt[state][symbol]
            matched += 1
        else:
            state, matched = 0, 0
        k = m - 1 - t
        match_len[k] = matched
        match_src[k] = n - 1 - first_end[state] if matched else 0
    return match_len, match_src


def minimal_cover(
    source: Sequence[Hashable],
    target: Sequence[Hashable],
    *,
    costs: Sequence[int] | None = None,
    min_copy: int = 1,
) -> list[Segment]:
    """Cover ``target`` with copies of ``source`` runs (each at least ``min_copy`` units)
    and generated runs, minimising (generated cost, segments). ``costs[k]`` is the cost of
    generating target unit k (default 1 each).

    Dynamic programme over target prefixes. A copy may end at k' from start k iff
    ``k + min_copy <= k' <= k + match_len[k]``; since a match's suffixes match too, the
    starts that reach k' form one contiguous window whose ends only move right, so a
    monotone deque gives the best start in amortised O(1)."""
    if min_copy < 1:
        raise ValueError("min_copy must be at least 1")
    m = len(target)
    unit_cost = costs if costs is not None else [1] * m
    match_len, match_src = longest_matches(source, target)
    inf = (float("inf"), float("inf"))
    after_copy: list[tuple[float, float]] = [inf] * (m + 1)
    after_gen: list[tuple[float, float]] = [inf] * (m + 1)
    best: list[tuple[float, float]] = [inf] * (m + 1)
    copy_from = [0] * (m + 1)
    gen_extends = [False] * (m + 1)
    after_copy[0] = best[0] = (0, 0)
    window: deque[int] = deque()
    lowest = 0
    for end in range(1, m + 1):
        cost = unit_cost[end - 1]
        open_gen = (after_copy[end - 1][0] + cost, after_copy[end - 1][1] + 1)
        extend_gen = (after_gen[end - 1][0] + cost, after_gen[end - 1][1])
        gen_extends[end] = extend_gen < open_gen
        after_gen[end] = min(open_gen, extend_gen)

        newest = end - min_copy
        if newest >= 0:
            while window and best[window[-1]] > best[newest]:
                window.pop()
            window.append(newest)
        while lowest <= newest and lowest + match_len[lowest] < end:
            lowest += 1
        while window and window[0] < lowest:
            window.popleft()
        if window and lowest <= newest:
            start = window[0]
            after_copy[end] = (best[start][0], best[start][1] + 1)
            copy_from[end] = start
        best[end] = min(after_copy[end], after_gen[end])

    segments: list[Segment] = []
    end, in_gen = m, after_gen[m] < after_copy[m]
    while end > 0:
        if in_gen:
            start = end
            while True:
                start -= 1
                if not gen_extends[start + 1]:
                    break
            segments.append(GenSegment(start, end - start))
            end, in_gen = start, False
        else:
            start = copy_from[end]
            segments.append(CopySegment(start, match_src[start], end - start))
            end, in_gen = start, after_gen[start] < after_copy[start]
    segments.reverse()
    return segments
