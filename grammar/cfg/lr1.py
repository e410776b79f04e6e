"""LR(1) tables over byte-level terminals: LALR(1) where the grammar is LALR(1), canonical
LR(1) otherwise.

Terminals are byte classes that may overlap, so the bytes are first split into *atoms*:
the coarsest partition of 0..255 in which every terminal class is a union of atoms (edge
aggregation in Pre³'s terms: all bytes of an atom behave the same everywhere). Lookahead
sets are bitmasks over atoms plus one end-of-input bit. LALR(1) states are the LR(0)
automaton's, each with the union of the lookaheads canonical LR(1) gives its core: a
schema's grammar has about a third as many of them, so its tables build faster and its
decode meets fewer states for the first time. Merging lookaheads can create a conflict
the canonical automaton does not have; then the canonical tables are built (states
identified by their kernel items with their lookaheads). A conflict in those too raises
``NotLr1`` and the caller falls back to Earley."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from cad.grammar.cfg.grammar_ir import Grammar, mask_bytes, terminal_index
from cad.grammar.cfg.item_cores import COMPLETE, ItemCores

ACCEPT = 1 << 30
"""Action value: the input is a complete sentence (end-of-input atom only)."""


class NotLr1(Exception):
    """The grammar has an LR(1) conflict, or its automaton would be too large."""


@dataclass(frozen=True)
class LrTables:
    """ACTION and GOTO of an LR(1) automaton (LALR(1) or canonical) over byte atoms.

    ``actions[state][atom]``: ``>= 0`` shift to that state, ``< 0`` reduce production
    ``-(value + 1)``, ``ACCEPT``; a missing atom is an error. ``end_atom`` is end-of-input."""

    atom_of_byte: tuple[int, ...]
    end_atom: int
    actions: tuple[dict[int, int], ...]
    gotos: tuple[dict[int, int], ...]
    production_lhs: tuple[int, ...]
    production_length: tuple[int, ...]


def byte_atoms(terminals: list[int]) -> tuple[list[int], list[int]]:
    """Split bytes into atoms: ``(atom_of_byte, atom mask of each terminal)``."""
    signature_atom: dict[int, int] = {}
    atom_of_byte = []
    for byte in range(256):
        signature = sum(1 << t for t, mask in enumerate(terminals) if mask >> byte & 1)
        atom_of_byte.append(signature_atom.setdefault(signature, len(signature_atom)))
    terminal_atoms = [
        sum(1 << a for a in {atom_of_byte[b] for b in mask_bytes(mask)}) for mask in terminals
    ]
    return atom_of_byte, terminal_atoms


def build_lr1(grammar: Grammar, *, max_states: int = 20000) -> LrTables:
    """LALR(1) tables, or canonical LR(1) tables where LALR(1) has a conflict; raises NotLr1
    on a conflict in both or past ``max_states``."""
    tables = _LalrBuilder(grammar, max_states).build()
    return tables if tables is not None else _Builder(grammar, max_states).build()


class _Builder:
    def __init__(self, grammar: Grammar, max_states: int) -> None:
        self.grammar = grammar
        self.cores = ItemCores.build(grammar)
        self.max_states = max_states
        self.atom_of_byte, self.terminal_atoms = byte_atoms(grammar.terminals)
        self.end_atom = max(self.atom_of_byte) + 1
        self.first = self._first_sets()
        self._tail_first: dict[int, tuple[int, bool]] = {}

    def _first_sets(self) -> list[int]:
        cores = self.cores
        first = [0] * cores.nonterminal_count
        changed = True
        while changed:
            changed = False
            for head, rhs in cores.productions:
                mask = 0
                for symbol in rhs:
                    if symbol < 0:
                        mask |= self.terminal_atoms[terminal_index(symbol)]
                        break
                    mask |= first[symbol]
                    if not cores.nullable[symbol]:
                        break
                if mask & ~first[head]:
                    first[head] |= mask
                    changed = True
        return first

    def tail_first(self, core: int) -> tuple[int, bool]:
        """FIRST of what follows the dot of ``core`` and whether all of it is nullable."""
        cached = self._tail_first.get(core)
        if cached is not None:
            return cached
        mask = 0
        nullable = True
        position = core
        while (symbol := self.cores.next_symbol[position]) != COMPLETE:
            if symbol < 0:
                mask |= self.terminal_atoms[terminal_index(symbol)]
                nullable = False
                break
            mask |= self.first[symbol]
            if not self.cores.nullable[symbol]:
                nullable = False
                break
            position += 1
        self._tail_first[core] = (mask, nullable)
        return mask, nullable

    def closure(self, kernel: dict[int, int]) -> dict[int, int]:
        items = dict(kernel)
        agenda = list(items)
        next_symbol, first_cores = self.cores.next_symbol, self.cores.first_cores
        while agenda:
            core = agenda.pop()
            symbol = next_symbol[core]
            if symbol == COMPLETE or symbol < 0:
                continue
            mask, nullable = self.tail_first(core + 1)
            if nullable:
                mask |= items[core]
            for child in first_cores[symbol]:
                old = items.get(child, 0)
                if mask & ~old:
                    items[child] = old | mask
                    agenda.append(child)
        return items

    def build(self) -> LrTables:
        cores = self.cores
        start_kernel = frozenset({(cores.start_core, 1 << self.end_atom)})
        state_ids: dict[frozenset[tuple[int, int]], int] = {start_kernel: 0}
        kernels = [start_kernel]
        actions: list[dict[int, int]] = []
        gotos: list[dict[int, int]] = []
        index = 0
        while index < len(kernels):
            items = self.closure(dict(kernels[index]))
            shift_kernels: dict[int, dict[int, int]] = {}
            goto_kernels: dict[int, dict[int, int]] = {}
            reduces: dict[int, int] = {}
            for core, lookahead in items.items():
                symbol = cores.next_symbol[core]
                if symbol == COMPLETE:
                    self._add_reduce(reduces, core, lookahead)
                elif symbol < 0:
                    atoms = self.terminal_atoms[terminal_index(symbol)]
                    for atom in _bits(atoms):
                        target = shift_kernels.setdefault(atom, {})
                        target[core + 1] = target.get(core + 1, 0) | lookahead
                else:
                    target = goto_kernels.setdefault(symbol, {})
                    target[core + 1] = target.get(core + 1, 0) | lookahead
            action: dict[int, int] = {}
            for atom, production in reduces.items():
                action[atom] = (
                    ACCEPT if production == len(cores.productions) - 1 else -(production + 1)
                )
            for atom, kernel in sorted(shift_kernels.items()):
                if atom in action:
                    raise NotLr1(self._conflict("shift/reduce", atom, reduces[atom]))
                action[atom] = self._state(kernel, state_ids, kernels)
            actions.append(action)
            gotos.append(
                {nt: self._state(k, state_ids, kernels) for nt, k in sorted(goto_kernels.items())}
            )
            index += 1
        return self._tables(actions, gotos)

    def _tables(self, actions: list[dict[int, int]], gotos: list[dict[int, int]]) -> LrTables:
        """The tables of ``actions`` and ``gotos`` over this grammar's atoms and productions."""
        productions = self.cores.productions
        return LrTables(
            atom_of_byte=tuple(self.atom_of_byte),
            end_atom=self.end_atom,
            actions=tuple(actions),
            gotos=tuple(gotos),
            production_lhs=tuple(head for head, _ in productions),
            production_length=tuple(len(rhs) for _, rhs in productions),
        )

    def _add_reduce(self, reduces: dict[int, int], core: int, lookahead: int) -> None:
        production = self.cores.production_of[core]
        for atom in _bits(lookahead):
            other = reduces.setdefault(atom, production)
            if other != production:
                raise NotLr1(self._conflict("reduce/reduce", atom, production))

    def _state(
        self,
        kernel: dict[int, int],
        state_ids: dict[frozenset[tuple[int, int]], int],
        kernels: list[frozenset[tuple[int, int]]],
    ) -> int:
        key = frozenset(kernel.items())
        found = state_ids.get(key)
        if found is None:
            if len(kernels) >= self.max_states:
                raise NotLr1(f"more than {self.max_states} LR(1) states")
            found = state_ids[key] = len(kernels)
            kernels.append(key)
        return found

    def _conflict(self, kind: str, atom: int, production: int) -> str:
        if atom == self.end_atom:
            where = "end of input"
        else:
            where = f"byte {bytes([self.atom_of_byte.index(atom)])!r}"
        head = self.cores.productions[production][0]
        name = self.grammar.names[head] if head < len(self.grammar.names) else "start"
        return f"{kind} conflict on {where} reducing a {name!r} production"


