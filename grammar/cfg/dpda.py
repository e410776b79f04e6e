"""Deterministic pushdown automaton over bytes from LR(1) tables, Pre³-style.

An LR(1) parser answers a byte with a chain of reductions ending in a shift. Pre³ folds
each such chain into one *prefix-conditioned edge*: (top state, byte atom, the states just
below the top that the chain inspects) -> (how many stack entries to pop, which states to
push). Here the edges of one (top state, atom) form a small decision tree keyed on the
states below the top, materialised on first use and then shared by every stack. A chain
that walks down a cycle (a right-recursive rule closing many levels at once) simply yields
an edge with a longer condition; this replaces the paper's rewrite of cycle back-edges
(which pops a repeated cycle from the stack) with lazy construction that keeps every
condition exact.

Stacks are interned as ``(state, parent node)`` pairs, so a configuration is one int and
equal stacks are equal ids. ``local(node)`` is the top state over an UNKNOWN bottom: an
edge that would look below it answers DEPENDENT; that is the context-independent view the
token-mask cache keys on (the LR state), like XGrammar's per-state adaptive masks."""

from __future__ import annotations

from dataclasses import dataclass

from cad.grammar.cfg.automaton import DEAD, DEPENDENT
from cad.grammar.cfg.lr1 import ACCEPT, LrTables

_BOTTOM = -1
_UNKNOWN_BELOW = -2


@dataclass(frozen=True)
class Edge:
    """Pop ``pop`` entries below the top-of-stack-inclusive prefix, then push ``push``."""

    pop: int
    push: tuple[int, ...]


_ACCEPT_EDGE = Edge(0, ())
EdgeTree = Edge | int | dict[int, "EdgeTree"]


class DpdaAutomaton:
    """An LR(1)-derived DPDA as a lazily interned automaton (``automaton.ByteAutomaton``)."""

    def __init__(self, tables: LrTables) -> None:
        self.tables = tables
        self.node_state: list[int] = []
        self.node_parent: list[int] = []
        self.node_ids: dict[tuple[int, int], int] = {}
        self.edges: dict[tuple[int, int], EdgeTree] = {}
        self._accepting: dict[int, bool] = {}
        self._initial = self._node(0, _BOTTOM)

    def initial(self) -> int:
        """The stack holding only the start state."""
        return self._initial

    def size(self) -> int:
        """Number of interned stack nodes."""
        return len(self.node_state)

    def edge_count(self) -> int:
        """Prefix-conditioned edges materialised so far (leaves of all decision trees)."""
        return sum(_leaves(tree) for tree in self.edges.values())

    def depth(self, node: int) -> int:
        """Stack height of a node."""
        height = 0
        while node >= 0:
            height += 1
            node = self.node_parent[node]
        return height

    def step(self, config: int, byte: int) -> int:
        """Follow the edge for ``byte``: the next stack node, DEAD or DEPENDENT."""
        return self._follow(config, self.tables.atom_of_byte[byte])

    def is_accepting(self, config: int) -> bool:
        """Whether end of input here reduces all the way to acceptance."""
        found = self._accepting.get(config)
        if found is None:
            found = self._accepting[config] = (
                self._edge(config, self.tables.end_atom) is _ACCEPT_EDGE
            )
        return found

    def local(self, config: int) -> int:
        """The top state alone, over an unknown rest of the stack."""
        return self._node(self.node_state[config], _UNKNOWN_BELOW)

    def _node(self, state: int, parent: int) -> int:
        key = (state, parent)
        found = self.node_ids.get(key)
        if found is None:
            found = self.node_ids[key] = len(self.node_state)
            self.node_state.append(state)
            self.node_parent.append(parent)
        return found

    def _follow(self, node: int, atom: int) -> int:
        edge = self._edge(node, atom)
        if not isinstance(edge, Edge):
            return edge
        if edge is _ACCEPT_EDGE:
            return DEAD
        for _ in range(edge.pop):
            node = self.node_parent[node]
        for state in edge.push:
            node = self._node(state, node)
        return node

    def _edge(self, node: int, atom: int) -> Edge | int:
        tree = self.edges.get((self.node_state[node], atom))
        below = node
        while isinstance(tree, dict):
            below = self.node_parent[below] if below >= 0 else below
            tree = tree.get(self.node_state[below] if below >= 0 else below)
        if tree is None:
            return self._materialise(node, atom)
        return tree

    def _materialise(self, node: int, atom: int) -> Edge | int:
        """Run the LR reduce chain for ``atom`` on the actual stack and record the edge
        under the stack prefix it inspected."""
        tables = self.tables
        stack_below: list[int] = []
        cursor = node

        def state_at(depth: int) -> int:
            nonlocal cursor
            while len(stack_below) < depth:
                cursor = self.node_parent[cursor] if cursor >= 0 else cursor
                stack_below.append(self.node_state[cursor] if cursor >= 0 else cursor)
            return stack_below[depth - 1]

        pushed: list[int] = []
        popped = 0
        inspected = 0
        current = self.node_state[node]
        result: Edge | int
        while True:
            action = tables.actions[current].get(atom)
            if action is None:
                result = DEAD
                break
            if action == ACCEPT:
                result = _ACCEPT_EDGE
                break
            if action >= 0:
                pushed.append(action)
                result = Edge(popped, tuple(pushed))
                break
            production = -action - 1
            length = tables.production_length[production]
            taken = min(length, len(pushed))
            del pushed[len(pushed) - taken :]
            popped += length - taken
            if pushed:
                exposed = pushed[-1]
            elif popped == 0:
                exposed = self.node_state[node]
            else:
                inspected = max(inspected, popped)
                exposed = state_at(popped)
                if exposed == _UNKNOWN_BELOW:
                    result = DEPENDENT
                    break
            current = tables.gotos[exposed][tables.production_lhs[production]]
            pushed.append(current)
        self._record(node, atom, [state_at(d) for d in range(1, inspected + 1)], result)
        return result

    def _record(self, node: int, atom: int, condition: list[int], result: Edge | int) -> None:
        key = (self.node_state[node], atom)
        if not condition:
            self.edges[key] = result
            return
        tree = self.edges.setdefault(key, {})
        assert isinstance(tree, dict)
        for state in condition[:-1]:
            subtree = tree.setdefault(state, {})
            assert isinstance(subtree, dict)
            tree = subtree
        tree[condition[-1]] = result


def _leaves(tree: EdgeTree) -> int:
    if isinstance(tree, dict):
        return sum(_leaves(sub) for sub in tree.values())
    return 1
