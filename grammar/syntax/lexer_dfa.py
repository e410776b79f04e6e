"""Byte-level lexer automata: patterns over byte sets, compiled into one deterministic automaton.

Patterns are small trees (byte sets, sequences, choices, repetition) with a label per lexeme
kind; :func:`build_dfa` unions them (Thompson NFA, subset construction over byte atoms) into
a :class:`Dfa` whose accepting states carry the label of the highest-priority pattern that
ends there. The lexer runs it with maximal munch and no backtracking: a lexeme ends when the
next byte has no transition, and it must then be in an accepting state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

DEAD = -1
"""No transition: the byte cannot continue the lexeme."""


@dataclass(frozen=True)
class Pattern:
    """A regular pattern over bytes; build with :func:`byte_set`, :func:`text`, :func:`seq`,
    :func:`alt`, :func:`star`, :func:`plus` and :func:`opt`."""

    kind: str
    mask: int = 0
    parts: tuple[Pattern, ...] = ()


def byte_set(values: Iterable[int] | str | bytes) -> Pattern:
    """One byte out of ``values`` (ints, or the bytes of a string)."""
    if isinstance(values, str):
        values = values.encode("latin-1")
    mask = 0
    for value in values:
        mask |= 1 << value
    return Pattern("bytes", mask)


def byte_range(low: int, high: int) -> Pattern:
    """One byte in ``low..high``."""
    return Pattern("bytes", ((1 << (high + 1)) - 1) ^ ((1 << low) - 1))


def any_byte_except(values: Iterable[int] | str | bytes) -> Pattern:
    """One byte not in ``values``."""
    excluded = byte_set(values).mask
    return Pattern("bytes", ((1 << 256) - 1) ^ excluded)


def text(value: str | bytes) -> Pattern:
    """The exact bytes of ``value``."""
    data = value.encode("utf-8") if isinstance(value, str) else value
    return seq(*(Pattern("bytes", 1 << byte) for byte in data))


def seq(*parts: Pattern) -> Pattern:
    """The parts one after the other."""
    return parts[0] if len(parts) == 1 else Pattern("seq", parts=tuple(parts))


def alt(*options: Pattern) -> Pattern:
    """Any one of the options."""
    return options[0] if len(options) == 1 else Pattern("alt", parts=tuple(options))


def star(body: Pattern) -> Pattern:
    """Zero or more repetitions."""
    return Pattern("star", parts=(body,))


def plus(body: Pattern) -> Pattern:
    """One or more repetitions."""
    return seq(body, star(body))


def opt(body: Pattern) -> Pattern:
    """Zero or one."""
    return alt(body, EMPTY)


def repeat(body: Pattern, count: int) -> Pattern:
    """Exactly ``count`` repetitions (``count >= 1``)."""
    return seq(*([body] * count))


EMPTY = Pattern("seq", parts=())


@dataclass(frozen=True)
class Dfa:
    """A deterministic lexer automaton.

    ``transitions[state, byte]`` is the next state or :data:`DEAD`; ``accept[state]`` the
    label index of the lexeme ending there, or -1; ``labels`` names them."""

    transitions: np.ndarray
    accept: np.ndarray
    labels: tuple[str, ...]
    start: int = 0

    @property
    def size(self) -> int:
        """Number of states."""
        return len(self.accept)

    def completions(self) -> list[frozenset[int]]:
        """For every state, the labels of the accepting states reachable from it (itself
        included): what a lexeme in progress there may still turn out to be."""
        reach: list[set[int]] = [set() for _ in range(self.size)]
        predecessors: list[set[int]] = [set() for _ in range(self.size)]
        for state in range(self.size):
            for target in set(self.transitions[state].tolist()):
                if target != DEAD:
                    predecessors[target].add(state)
        for state in range(self.size):
            label = int(self.accept[state])
            if label < 0:
                continue
            agenda = [state]
            seen = {state}
            while agenda:
                current = agenda.pop()
                reach[current].add(label)
                for before in predecessors[current]:
                    if before not in seen:
                        seen.add(before)
                        agenda.append(before)
        return [frozenset(labels) for labels in reach]


class _Nfa:
    def __init__(self) -> None:
        self.edges: list[list[tuple[int, int]]] = []
        self.epsilon: list[list[int]] = []

    def state(self) -> int:
        self.edges.append([])
        self.epsilon.append([])
        return len(self.edges) - 1

    def build(self, pattern: Pattern, start: int) -> int:
        """Add ``pattern`` from ``start``; return its end state."""
        kind = pattern.kind
        if kind == "bytes":
            end = self.state()
            self.edges[start].append((pattern.mask, end))
            return end
        if kind == "seq":
            for part in pattern.parts:
                start = self.build(part, start)
            return start
        if kind == "alt":
            end = self.state()
            for option in pattern.parts:
                entry = self.state()
                self.epsilon[start].append(entry)
                self.epsilon[self.build(option, entry)].append(end)
            return end
        if kind == "star":
            loop = self.state()
            self.epsilon[start].append(loop)
            entry = self.state()
            self.epsilon[loop].append(entry)
            self.epsilon[self.build(pattern.parts[0], entry)].append(loop)
            return loop
        raise ValueError(f"unknown pattern kind {kind!r}")


def _bits(mask: int) -> list[int]:
    """The byte values set in ``mask``."""
    values = []
    while mask:
        low = mask & -mask
        values.append(low.bit_length() - 1)
        mask ^= low
    return values


def build_dfa(rules: Sequence[tuple[str, Pattern]]) -> Dfa:
    """One minimal DFA for all ``(label, pattern)`` rules; where several patterns end in the
    same state the earliest rule wins (list keywords before identifiers)."""
    nfa = _Nfa()
    start = nfa.state()
    accepting: dict[int, int] = {}
    labels: list[str] = []
    label_ids: dict[str, int] = {}
    for priority, (label, pattern) in enumerate(rules):
        entry = nfa.state()
        nfa.epsilon[start].append(entry)
        accepting[nfa.build(pattern, entry)] = priority
        if label not in label_ids:
            label_ids[label] = len(labels)
            labels.append(label)
    rule_label = [label_ids[label] for label, _ in rules]
    edge_bytes = [[(_bits(mask), target) for mask, target in edges] for edges in nfa.edges]

    closures: dict[int, frozenset[int]] = {}

    def closure_of(state: int) -> frozenset[int]:
        found = closures.get(state)
        if found is None:
            result = {state}
            agenda = [state]
            while agenda:
                for target in nfa.epsilon[agenda.pop()]:
                    if target not in result:
                        result.add(target)
                        agenda.append(target)
            found = closures[state] = frozenset(result)
        return found

    initial = closure_of(start)
    ids = {initial: 0}
    order = [initial]
    rows: list[list[int]] = []
    accept: list[int] = []
    index = 0
    while index < len(order):
        current = order[index]
        priorities = [accepting[s] for s in current if s in accepting]
        accept.append(rule_label[min(priorities)] if priorities else -1)
        by_byte: list[set[int]] = [set() for _ in range(256)]
        for state in current:
            for values, target in edge_bytes[state]:
                for byte in values:
                    by_byte[byte].add(target)
        row = [DEAD] * 256
        memo: dict[frozenset[int], int] = {}
        for byte, targets in enumerate(by_byte):
            if not targets:
                continue
            key = frozenset(targets)
            target_id = memo.get(key)
            if target_id is None:
                following = frozenset().union(*(closure_of(t) for t in targets))
                target_id = ids.get(following)
                if target_id is None:
                    target_id = ids[following] = len(order)
                    order.append(following)
                memo[key] = target_id
            row[byte] = target_id
        rows.append(row)
        index += 1
    return _minimise(np.array(rows, dtype=np.int32), np.array(accept, dtype=np.int32), labels)


def _minimise(transitions: np.ndarray, accept: np.ndarray, labels: list[str]) -> Dfa:
    """Merge equivalent states (Moore's partition refinement); the start state stays 0."""
    classes = np.unique(accept, return_inverse=True)[1].astype(np.int32).reshape(-1)
    count = len(np.unique(classes))
    while True:
        successor = np.where(transitions >= 0, classes[np.maximum(transitions, 0)], -1)
        signature = np.ascontiguousarray(
            np.concatenate([classes[:, None], successor], axis=1), dtype=np.int32
        )
        ids: dict[bytes, int] = {}
        refined = np.array(
            [ids.setdefault(row.tobytes(), len(ids)) for row in signature], dtype=np.int32
        )
        if len(ids) == count:
            break
        classes, count = refined, len(ids)
    # renumber so that the start state is 0 and the order follows first appearance
    order: dict[int, int] = {}
    for value in classes.tolist():
        order.setdefault(value, len(order))
    mapping = np.array([order[value] for value in classes.tolist()], dtype=np.int64)
    count = len(order)
    merged = np.full((count, 256), DEAD, dtype=np.int32)
    merged_accept = np.full(count, -1, dtype=np.int32)
    for state in range(len(accept)):
        target = mapping[state]
        row = transitions[state]
        merged[target] = np.where(row >= 0, mapping[np.maximum(row, 0)], DEAD)
        merged_accept[target] = accept[state]
    return Dfa(merged, merged_accept, tuple(labels))
