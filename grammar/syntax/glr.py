"""A generalised LR parser over LALR(1) tables with conflicts, on interned stacks.

A stack is a chain of interned ``(state, parent)`` nodes, so a stack is one int and equal
stacks are equal ints. A parser configuration is the set of stacks alive after the input
so far (usually one; a few while an ambiguity such as an assignment target against an
expression is open), interned as one int too. ``step(config, token)`` follows every action
of every stack and is memoised, so a configuration met again (rollback, a second mask over
the same state, a copy tried twice) costs one lookup.

Reductions are replayed from the tables; a chain of reductions that ends in the same
stack twice is followed once (grammars with empty rules cannot loop).
"""

from __future__ import annotations

from cad.grammar.syntax.lalr import ACCEPT, END, Tables

DEAD = -1
"""No stack survives: the input is not a prefix of any sentence."""
_ACCEPTED = -2


class GlrParser:
    """Interned stacks and configurations of one grammar's tables (shared by all matchers
    of that grammar)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.end = tables.token_id(END)
        self.node_state: list[int] = []
        self.node_parent: list[int] = []
        self._node_ids: dict[tuple[int, int], int] = {}
        self.configs: list[tuple[int, ...]] = []
        self._config_ids: dict[tuple[int, ...], int] = {}
        self._steps: dict[tuple[int, int], int] = {}
        self._any_steps: dict[tuple[int, tuple[int, ...]], int] = {}
        self._viable: dict[int, frozenset[int]] = {}
        self._edges: dict[tuple[int, int], object] = {}
        self.initial = self._config((self._node(0, -1),))

    def entries(self) -> int:
        """How much is held: interned stacks and configurations, memo rows and edges."""
        return (
            len(self.node_state)
            + len(self.configs)
            + len(self._steps)
            + len(self._any_steps)
            + len(self._viable)
            + len(self._edges)
        )

    def _node(self, state: int, parent: int) -> int:
        key = (state, parent)
        found = self._node_ids.get(key)
        if found is None:
            found = self._node_ids[key] = len(self.node_state)
            self.node_state.append(state)
            self.node_parent.append(parent)
        return found

    def _config(self, stacks: tuple[int, ...]) -> int:
        found = self._config_ids.get(stacks)
        if found is None:
            found = self._config_ids[stacks] = len(self.configs)
            self.configs.append(stacks)
        return found

    def step(self, config: int, token: int) -> int:
        """The configuration after ``token``, or :data:`DEAD`."""
        key = (config, token)
        found = self._steps.get(key)
        if found is None:
            survivors: set[int] = set()
            for stack in self.configs[config]:
                self._advance(stack, token, survivors)
            survivors.discard(_ACCEPTED)
            found = self._config(tuple(sorted(survivors))) if survivors else DEAD
            self._steps[key] = found
        return found

    def step_any(self, config: int, tokens: tuple[int, ...]) -> int:
        """The configuration after reading any one of ``tokens`` (a soft keyword is both
        itself and a name): the union of the readings that survive."""
        if len(tokens) == 1:
            return self.step(config, tokens[0])
        key = (config, tokens)
        found = self._any_steps.get(key)
        if found is None:
            stacks: set[int] = set()
            for token in tokens:
                after = self.step(config, token)
                if after != DEAD:
                    stacks.update(self.configs[after])
            found = self._config(tuple(sorted(stacks))) if stacks else DEAD
            self._any_steps[key] = found
        return found

    def accepts_end(self, config: int) -> bool:
        """Whether the input so far is a complete sentence."""
        for stack in self.configs[config]:
            out: set[int] = set()
            self._advance(stack, self.end, out)
            if _ACCEPTED in out:
                return True
        return False

    def viable_tokens(self, config: int) -> frozenset[int]:
        """Every token that some stack can read next (a shift, or reductions that end in
        one), ``$end`` excepted."""
        found = self._viable.get(config)
        if found is None:
            result: set[int] = set()
            actions = self.tables.actions
            for stack in self.configs[config]:
                for token, acts in actions[self.node_state[stack]].items():
                    if token in result or token == self.end:
                        continue
                    if any(0 <= act < ACCEPT for act in acts) or self._edge(stack, token):
                        result.add(token)
            found = self._viable[config] = frozenset(result)
        return found

    def _advance(self, stack: int, token: int, out: set[int]) -> None:
        """Add to ``out`` every stack that results from reading ``token`` on ``stack``."""
        parents = self.node_parent
        for pop, push in self._edge(stack, token):
            if pop < 0:
                out.add(_ACCEPTED)
                continue
            base = stack
            for _ in range(pop):
                base = parents[base]
            for state in push:
                base = self._node(state, base)
            out.add(base)

    def _edge(self, stack: int, token: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """The outcomes of ``token`` on ``stack`` as (entries popped, states pushed), from the
        cache of edges keyed on the top state and the states below that the reductions
        looked at (Pre³'s prefix-conditioned edges, here with several outcomes)."""
        states, parents = self.node_state, self.node_parent
        tree = self._edges.get((states[stack], token))
        node = stack
        while isinstance(tree, dict):
            node = parents[node]
            tree = tree.get(states[node] if node >= 0 else -1)
        if tree is None:
            return self._materialise(stack, token)
        return tree

    def _materialise(self, stack: int, token: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
        tables = self.tables
        actions, gotos = tables.actions, tables.gotos
        lengths, lhs = tables.production_length, tables.production_lhs
        states, parents = self.node_state, self.node_parent
        below: list[int] = [states[stack]]
        cursor = stack

        def state_at(depth: int) -> int:
            nonlocal cursor
            while len(below) <= depth:
                cursor = parents[cursor] if cursor >= 0 else cursor
                below.append(states[cursor] if cursor >= 0 else -1)
            return below[depth]

        deepest = 0
        outcomes: list[tuple[int, tuple[int, ...]]] = []
        agenda: list[tuple[int, tuple[int, ...]]] = [(0, ())]
        seen = {(0, ())}
        while agenda:
            popped, pushed = agenda.pop()
            top = pushed[-1] if pushed else state_at(popped)
            for act in actions[top].get(token, ()):
                if act == ACCEPT:
                    outcomes.append((-1, ()))
                elif act >= 0:
                    outcomes.append((popped, (*pushed, act)))
                else:
                    production = -act - 1
                    length = lengths[production]
                    if length <= len(pushed):
                        new_pushed = pushed[: len(pushed) - length]
                        new_popped = popped
                    else:
                        new_popped = popped + length - len(pushed)
                        new_pushed = ()
                    exposed = new_pushed[-1] if new_pushed else state_at(new_popped)
                    if not new_pushed:
                        deepest = max(deepest, new_popped)
                    virtual = (new_popped, (*new_pushed, gotos[exposed][lhs[production]]))
                    if virtual not in seen:
                        seen.add(virtual)
                        agenda.append(virtual)
        result = tuple(dict.fromkeys(outcomes))
        key = (states[stack], token)
        if deepest == 0:
            self._edges[key] = result
            return result
        tree = self._edges.setdefault(key, {})
        for depth in range(1, deepest):
            tree = tree.setdefault(state_at(depth), {})
        tree[state_at(deepest)] = result
        return result
