"""Dotted-production ("item core") numbering shared by the Earley and LR(1) builders.

The grammar is augmented with ``S' ::= S``; core ``offset[p] + d`` is production ``p`` with
the dot before position ``d``."""

from __future__ import annotations

from dataclasses import dataclass

from cad.grammar.cfg.grammar_ir import Grammar

COMPLETE = 1 << 30
"""``next_symbol`` of a core whose dot is at the end."""


@dataclass(frozen=True)
class ItemCores:
    """Per-core tables of an augmented grammar."""

    productions: tuple[tuple[int, tuple[int, ...]], ...]
    next_symbol: tuple[int, ...]
    lhs: tuple[int, ...]
    production_of: tuple[int, ...]
    first_cores: tuple[tuple[int, ...], ...]
    nullable: tuple[bool, ...]
    start_core: int
    accept_core: int
    nonterminal_count: int

    @classmethod
    def build(cls, grammar: Grammar) -> ItemCores:
        """Augment ``grammar`` with a fresh start rule and number every dotted production."""
        augmented_start = len(grammar.names)
        productions = (*grammar.productions, (augmented_start, (grammar.start,)))
        next_symbol: list[int] = []
        lhs: list[int] = []
        production_of: list[int] = []
        offsets: list[int] = []
        for index, (head, rhs) in enumerate(productions):
            offsets.append(len(next_symbol))
            for dot in range(len(rhs) + 1):
                next_symbol.append(rhs[dot] if dot < len(rhs) else COMPLETE)
                lhs.append(head)
                production_of.append(index)
        first_cores: list[list[int]] = [[] for _ in range(augmented_start + 1)]
        for index, (head, _) in enumerate(productions):
            first_cores[head].append(offsets[index])
        nullable = [*grammar.nullable(), grammar.nullable()[grammar.start]]
        start_core = offsets[-1]
        return cls(
            productions=productions,
            next_symbol=tuple(next_symbol),
            lhs=tuple(lhs),
            production_of=tuple(production_of),
            first_cores=tuple(tuple(c) for c in first_cores),
            nullable=tuple(nullable),
            start_core=start_core,
            accept_core=start_core + 1,
            nonterminal_count=augmented_start + 1,
        )
