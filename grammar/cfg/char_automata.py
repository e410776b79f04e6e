"""Finite automata over Unicode code points: the regular half of the JSON Schema front end.

``pattern``, ``format``, string lengths, property-name regions and numeric ranges are all
regular languages of characters. They are built here as NFAs, made deterministic, combined
(intersection, difference, tagged union) and minimised before ``json_text`` turns them into
grammar rules. Because the rules come from a *deterministic* automaton, a parser reading a
string never has to guess which alternative it is in, which keeps the grammars LR(1).

Transitions carry inclusive code point ranges. Every DFA state carries a set of *tags*: the
labels of the languages that accept there (empty: not accepting); a plain language uses the
single tag ``ACCEPT``. State 0 is the start state.

Regular expressions are given as a small tree (``RxChars``, ``RxConcat``, ``RxUnion``,
``RxRepeat``, ``RxAnchor``); ``^`` and ``$`` are zero-width edges that hold only before the
first and after the last character, so patterns keep JSON Schema's *search* semantics: an
unanchored pattern may match anywhere in the string."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Any

from cad.grammar import _native
from cad.grammar.cfg.errors import GrammarError

Ranges = tuple[tuple[int, int], ...]
MAX_CODE_POINT = 0x10FFFF
ANY: Ranges = ((0, MAX_CODE_POINT),)
ACCEPT = "accept"
"""The tag of a plain (untagged) language."""

MAX_NFA_STATES = 50_000
MAX_DFA_STATES = 3_000
"""Limits past which a string constraint is refused (named by the caller's keyword)."""


class AutomatonTooLarge(GrammarError):
    """A regular language whose automaton would exceed the size limits."""


# ---------------------------------------------------------------- regular expression trees


@dataclass(frozen=True)
class RxChars:
    """One character out of ``ranges``."""

    ranges: Ranges


@dataclass(frozen=True)
class RxConcat:
    """Its parts one after another."""

    parts: tuple[Rx, ...]


@dataclass(frozen=True)
class RxUnion:
    """Any one of its options."""

    options: tuple[Rx, ...]


@dataclass(frozen=True)
class RxRepeat:
    """``body`` between ``low`` and ``high`` times (``None``: unbounded)."""

    body: Rx
    low: int
    high: int | None


@dataclass(frozen=True)
class RxAnchor:
    """``^`` (``at_start``) or ``$``: zero-width, only at the start / end of the string."""

    at_start: bool


Rx = RxChars | RxConcat | RxUnion | RxRepeat | RxAnchor


def rx_literal(text: str) -> Rx:
    """The expression matching exactly ``text``."""
    return RxConcat(tuple(RxChars(((ord(c), ord(c)),)) for c in text))


# ---------------------------------------------------------------- range sets


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged, non-empty ranges."""
    if isinstance(ranges, (tuple, list)) and len(ranges) == 1:  # most calls: one range
        low, high = ranges[0]
        return ((low, high),) if low <= high else ()
    merged: list[list[int]] = []
    for low, high in sorted(r for r in ranges if r[0] <= r[1]):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return tuple((low, high) for low, high in merged)


def complement(ranges: Ranges) -> Ranges:
    """The code points not in ``ranges``."""
    result: list[tuple[int, int]] = []
    cursor = 0
    for low, high in normalize(ranges):
        if low > cursor:
            result.append((cursor, low - 1))
        cursor = high + 1
    if cursor <= MAX_CODE_POINT:
        result.append((cursor, MAX_CODE_POINT))
    return tuple(result)


def intersect_ranges(left: Ranges, right: Ranges) -> Ranges:
    """Code points in both."""
    first, second = normalize(left), normalize(right)
    result: list[tuple[int, int]] = []
    i = j = 0
    while i < len(first) and j < len(second):
        low = max(first[i][0], second[j][0])
        high = min(first[i][1], second[j][1])
        if low <= high:
            result.append((low, high))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return tuple(result)


def subtract_ranges(left: Ranges, right: Ranges) -> Ranges:
    """Code points in ``left`` and not in ``right``."""
    return intersect_ranges(left, complement(right))


def _partition(edges: list[tuple[int, int, int]]) -> list[tuple[int, int, frozenset[int]]]:
    """Split overlapping labelled ranges into disjoint ranges, each with its target set."""
    if not edges:
        return []
    events: dict[int, list[tuple[int, int]]] = {}
    for low, high, target in edges:
        events.setdefault(low, []).append((1, target))
        events.setdefault(high + 1, []).append((-1, target))
    active: dict[int, int] = {}
    result: list[tuple[int, int, frozenset[int]]] = []
    points = sorted(events)
    for point, following in itertools.pairwise(points):
        for delta, target in events[point]:
            count = active.get(target, 0) + delta
            if count:
                active[target] = count
            else:
                active.pop(target, None)
        if active:
            targets = frozenset(active)
            if result and result[-1][1] == point - 1 and result[-1][2] == targets:
                result[-1] = (result[-1][0], following - 1, targets)
            else:
                result.append((point, following - 1, targets))
    return result


# ---------------------------------------------------------------- NFA


class Nfa:
    """A nondeterministic automaton built from expression trees; states are ints."""

    def __init__(self) -> None:
        self.edges: list[list[tuple[int, int, int]]] = []
        self.epsilon: list[list[int]] = []
        self.start_edges: list[list[int]] = []
        self.end_edges: list[list[int]] = []

    def state(self) -> int:
        """A new state without edges."""
        if len(self.edges) >= MAX_NFA_STATES:
            raise AutomatonTooLarge(f"more than {MAX_NFA_STATES} automaton states")
        for table in (self.edges, self.epsilon, self.start_edges, self.end_edges):
            table.append([])
        return len(self.edges) - 1

    def add(self, rx: Rx) -> tuple[int, int]:
        """States (entry, exit) of a fresh copy of ``rx``."""
        entry, exit_ = self.state(), self.state()
        if isinstance(rx, RxChars):
            for low, high in rx.ranges:
                self.edges[entry].append((low, high, exit_))
        elif isinstance(rx, RxAnchor):
            (self.start_edges if rx.at_start else self.end_edges)[entry].append(exit_)
        elif isinstance(rx, RxConcat):
            cursor = entry
            for part in rx.parts:
                first, last = self.add(part)
                self.epsilon[cursor].append(first)
                cursor = last
            self.epsilon[cursor].append(exit_)
        elif isinstance(rx, RxUnion):
            for option in rx.options:
                first, last = self.add(option)
                self.epsilon[entry].append(first)
                self.epsilon[last].append(exit_)
        else:
            self._repeat(rx, entry, exit_)
        return entry, exit_

    def _repeat(self, rx: RxRepeat, entry: int, exit_: int) -> None:
        cursor = entry
        for _ in range(rx.low):
            first, last = self.add(rx.body)
            self.epsilon[cursor].append(first)
            cursor = last
        if rx.high is None:
            first, last = self.add(rx.body)
            self.epsilon[cursor].append(first)
            self.epsilon[last].append(cursor)
        else:
            for _ in range(rx.high - rx.low):
                first, last = self.add(rx.body)
                self.epsilon[cursor].append(first)
                self.epsilon[cursor].append(exit_)
                cursor = last
        self.epsilon[cursor].append(exit_)

    def closure(self, states: Iterable[int], *, at_start: bool, at_end: bool) -> frozenset[int]:
        """States reachable without reading a character (anchors only where they hold)."""
        seen = set(states)
        stack = list(seen)
        while stack:
            state = stack.pop()
            following = list(self.epsilon[state])
            if at_start:
                following += self.start_edges[state]
            if at_end:
                following += self.end_edges[state]
            for target in following:
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return frozenset(seen)


# ---------------------------------------------------------------- DFA


@dataclass(frozen=True)
class Dfa:
    """A deterministic automaton: ``transitions[s]`` sorted disjoint ``(low, high, target)``
    (a missing character rejects), ``tags[s]`` the labels accepting at ``s``; start 0."""

    transitions: tuple[tuple[tuple[int, int, int], ...], ...]
    tags: tuple[frozenset[Hashable], ...]

    @property
    def size(self) -> int:
        """Number of states."""
        return len(self.tags)

    def step(self, state: int, code_point: int) -> int:
        """The next state, or -1 when ``code_point`` is rejected."""
        for low, high, target in self.transitions[state]:
            if low <= code_point <= high:
                return target
        return -1

    def run(self, text: str) -> frozenset[Hashable]:
        """The tags accepting ``text`` (empty when rejected)."""
        state = 0
        for char in text:
            state = self.step(state, ord(char))
            if state < 0:
                return frozenset()
        return self.tags[state]

    def is_empty(self) -> bool:
        """Whether no string is accepted."""
        return not any(trim(self).tags)

    def all_tags(self) -> set[Hashable]:
        """Every tag some string reaches."""
        return {tag for tags in trim(self).tags for tag in tags}

    def retag(self, mapping: Callable[[frozenset[Hashable]], frozenset[Hashable]]) -> Dfa:
        """The same automaton with every state's tags replaced by ``mapping(tags)``."""
        return Dfa(self.transitions, tuple(mapping(tags) for tags in self.tags))


EMPTY_DFA = Dfa(((),), (frozenset(),))


def determinize(nfa: Nfa, initial: Iterable[int], accepting: dict[int, Hashable]) -> Dfa:
    """Subset construction, then minimisation; ``accepting`` maps NFA states to tags."""
    start = nfa.closure(initial, at_start=True, at_end=False)
    ids = {start: 0}
    order = [start]
    transitions: list[tuple[tuple[int, int, int], ...]] = []
    tags: list[frozenset[Hashable]] = []
    index = 0
    while index < len(order):
        current = order[index]
        index += 1
        ending = nfa.closure(current, at_start=False, at_end=True)
        tags.append(frozenset(accepting[s] for s in ending if s in accepting))
        edges = [edge for state in current for edge in nfa.edges[state]]
        row = []
        for low, high, targets in _partition(edges):
            target_set = nfa.closure(targets, at_start=False, at_end=False)
            found = ids.get(target_set)
            if found is None:
                if len(order) >= MAX_DFA_STATES:
                    raise AutomatonTooLarge(f"more than {MAX_DFA_STATES} automaton states")
                found = ids[target_set] = len(order)
                order.append(target_set)
            row.append((low, high, found))
        transitions.append(tuple(row))
    return minimize(Dfa(tuple(transitions), tuple(tags)))


def rx_dfa(rx: Rx, *, search: bool = False, tag: Hashable = ACCEPT) -> Dfa:
    """The minimal DFA of ``rx``; with ``search`` the expression may match anywhere inside
    the string (what JSON Schema's ``pattern`` means), otherwise it must match all of it."""
    nfa = Nfa()
    entry, exit_ = nfa.add(rx)
    if not search:
        return determinize(nfa, [entry], {exit_: tag})
    loop, matched = nfa.state(), nfa.state()
    nfa.edges[loop].append((0, MAX_CODE_POINT, loop))
    nfa.epsilon[loop].append(entry)
    nfa.edges[matched].append((0, MAX_CODE_POINT, matched))
    nfa.epsilon[exit_].append(matched)
    accepting: dict[int, Hashable] = {matched: tag, exit_: tag}
    return determinize(nfa, [entry, loop], accepting)


def string_trie(
    strings: Iterable[tuple[str, Hashable]],
) -> tuple[list[dict[int, int]], list[set[Hashable]]]:
    """The trie of ``strings``: per node, its children by code point (a child is always
    numbered after its parent) and the tags of the strings that end there."""
    children: list[dict[int, int]] = [{}]
    tags: list[set[Hashable]] = [set()]
    for text, tag in strings:
        node = 0
        for char in text:
            following = children[node].get(ord(char))
            if following is None:
                following = children[node][ord(char)] = len(children)
                children.append({})
                tags.append(set())
            node = following
        tags[node].add(tag)
    return children, tags


def literal_dfa(strings: Iterable[tuple[str, Hashable]], others: Hashable | None = None) -> Dfa:
    """A DFA accepting each string with its tag (a trie, minimised); with ``others``, every
    other string is accepted too, with that tag."""
    children, tags = string_trie(strings)
    if others is not None:
        for node_tags in tags:
            if not node_tags:
                node_tags.add(others)
    final = [frozenset(t) for t in tags]
    if others is not None:
        final.append(frozenset({others}))
    if not any(final):
        return Dfa(((),), (frozenset(),))
    return _minimal_trie(children, final, others is not None)


def _minimal_trie(
    children: list[dict[int, int]], final: list[frozenset[Hashable]], sink: bool
) -> Dfa:
    """What :func:`minimize` gives for a trie (a child always numbered after its parent) whose
    missing characters reject, or with ``sink`` lead to one state after the trie that takes
    every string: equal states are merged bottom-up by their tags and children's classes, in
    time linear in the trie, where partition refinement is quadratic in the alphabet."""
    count = len(children)
    classes: dict[tuple[Hashable, ...], int] = {}
    class_of = [0] * (count + sink)
    sink_class = -1
    if sink:
        sink_class = class_of[count] = classes.setdefault(("sink", final[count]), 0)
    for node in range(count - 1, -1, -1):
        edges = tuple((char, class_of[child]) for char, child in sorted(children[node].items()))
        if sink and final[node] == final[count] and all(c == sink_class for _, c in edges):
            class_of[node] = sink_class
        else:
            class_of[node] = classes.setdefault((final[node], edges), len(classes))
    representative: dict[int, int] = {}
    for state in range(count + sink):
        representative.setdefault(class_of[state], state)
    order = {class_of[0]: 0}
    queue = [class_of[0]]
    transitions: list[tuple[tuple[int, int, int], ...]] = []
    for block in queue:
        state = representative[block]
        if sink and block == sink_class:
            edges: list[tuple[int, int, int]] = [(0, MAX_CODE_POINT, count)]
        else:
            edges = []
            cursor = 0  # with a sink, every code point between the children leads to it
            for char, child in sorted(children[state].items()):
                if sink and char > cursor:
                    edges.append((cursor, char - 1, count))
                edges.append((char, char, child))
                cursor = char + 1
            if sink and cursor <= MAX_CODE_POINT:
                edges.append((cursor, MAX_CODE_POINT, count))
        runs: list[list[int]] = []
        for low, high, target in edges:
            number = order.setdefault(class_of[target], len(order))
            if number == len(queue):
                queue.append(class_of[target])
            if runs and runs[-1][1] == low - 1 and runs[-1][2] == number:
                runs[-1][1] = high
            else:
                runs.append([low, high, number])
        transitions.append(tuple((low, high, target) for low, high, target in runs))
    return Dfa(tuple(transitions), tuple(final[representative[block]] for block in queue))


def length_dfa(low: int, high: int | None) -> Dfa:
    """Strings of ``low`` to ``high`` characters (``None``: no upper bound)."""
    return rx_dfa(RxRepeat(RxChars(ANY), low, high))


def trim(dfa: Dfa) -> Dfa:
    """Drop states that cannot reach a tag or cannot be reached; the start stays 0."""
    reverse: list[set[int]] = [set() for _ in dfa.tags]
    for state, row in enumerate(dfa.transitions):
        for _, _, target in row:
            reverse[target].add(state)
    live = {s for s, tags in enumerate(dfa.tags) if tags}
    stack = list(live)
    while stack:
        for source in reverse[stack.pop()]:
            if source not in live:
                live.add(source)
                stack.append(source)
    if 0 not in live:
        return EMPTY_DFA
    reached = [0]
    ids = {0: 0}
    index = 0
    while index < len(reached):
        for _, _, target in dfa.transitions[reached[index]]:
            if target in live and target not in ids:
                ids[target] = len(reached)
                reached.append(target)
        index += 1
    return Dfa(
        tuple(
            tuple((lo, hi, ids[t]) for lo, hi, t in dfa.transitions[s] if t in live)
            for s in reached
        ),
        tuple(dfa.tags[s] for s in reached),
    )


Refiner = Callable[[list[list[int]], list[int]], list[int]]
"""The blocks of the coarsest partition of a table's states (its rows, a dead state's
last) that keeps the given initial classes apart."""


def native_blocks(table: list[list[int]], initial: list[int]) -> list[int]:
    """The native core's Hopcroft refinement (``_native.coarsest_partition``)."""
    symbols = len(table[0])
    return _native.coarsest_partition(list(itertools.chain.from_iterable(table)), symbols, initial)


def minimize(dfa: Dfa, refine: Refiner = native_blocks) -> Dfa:
    """The minimal equivalent DFA (tags kept apart), numbered breadth-first from the start.
    The coarsest partition is unique, and the numbering depends on the blocks alone, so any
    ``refine`` gives the same automaton: the native one by default, :func:`hopcroft_blocks`
    (Python) as the tests' reference. Hopcroft's refinement is linear-logarithmic whatever
    the automaton's depth (a negated pattern's products reach thousands of states)."""
    dfa = trim(dfa)
    count = dfa.size
    points = sorted({0} | {p for row in dfa.transitions for lo, hi, _ in row for p in (lo, hi + 1)})
    points = [p for p in points if p <= MAX_CODE_POINT]
    dead = count
    table = [_symbol_row(row, points, dead) for row in dfa.transitions]
    table.append([dead] * len(points))
    classes: dict[frozenset[Hashable], int] = {}
    initial = [classes.setdefault(tags, len(classes)) for tags in (*dfa.tags, frozenset())]
    return _quotient(dfa, table, points, refine(table, initial), dead)


def hopcroft_blocks(table: list[list[int]], initial: list[int]) -> list[int]:
    """The Python form of :func:`native_blocks` (Hopcroft's partition refinement), kept as
    the reference the native one is tested against."""
    count = len(table)
    symbols = len(table[0])
    inverse: list[dict[int, list[int]]] = [{} for _ in range(symbols)]
    for state, row in enumerate(table):
        for symbol, target in enumerate(row):
            inverse[symbol].setdefault(target, []).append(state)
    grouped: dict[int, set[int]] = {}
    for state, cls in enumerate(initial):
        grouped.setdefault(cls, set()).add(state)
    blocks = list(grouped.values())
    block_of = [0] * count
    for index, block in enumerate(blocks):
        for state in block:
            block_of[state] = index
    pending = {(index, symbol) for index in range(len(blocks)) for symbol in range(symbols)}
    while pending:
        splitter, symbol = pending.pop()
        sources: set[int] = set()
        for target in blocks[splitter]:
            sources.update(inverse[symbol].get(target, ()))
        touched: dict[int, set[int]] = {}
        for state in sources:
            touched.setdefault(block_of[state], set()).add(state)
        for index, inside in touched.items():
            block = blocks[index]
            if len(inside) == len(block):
                continue
            outside = block - inside
            smaller, larger = (
                (inside, outside) if len(inside) <= len(outside) else (outside, inside)
            )
            blocks[index] = larger
            blocks.append(smaller)
            new = len(blocks) - 1
            for state in smaller:
                block_of[state] = new
            for other in range(symbols):
                if (index, other) in pending:
                    pending.add((new, other))
                else:
                    pending.add((new, other) if len(smaller) <= len(larger) else (index, other))
    return block_of


def _symbol_row(row: tuple[tuple[int, int, int], ...], points: list[int], dead: int) -> list[int]:
    """Targets of one state per alphabet symbol (``points[i]`` starts symbol ``i``)."""
    targets = [dead] * len(points)
    symbol = 0
    for low, high, target in row:
        while points[symbol] < low:
            symbol += 1
        while symbol < len(points) and points[symbol] <= high:
            targets[symbol] = target
            symbol += 1
    return targets


def _quotient(
    dfa: Dfa, table: list[list[int]], points: list[int], block_of: list[int], dead: int
) -> Dfa:
    """The automaton over blocks, numbered breadth-first from the start's block."""
    order: dict[int, int] = {block_of[0]: 0}
    representative: dict[int, int] = {}
    for state in range(dfa.size):
        representative.setdefault(block_of[state], state)
    queue = [block_of[0]]
    transitions: list[tuple[tuple[int, int, int], ...]] = []
    index = 0
    while index < len(queue):
        state = representative[queue[index]]
        index += 1
        runs: list[list[int]] = []
        for symbol, target in enumerate(table[state]):
            if target == dead:
                continue
            block = block_of[target]
            if block not in order:
                order[block] = len(order)
                queue.append(block)
            low = points[symbol]
            high = points[symbol + 1] - 1 if symbol + 1 < len(points) else MAX_CODE_POINT
            if runs and runs[-1][1] == low - 1 and runs[-1][2] == order[block]:
                runs[-1][1] = high
            else:
                runs.append([low, high, order[block]])
        transitions.append(tuple((lo, hi, t) for lo, hi, t in runs))
    return Dfa(tuple(transitions), tuple(dfa.tags[representative[b]] for b in queue))


TagCombiner = Callable[[frozenset[Hashable], frozenset[Hashable]], frozenset[Hashable]]


def product(left: Dfa, right: Dfa, combine: TagCombiner) -> Dfa:
    """The product automaton: state tags ``combine(left tags, right tags)``; a side that
    has rejected continues as a dead state with no tags."""
    boundaries = {0}
    for dfa in (left, right):
        for row in dfa.transitions:
            for low, high, _ in row:
                boundaries.add(low)
                boundaries.add(high + 1)
    points = sorted(p for p in boundaries if p <= MAX_CODE_POINT)
    left_rows = [_symbol_row(row, points, -1) for row in left.transitions]
    right_rows = [_symbol_row(row, points, -1) for row in right.transitions]
    dead_row = [-1] * len(points)
    ids: dict[tuple[int, int], int] = {(0, 0): 0}
    order = [(0, 0)]
    transitions: list[tuple[tuple[int, int, int], ...]] = []
    tags: list[frozenset[Hashable]] = []
    nothing: frozenset[Hashable] = frozenset()
    index = 0
    while index < len(order):
        a, b = order[index]
        index += 1
        tags.append(
            combine(left.tags[a] if a >= 0 else nothing, right.tags[b] if b >= 0 else nothing)
        )
        row_a = left_rows[a] if a >= 0 else dead_row
        row_b = right_rows[b] if b >= 0 else dead_row
        runs: list[list[int]] = []
        for symbol, pair in enumerate(zip(row_a, row_b, strict=True)):
            if pair == (-1, -1):
                continue
            found = ids.get(pair)
            if found is None:
                if len(order) >= MAX_DFA_STATES:
                    raise AutomatonTooLarge(f"more than {MAX_DFA_STATES} automaton states")
                found = ids[pair] = len(order)
                order.append(pair)
            low = points[symbol]
            high = points[symbol + 1] - 1 if symbol + 1 < len(points) else MAX_CODE_POINT
            if runs and runs[-1][1] == low - 1 and runs[-1][2] == found:
                runs[-1][1] = high
            else:
                runs.append([low, high, found])
        transitions.append(tuple((lo, hi, t) for lo, hi, t in runs))
    return minimize(Dfa(tuple(transitions), tuple(tags)))


KEPT_OPERANDS = 256
"""The set operations below keep their results for operands of at most this many states
together (automata are values, and the schemas of one process restrict the same strings by
the same patterns and formats again and again), the last 128 of each operation: a result
has at most :data:`MAX_DFA_STATES` states, so what is kept stays within a few megabytes in
all but contrived cases. Larger operands are computed every time."""


_KEPT: list[Any] = []
"""The caches of the set operations, for :func:`clear_memoised`."""


def _kept(operation: Callable[[Dfa, Dfa], Dfa]) -> Callable[[Dfa, Dfa], Dfa]:
    """``operation`` with its results on small operands kept (see :data:`KEPT_OPERANDS`)."""
    kept = lru_cache(maxsize=128)(operation)

    @wraps(operation)
    def run(left: Dfa, right: Dfa) -> Dfa:
        if left.size + right.size <= KEPT_OPERANDS:
            return kept(left, right)
        return operation(left, right)

    _KEPT.append(kept)
    return run


@_kept
def intersect(left: Dfa, right: Dfa) -> Dfa:
    """Strings both accept, with ``left``'s tags."""
    return product(left, right, lambda a, b: a if a and b else frozenset())


@_kept
def subtract(left: Dfa, right: Dfa) -> Dfa:
    """Strings ``left`` accepts and ``right`` does not, with ``left``'s tags."""
    return product(left, right, lambda a, b: a if a and not b else frozenset())


@_kept
def union(left: Dfa, right: Dfa) -> Dfa:
    """Strings either accepts; tags of both sides are united."""
    return product(left, right, lambda a, b: a | b)


def clear_memoised() -> None:
    """Forget the set operations' kept results, as a new process would start."""
    for kept in _KEPT:
        kept.cache_clear()


def any_string() -> Dfa:
    """Every string (tag ``ACCEPT``)."""
    return Dfa((((0, MAX_CODE_POINT, 0),),), (frozenset({ACCEPT}),))


def explicit_dfa(
    start: Hashable,
    alphabet: str,
    step: Callable[[Hashable, str], Hashable | None],
    accepts: Callable[[Hashable], bool],
) -> Dfa:
    """The minimal DFA of a machine given as functions over hashable states (reached from
    ``start`` by breadth-first search over the characters of ``alphabet``)."""
    ids: dict[Hashable, int] = {start: 0}
    order = [start]
    transitions: list[tuple[tuple[int, int, int], ...]] = []
    index = 0
    while index < len(order):
        state = order[index]
        index += 1
        row = []
        for char in sorted(alphabet):
            following = step(state, char)
            if following is None:
                continue
            found = ids.get(following)
            if found is None:
                if len(order) >= MAX_DFA_STATES:
                    raise AutomatonTooLarge(f"more than {MAX_DFA_STATES} automaton states")
                found = ids[following] = len(order)
                order.append(following)
            row.append((ord(char), ord(char), found))
        transitions.append(tuple(row))
    tags = tuple(frozenset({ACCEPT}) if accepts(s) else frozenset() for s in order)
    return minimize(Dfa(tuple(transitions), tags))
