"""LALR(1) tables for a token-level grammar, with every conflict kept.

LR(0) states, then lookaheads by DeRemer and Pennello's relations (reads, includes,
lookback). Where a state has several actions for a token, all of them are kept: the
parser (:mod:`cad.grammar.syntax.glr`) follows each one, so the tables recognise exactly
the grammar's language whether it is LALR(1) or not.
"""

from __future__ import annotations

from dataclasses import dataclass

from cad.grammar.syntax.grammar_text import Cfg

ACCEPT = 1 << 30
"""Action: the input is a sentence (on the end-of-input token)."""
END = "$end"
"""The end-of-input token appended after the grammar's own last token."""


@dataclass(frozen=True)
class Tables:
    """``actions[state][token]``: a tuple of actions (``>= 0`` shift to that state,
    ``< 0`` reduce production ``-(a + 1)``, :data:`ACCEPT`); ``gotos[state][nonterminal]``;
    productions as ``(lhs, length)``; token and nonterminal names by index."""

    actions: tuple[dict[int, tuple[int, ...]], ...]
    gotos: tuple[dict[int, int], ...]
    production_lhs: tuple[int, ...]
    production_length: tuple[int, ...]
    tokens: tuple[str, ...]
    nonterminals: tuple[str, ...]
    conflicts: int

    def token_id(self, name: str) -> int:
        """The index of token ``name``."""
        return self.tokens.index(name)


def build_tables(grammar: Cfg) -> Tables:
    """LALR(1) tables of ``grammar`` (augmented with a start production and ``$end``)."""
    return _Builder(grammar).build()


class _Builder:
    def __init__(self, grammar: Cfg) -> None:
        self.nonterminals = ["$start", *grammar.nonterminals]
        self.tokens = [*grammar.terminals, END]
        nt_index = {name: i for i, name in enumerate(self.nonterminals)}
        t_index = {name: i for i, name in enumerate(self.tokens)}
        count = len(self.nonterminals)
        # symbols: nonterminal i -> i, token j -> count + j
        self.count = count

        def symbol(name: str) -> int:
            return nt_index[name] if name in nt_index else count + t_index[name]

        self.productions: list[tuple[int, tuple[int, ...]]] = [(0, (nt_index[grammar.start],))]
        self.productions += [
            (nt_index[lhs], tuple(symbol(s) for s in rhs)) for lhs, rhs in grammar.productions
        ]
        self.by_lhs: list[list[int]] = [[] for _ in range(count)]
        for index, (lhs, _) in enumerate(self.productions):
            self.by_lhs[lhs].append(index)
        self.nullable = self._nullable()

    def _nullable(self) -> list[bool]:
        result = [False] * self.count
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.productions:
                if not result[lhs] and all(s < self.count and result[s] for s in rhs):
                    result[lhs] = changed = True
        return result

    # -- LR(0) ------------------------------------------------------------------------------

    def _closure(self, kernel: frozenset[tuple[int, int]]) -> list[tuple[int, int]]:
        items = list(kernel)
        seen = set(kernel)
        added_nonterminals: set[int] = set()
        index = 0
        while index < len(items):
            production, dot = items[index]
            index += 1
            rhs = self.productions[production][1]
            if dot < len(rhs) and rhs[dot] < self.count and rhs[dot] not in added_nonterminals:
                added_nonterminals.add(rhs[dot])
                for child in self.by_lhs[rhs[dot]]:
                    item = (child, 0)
                    if item not in seen:
                        seen.add(item)
                        items.append(item)
        return items

    def _lr0(self) -> None:
        start = frozenset({(0, 0)})
        self.kernels = [start]
        self.state_ids = {start: 0}
        self.transitions: list[dict[int, int]] = []
        self.closures: list[list[tuple[int, int]]] = []
        index = 0
        while index < len(self.kernels):
            items = self._closure(self.kernels[index])
            self.closures.append(items)
            moves: dict[int, set[tuple[int, int]]] = {}
            for production, dot in items:
                rhs = self.productions[production][1]
                if dot < len(rhs):
                    moves.setdefault(rhs[dot], set()).add((production, dot + 1))
            row: dict[int, int] = {}
            for symbol, kernel_items in moves.items():
                kernel = frozenset(kernel_items)
                target = self.state_ids.get(kernel)
                if target is None:
                    target = self.state_ids[kernel] = len(self.kernels)
                    self.kernels.append(kernel)
                row[symbol] = target
            self.transitions.append(row)
            index += 1

    # -- lookaheads (DeRemer & Pennello) ----------------------------------------------------

    def _lookaheads(self) -> dict[tuple[int, int], int]:
        """LA(state, production) as token bitsets, for every completed item."""
        count = self.count
        end_bit = 1 << (len(self.tokens) - 1)
        nt_transitions = [
            (state, symbol)
            for state, row in enumerate(self.transitions)
            for symbol in row
            if symbol < count
        ]
        index_of = {transition: i for i, transition in enumerate(nt_transitions)}
        direct = []
        reads: list[list[int]] = []
        for state, symbol in nt_transitions:
            target = self.transitions[state][symbol]
            bits = 0
            successors = []
            for following in self.transitions[target]:
                if following >= count:
                    bits |= 1 << (following - count)
                elif self.nullable[following]:
                    successors.append(index_of[(target, following)])
            if state == 0 and symbol == 1:
                bits |= end_bit
            direct.append(bits)
            reads.append(successors)
        read_sets = _digraph(len(nt_transitions), reads, direct)

        includes: list[list[int]] = [[] for _ in nt_transitions]
        lookback: dict[tuple[int, int], list[int]] = {}
        for i, (state, symbol) in enumerate(nt_transitions):
            for production in self.by_lhs[symbol]:
                rhs = self.productions[production][1]
                current = state
                for position, part in enumerate(rhs):
                    if part < count and all(
                        s < count and self.nullable[s] for s in rhs[position + 1 :]
                    ):
                        includes[index_of[(current, part)]].append(i)
                    current = self.transitions[current][part]
                lookback.setdefault((current, production), []).append(i)
        follow_sets = _digraph(len(nt_transitions), includes, read_sets)
        result: dict[tuple[int, int], int] = {}
        for key, sources in lookback.items():
            bits = 0
            for source in sources:
                bits |= follow_sets[source]
            result[key] = bits
        return result

    def build(self) -> Tables:
        self._lr0()
        lookaheads = self._lookaheads()
        count = self.count
        actions: list[dict[int, tuple[int, ...]]] = []
        gotos: list[dict[int, int]] = []
        conflicts = 0
        end = len(self.tokens) - 1
        for state, items in enumerate(self.closures):
            row: dict[int, list[int]] = {}
            for symbol, target in self.transitions[state].items():
                if symbol >= count:
                    row.setdefault(symbol - count, []).append(target)
            for production, dot in items:
                if dot != len(self.productions[production][1]):
                    continue
                if production == 0:
                    row.setdefault(end, []).append(ACCEPT)
                    continue
                bits = lookaheads.get((state, production), 0)
                token = 0
                while bits:
                    if bits & 1:
                        row.setdefault(token, []).append(-(production - 1) - 1)
                    bits >>= 1
                    token += 1
            frozen = {token: tuple(dict.fromkeys(acts)) for token, acts in row.items()}
            conflicts += sum(1 for acts in frozen.values() if len(acts) > 1)
            actions.append(frozen)
            gotos.append(
                {
                    symbol - 1: target
                    for symbol, target in self.transitions[state].items()
                    if 0 < symbol < count
                }
            )
        body = self.productions[1:]
        return Tables(
            actions=tuple(actions),
            gotos=tuple(gotos),
            production_lhs=tuple(lhs - 1 for lhs, _ in body),
            production_length=tuple(len(rhs) for _, rhs in body),
            tokens=tuple(self.tokens),
            nonterminals=tuple(self.nonterminals[1:]),
            conflicts=conflicts,
        )


