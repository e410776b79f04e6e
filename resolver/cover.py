"""Minimal covers of a target sequence by copies from a source sequence.

Shared by the line oracle (units are lines), the sub-line oracle (units are characters or
token pieces) and the coverage analysis. A cover is a list of segments: copies of a
contiguous source run, or generated target runs. It minimises the summed cost of generated
units first and the number of segments second (adjacent generated units form one segment).
"""

from __future__ import annotations

import bisect
from array import array
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CopySegment:
    """``length`` target units starting at ``target_start`` equal source units at
    ``source_start``, found by the copy kind ``kind`` (0 when there is one)."""

    target_start: int
    source_start: int
    length: int
    kind: int = 0


@dataclass(frozen=True, slots=True)
class GenSegment:
    """Target units ``target_start .. target_start + length`` are generated."""

    target_start: int
    length: int


Segment = CopySegment | GenSegment


def longest_matches(
    source: Sequence[Hashable], target: Sequence[Hashable]
) -> tuple[array[int], array[int]]:
    """For every target position k: the longest run ``target[k:k+L]`` found in ``source``,
    and a source start of one occurrence. Linear time: a suffix automaton of the reversed
    source scanned with the reversed target."""
    return MatchIndex([source]).scan(target)


class MatchIndex:
    """The suffix automaton of one or more source sequences, for finding, at every position
    of a target, the longest run that occurs in any of them (never across two sources).

    The sources are concatenated, reversed, with a separator symbol between them that no
    target unit maps to, so a match stops at a source's end. Positions it reports are
    offsets into the concatenation (``locate`` turns one into a source and an offset)."""

    def __init__(self, sources: Sequence[Sequence[Hashable]]) -> None:
        self.ids: dict[Hashable, int] = {}
        self.starts: list[int] = []
        at = 0
        for source in sources:
            self.starts.append(at)
            at += len(source) + 1
        self.length = max(at - 1, 0)
        ids = self.ids
        symbols = array("i")
        gaps = []
        for number in range(len(sources) - 1, -1, -1):
            symbols.extend(ids.setdefault(u, len(ids)) for u in reversed(sources[number]))
            if number:
                gaps.append(len(symbols))
                symbols.append(0)
        separator = len(ids)
        for gap in gaps:
            symbols[gap] = separator
        self.absent = separator + 1  # a symbol no source unit (nor the separator) has
        self.automaton = SuffixAutomaton(symbols)

    def locate(self, position: int) -> tuple[int, int]:
        """The source (0-based) and the offset within it of a concatenation offset."""
        source = bisect.bisect_right(self.starts, position) - 1
        return source, position - self.starts[source]

    def scan(self, target: Sequence[Hashable]) -> tuple[array[int], array[int]]:
        """For every target position k: the longest run ``target[k:k+L]`` found in a source
        and the concatenation offset of one occurrence (the last one)."""
        tgt = array("i", [self.ids.get(u, self.absent) for u in reversed(target)])
        automaton = self.automaton
        link, length, first_end, step = (
            automaton.link,
            automaton.length,
            automaton.first_end,
            automaton.step,
        )
        n, m = self.length, len(tgt)
        match_len = array("i", bytes(4 * m))
        match_src = array("i", bytes(4 * m))
        state, matched = 0, 0
        for t, symbol in enumerate(tgt):
            following = step(state, symbol)
            while following < 0 and state != 0:
                state = link[state]
                matched = length[state]
                following = step(state, symbol)
            if following >= 0:
                state = following
                matched += 1
            else:
                state, matched = 0, 0
            k = m - 1 - t
            match_len[k] = matched
            match_src[k] = n - 1 - first_end[state] if matched else 0
        return match_len, match_src


_NONE = -1
"""An empty transition slot (symbols are never negative)."""


class SuffixAutomaton:
    """The suffix automaton of a sequence of non-negative int symbols, in flat arrays.

    Per state: its suffix ``link``, the ``length`` of its longest string, the position where
    that string first ends, and its first two transitions (``symbol1``/``target1``,
    ``symbol2``/``target2``); the few states with more keep the rest in ``extra``. Nearly
    every state has one or two transitions, so a state costs about 30 bytes instead of a
    dictionary (over 200): a 4 MB text needs hundreds of megabytes, not gigabytes."""

    def __init__(self, symbols: Sequence[int]) -> None:
        link = self.link = array("i", [-1])
        length = self.length = array("i", [0])
        first_end = self.first_end = array("i", [-1])
        symbol1 = self.symbol1 = array("i", [_NONE])
        target1 = self.target1 = array("i", [0])
        symbol2 = self.symbol2 = array("i", [_NONE])
        target2 = self.target2 = array("i", [0])
        extra: dict[int, dict[int, int]] = {}
        self.extra = extra
        last = 0
        for pos, symbol in enumerate(symbols):
            cur = len(length)
            length.append(length[last] + 1)
            first_end.append(pos)
            link.append(0)
            symbol1.append(_NONE)
            target1.append(0)
            symbol2.append(_NONE)
            target2.append(0)
            # Walk the suffix links from the old last state, adding a transition to the new
            # state, until a state already has one on ``symbol`` (to ``q``).
            p, q = last, -1
            while p != -1:
                if symbol1[p] == symbol:
                    q = target1[p]
                    break
                if symbol1[p] == _NONE:
                    symbol1[p], target1[p] = symbol, cur
                elif symbol2[p] == symbol:
                    q = target2[p]
                    break
                elif symbol2[p] == _NONE:
                    symbol2[p], target2[p] = symbol, cur
                else:
                    more = extra.setdefault(p, {})
                    q = more.setdefault(symbol, cur)
                    if q != cur:
                        break
                    q = -1
                p = link[p]
            last = cur
            if p == -1:
                continue
            if length[p] + 1 == length[q]:
                link[cur] = q
                continue
            clone = len(length)
            length.append(length[p] + 1)
            first_end.append(first_end[q])
            link.append(link[q])
            symbol1.append(symbol1[q])
            target1.append(target1[q])
            symbol2.append(symbol2[q])
            target2.append(target2[q])
            if q in extra:
                extra[clone] = dict(extra[q])
            # Redirect to the clone the transitions on ``symbol`` that led to ``q``.
            while p != -1:
                if symbol1[p] == symbol:
                    if target1[p] != q:
                        break
                    target1[p] = clone
                elif symbol2[p] == symbol:
                    if target2[p] != q:
                        break
                    target2[p] = clone
                else:
                    more = extra.get(p)
                    if more is None or more.get(symbol) != q:
                        break
                    more[symbol] = clone
                p = link[p]
            link[q] = clone
            link[cur] = clone

    def step(self, state: int, symbol: int) -> int:
        """The state reached from ``state`` on ``symbol``, or -1."""
        if self.symbol1[state] == symbol:
            return self.target1[state]
        if self.symbol2[state] == symbol:
            return self.target2[state]
        more = self.extra.get(state)
        return -1 if more is None else more.get(symbol, -1)


