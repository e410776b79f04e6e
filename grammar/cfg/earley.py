"""Byte-level Earley recogniser with dependency-based pruning and interned states.

A state is the tuple of Earley sets that can still matter plus an accepting flag. Items are
``(core, origin)`` with ``origin`` an index into that tuple. After the scan and complete
phases of each byte, and before the next prediction, the state is compacted (ZapFormat's
reachability pruning): an item of an older set is kept only if a kept item of a later set
will complete into it (it has that later item's left-hand side after its dot at the origin
the later item points to). Completed items of the newest set have done their work and go
too. Sets left empty are removed and origins renumbered, so equal parse situations at
different input positions become equal states: the state cache key.

Nullable symbols use the Aycock-Horspool rule: predicting a nullable nonterminal also
advances over it, so no completion ever has to look into the set being built.

``local(state)`` keeps only the newest ``window`` sets; origins into the cut-off part become
negative, and completing such an item answers DEPENDENT: the context-independent view the
token-mask cache is keyed on."""

from __future__ import annotations

from dataclasses import dataclass

from cad.grammar.cfg.automaton import DEAD, DEPENDENT
from cad.grammar.cfg.grammar_ir import Grammar, mask_bytes, terminal_index
from cad.grammar.cfg.item_cores import COMPLETE, ItemCores

Item = tuple[int, int]


@dataclass(frozen=True)
class EarleyState:
    """Live Earley sets (oldest first) and whether the input so far is a sentence."""

    sets: tuple[frozenset[Item], ...]
    accepting: bool


class EarleyAutomaton:
    """Earley parsing as a lazily interned automaton (see ``automaton.ByteAutomaton``)."""

    def __init__(self, grammar: Grammar, *, prune: bool = True, window: int = 3) -> None:
        self.cores = ItemCores.build(grammar)
        self.prune = prune
        self.window = window
        self.terminal_bytes = [mask_bytes(mask) for mask in grammar.terminals]
        self.states: list[EarleyState] = []
        self.ids: dict[EarleyState, int] = {}
        self._scan_index: dict[int, dict[int, list[Item]]] = {}
        self._locals: dict[int, int] = {}
        self._initial = self._intern(self._closure((), [(self.cores.start_core, 0)]))

    def initial(self) -> int:
        """The state before any byte."""
        return self._initial

    def size(self) -> int:
        """Number of interned states."""
        return len(self.states)

    def is_accepting(self, config: int) -> bool:
        """Whether the bytes so far form a sentence."""
        return self.states[config].accepting

    def live_items(self, config: int) -> int:
        """Items held by a state, over all its sets (what pruning shrinks)."""
        return sum(len(s) for s in self.states[config].sets)

    def step(self, config: int, byte: int) -> int:
        """Scan ``byte``, complete, prune: the next state id, DEAD or DEPENDENT."""
        kernel = self._scan(config).get(byte)
        if not kernel:
            return DEAD
        state = self._closure(self.states[config].sets, kernel)
        return DEPENDENT if state is None else self._intern(state)

    def local(self, config: int) -> int:
        """The state with only its newest ``window`` sets kept (see module docstring)."""
        if config in self._locals:
            return self._locals[config]
        sets = self.states[config].sets
        if len(sets) <= self.window:
            result = config
        else:
            cut = len(sets) - self.window
            kept = tuple(frozenset((core, origin - cut) for core, origin in s) for s in sets[cut:])
            result = self._intern(EarleyState(kept, False))
        self._locals[config] = result
        return result

    def _intern(self, state: EarleyState) -> int:
        found = self.ids.get(state)
        if found is None:
            found = self.ids[state] = len(self.states)
            self.states.append(state)
        return found

    def _scan(self, config: int) -> dict[int, list[Item]]:
        index = self._scan_index.get(config)
        if index is None:
            index = {}
            next_symbol = self.cores.next_symbol
            for core, origin in self.states[config].sets[-1]:
                symbol = next_symbol[core]
                if symbol < 0:
                    for byte in self.terminal_bytes[terminal_index(symbol)]:
                        index.setdefault(byte, []).append((core + 1, origin))
            self._scan_index[config] = index
        return index

    def _closure(self, sets: tuple[frozenset[Item], ...], kernel: list[Item]) -> EarleyState | None:
        cores = self.cores
        next_symbol, lhs, first_cores, nullable = (
            cores.next_symbol, cores.lhs, cores.first_cores, cores.nullable,
        )  # fmt: skip
        here = len(sets)
        items: set[Item] = set(kernel)
        agenda = list(items)
        waiting: dict[int, dict[int, list[Item]]] = {}
        accepting = False
        while agenda:
            core, origin = agenda.pop()
            symbol = next_symbol[core]
            if symbol == COMPLETE:
                if core == cores.accept_core:
                    accepting = True
                if origin == here:
                    continue
                if origin < 0:
                    return None
                head = lhs[core]
                table = waiting.get(origin)
                if table is None:
                    table = waiting[origin] = _waiting_table(sets[origin], next_symbol)
                for parent_core, parent_origin in table.get(head, ()):
                    advanced = (parent_core + 1, parent_origin)
                    if advanced not in items:
                        items.add(advanced)
                        agenda.append(advanced)
            elif symbol >= 0:
                for predicted_core in first_cores[symbol]:
                    predicted = (predicted_core, here)
                    if predicted not in items:
                        items.add(predicted)
                        agenda.append(predicted)
                if nullable[symbol]:
                    advanced = (core + 1, origin)
                    if advanced not in items:
                        items.add(advanced)
                        agenda.append(advanced)
        if not self.prune:
            return EarleyState((*sets, frozenset(items)), accepting)
        return EarleyState(self._compact(sets, items), accepting)

    def _compact(
        self, sets: tuple[frozenset[Item], ...], newest: set[Item]
    ) -> tuple[frozenset[Item], ...]:
        next_symbol, lhs = self.cores.next_symbol, self.cores.lhs
        here = len(sets)
        kept_newest = [item for item in newest if next_symbol[item[0]] != COMPLETE]
        demands: dict[int, set[int]] = {}
        for core, origin in kept_newest:
            if 0 <= origin < here:
                demands.setdefault(origin, set()).add(lhs[core])
        kept_sets: dict[int, list[Item]] = {}
        for position in range(here - 1, -1, -1):
            wanted = demands.get(position)
            if not wanted:
                continue
            table = _waiting_table(sets[position], next_symbol)
            agenda = list(wanted)
            kept: list[Item] = []
            while agenda:
                for item in table.get(agenda.pop(), ()):
                    kept.append(item)
                    head, origin = lhs[item[0]], item[1]
                    if origin == position:
                        if head not in wanted:
                            wanted.add(head)
                            agenda.append(head)
                    elif origin >= 0:
                        demands.setdefault(origin, set()).add(head)
            kept_sets[position] = kept
        order = sorted(kept_sets)
        renumber = {old: new for new, old in enumerate(order)}
        renumber[here] = len(order)

        def moved(item: Item) -> Item:
            return (item[0], renumber[item[1]] if item[1] >= 0 else item[1])

        result = [frozenset(moved(item) for item in kept_sets[p]) for p in order]
        result.append(frozenset(moved(item) for item in kept_newest))
        return tuple(result)


def _waiting_table(items: frozenset[Item], next_symbol: tuple[int, ...]) -> dict[int, list[Item]]:
    table: dict[int, list[Item]] = {}
    for item in items:
        symbol = next_symbol[item[0]]
        if 0 <= symbol != COMPLETE:
            table.setdefault(symbol, []).append(item)
    return table