class _LalrBuilder(_Builder):
    """LALR(1) tables by propagation to a fixpoint over the LR(0) automaton: a state's kernel
    lookaheads grow until no state's closure adds to those of a successor. (The native core
    computes the same sets by DeRemer and Pennello's relations; the tests check one
    against the other.) States are numbered as the canonical builder numbers them: in the
    order first reached, atoms before nonterminals, each in increasing order."""

    def build(self) -> LrTables | None:  # type: ignore[override]
        """The tables, or None at the first conflict."""
        cores = self.cores
        shifts, gotos = self._lr0()
        accept = len(cores.productions) - 1
        actions: list[dict[int, int]] = []
        for state, kernel in enumerate(self._lookaheads(shifts, gotos)):
            action = dict(shifts[state])
            for core, lookahead in self.closure(kernel).items():
                if cores.next_symbol[core] != COMPLETE:
                    continue
                production = cores.production_of[core]
                value = ACCEPT if production == accept else -(production + 1)
                for atom in _bits(lookahead):
                    if action.setdefault(atom, value) != value:
                        return None
            actions.append(action)
        return self._tables(actions, gotos)

    def _lr0(self) -> tuple[list[dict[int, int]], list[dict[int, int]]]:
        """The LR(0) automaton: per state, its shift target per atom and goto per nonterminal."""
        cores = self.cores
        start = frozenset({cores.start_core})
        self.kernels: list[frozenset[int]] = [start]
        state_ids = {start: 0}
        shifts: list[dict[int, int]] = []
        gotos: list[dict[int, int]] = []
        while len(shifts) < len(self.kernels):
            on_atom: dict[int, set[int]] = {}
            on_nonterminal: dict[int, set[int]] = {}
            for core in self._closure0(self.kernels[len(shifts)]):
                symbol = cores.next_symbol[core]
                if symbol == COMPLETE:
                    continue
                if symbol < 0:
                    for atom in _bits(self.terminal_atoms[terminal_index(symbol)]):
                        on_atom.setdefault(atom, set()).add(core + 1)
                else:
                    on_nonterminal.setdefault(symbol, set()).add(core + 1)
            shifts.append({a: self._lr0_state(on_atom[a], state_ids) for a in sorted(on_atom)})
            gotos.append(
                {n: self._lr0_state(on_nonterminal[n], state_ids) for n in sorted(on_nonterminal)}
            )
        return shifts, gotos

    def _closure0(self, kernel: frozenset[int]) -> set[int]:
        items = set(kernel)
        agenda = list(kernel)
        while agenda:
            symbol = self.cores.next_symbol[agenda.pop()]
            if symbol == COMPLETE or symbol < 0:
                continue
            for child in self.cores.first_cores[symbol]:
                if child not in items:
                    items.add(child)
                    agenda.append(child)
        return items

    def _lr0_state(self, cores: set[int], state_ids: dict[frozenset[int], int]) -> int:
        kernel = frozenset(cores)
        found = state_ids.get(kernel)
        if found is None:
            if len(self.kernels) >= self.max_states:
                raise NotLr1(f"more than {self.max_states} LR(1) states")
            found = state_ids[kernel] = len(self.kernels)
            self.kernels.append(kernel)
        return found

    def _lookaheads(
        self, shifts: list[dict[int, int]], gotos: list[dict[int, int]]
    ) -> list[dict[int, int]]:
        """Per state, its kernel cores' LALR(1) lookaheads."""
        cores = self.cores
        kernels = [dict.fromkeys(kernel, 0) for kernel in self.kernels]
        kernels[0][cores.start_core] = 1 << self.end_atom
        queue = deque(range(len(kernels)))
        queued = set(queue)
        while queue:
            state = queue.popleft()
            queued.discard(state)
            for core, lookahead in self.closure(kernels[state]).items():
                symbol = cores.next_symbol[core]
                if symbol == COMPLETE:
                    continue
                if symbol < 0:
                    atoms = _bits(self.terminal_atoms[terminal_index(symbol)])
                    targets = {shifts[state][atom] for atom in atoms}
                else:
                    targets = {gotos[state][symbol]}
                for target in targets:
                    old = kernels[target][core + 1]
                    if lookahead & ~old:
                        kernels[target][core + 1] = old | lookahead
                        if target not in queued:
                            queue.append(target)
                            queued.add(target)
        return kernels


def _bits(mask: int) -> list[int]:
    result = []
    while mask:
        low = mask & -mask
        result.append(low.bit_length() - 1)
        mask ^= low
    return result