def minimal_cover(
    source: Sequence[Hashable],
    target: Sequence[Hashable],
    *,
    costs: Sequence[int] | None = None,
    min_copy: int = 1,
) -> list[Segment]:
    """Cover ``target`` with copies of ``source`` runs (each at least ``min_copy`` units)
    and generated runs, minimising (generated cost, segments). ``costs[k]`` is the cost of
    generating target unit k (default 1 each)."""
    kind = CopyKind(*longest_matches(source, target))
    return cover_from_matches([kind], len(target), costs=costs, min_copy=min_copy)


@dataclass(frozen=True)
class CopyKind:
    """Where one kind of copy can come from, as ``longest_matches`` or ``MatchIndex.scan``
    give it for a target, and the generated cost ``extra`` every copy of the kind is
    charged (what writing it takes beyond a plain copy)."""

    match_len: Sequence[int]
    match_src: Sequence[int]
    extra: int = 0


class _Window:
    """The copy starts of one kind that can reach the current end, best first: a monotone
    deque over the starts ``lowest..newest``."""

    def __init__(self, kind: CopyKind, scale: int) -> None:
        self.match_len = kind.match_len
        self.extra = kind.extra * scale
        self.starts: deque[int] = deque()
        self.lowest = 0

    def best_start(self, end: int, newest: int, best: array[int]) -> int | None:
        """Slide the window to copies ending at ``end`` (the newest start ``newest``); the
        start with the cheapest prefix, or ``None``."""
        starts = self.starts
        if newest >= 0:
            while starts and best[starts[-1]] > best[newest]:
                starts.pop()
            starts.append(newest)
        while self.lowest <= newest and self.lowest + self.match_len[self.lowest] < end:
            self.lowest += 1
        while starts and starts[0] < self.lowest:
            starts.popleft()
        return starts[0] if starts and self.lowest <= newest else None


def cover_from_matches(
    kinds: Sequence[CopyKind],
    m: int,
    *,
    costs: Sequence[int] | None = None,
    min_copy: int = 1,
) -> list[Segment]:
    """``minimal_cover`` of a target of ``m`` units from the longest matches of each kind of
    copy: a copy of kind i costs ``kinds[i].extra`` generated units and one segment, and its
    segment (``kind`` i) starts at a ``match_src`` position of that kind.

    Dynamic programme over target prefixes. A copy of a kind may end at k' from start k iff
    ``k + min_copy <= k' <= k + match_len[k]``; since a match's suffixes match too, the
    starts that reach k' form one contiguous window whose ends only move right, so a
    monotone deque per kind gives the best start in amortised O(1). A (cost, segments) pair
    is one integer ``cost * scale + segments`` (segments never reach ``scale``), kept in flat
    arrays."""
    if min_copy < 1:
        raise ValueError("min_copy must be at least 1")
    unit_cost = costs if costs is not None else [1] * m
    scale = m + 2
    most_extra = max((kind.extra for kind in kinds), default=0)
    infinite = (sum(unit_cost) + most_extra * m + 1) * scale
    after_copy = array("q", [infinite]) * (m + 1)
    after_gen = array("q", [infinite]) * (m + 1)
    best = array("q", [infinite]) * (m + 1)
    copy_from = array("i", bytes(4 * (m + 1)))
    copy_kind = array("i", bytes(4 * (m + 1)))
    gen_extends = bytearray(m + 1)
    after_copy[0] = best[0] = 0
    windows = [_Window(kind, scale) for kind in kinds]
    for end in range(1, m + 1):
        cost = unit_cost[end - 1] * scale
        open_gen = after_copy[end - 1] + cost + 1
        extend_gen = after_gen[end - 1] + cost
        gen_extends[end] = extend_gen < open_gen
        after_gen[end] = min(open_gen, extend_gen)
        for number, window in enumerate(windows):
            start = window.best_start(end, end - min_copy, best)
            if start is not None and best[start] + window.extra + 1 < after_copy[end]:
                after_copy[end] = best[start] + window.extra + 1
                copy_from[end], copy_kind[end] = start, number
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
            start, number = copy_from[end], copy_kind[end]
            source = kinds[number].match_src[start]
            segments.append(CopySegment(start, source, end - start, number))
            end, in_gen = start, after_gen[start] < after_copy[start]
    segments.reverse()
    return segments