def _digraph(size: int, relation: list[list[int]], initial: list[int]) -> list[int]:
    """The least sets F with F(x) ⊇ initial(x) and F(x) ⊇ F(y) for x R y; every strongly
    connected component shares one set (DeRemer and Pennello's TRAVERSE, iteratively)."""
    result = list(initial)
    depth = [0] * size
    stack: list[int] = []
    done = size + 2
    for root in range(size):
        if depth[root]:
            continue
        stack.append(root)
        depth[root] = len(stack)
        frames: list[list[int]] = [[root, len(stack), 0]]
        while frames:
            frame = frames[-1]
            node, mark, edge = frame
            if edge < len(relation[node]):
                frame[2] += 1
                target = relation[node][edge]
                if depth[target] == 0:
                    stack.append(target)
                    depth[target] = len(stack)
                    frames.append([target, len(stack), 0])
                    continue
                depth[node] = min(depth[node], depth[target])
                result[node] |= result[target]
                continue
            frames.pop()
            if depth[node] == mark:
                while True:
                    top = stack.pop()
                    depth[top] = done
                    result[top] = result[node]
                    if top == node:
                        break
            if frames:
                parent = frames[-1][0]
                depth[parent] = min(depth[parent], depth[node])
                result[parent] |= result[node]
    return result


def describe_conflicts(tables: Tables, limit: int = 20) -> list[str]:
    """Readable lines for the conflicting actions (for grammar authors)."""
    lines = []
    for state, row in enumerate(tables.actions):
        for token, acts in row.items():
            if len(acts) > 1:
                names = [_describe(tables, act) for act in acts]
                lines.append(f"state {state} on {tables.tokens[token]}: {' / '.join(names)}")
                if len(lines) >= limit:
                    return lines
    return lines


def _describe(tables: Tables, action: int) -> str:
    if action == ACCEPT:
        return "accept"
    if action >= 0:
        return f"shift {action}"
    production = -action - 1
    return f"reduce {tables.nonterminals[tables.production_lhs[production]]}/{tables.production_length[production]}"
