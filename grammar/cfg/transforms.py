"""Grammar clean-up before any engine is built (Formatron §4.5-style transforms).

* useless rules: nonterminals that derive no string, and productions using them, go;
* unreachable rules: whatever the start symbol cannot reach goes (JSON Schema translation
  leaves unused definitions behind);
* empty-only rules: a nonterminal whose only production is empty is dropped from every
  right-hand side, so neither engine spends a prediction or a reduction on it.

Nullable symbols that remain are handled inside the engines (Earley advances over nullable
symbols at prediction time; LR(1) reduces empty productions on lookahead)."""

from __future__ import annotations

from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.grammar_ir import Grammar, terminal_index, terminal_symbol


def simplify(grammar: Grammar) -> Grammar:
    """Apply all transforms until nothing changes; raises GrammarError for an empty language."""
    while True:
        before = (len(grammar.names), len(grammar.productions))
        grammar = _drop_empty_only_rules(_remove_useless(grammar))
        if (len(grammar.names), len(grammar.productions)) == before:
            return grammar


def _remove_useless(grammar: Grammar) -> Grammar:
    productive = [False] * len(grammar.names)
    changed = True
    while changed:
        changed = False
        for lhs, rhs in grammar.productions:
            if not productive[lhs] and all(s < 0 or productive[s] for s in rhs):
                productive[lhs] = changed = True
    if not productive[grammar.start]:
        raise GrammarError("the grammar's start rule derives no string")
    productions = [
        (lhs, rhs)
        for lhs, rhs in grammar.productions
        if productive[lhs] and all(s < 0 or productive[s] for s in rhs)
    ]
    by_lhs: dict[int, list[tuple[int, ...]]] = {}
    for lhs, rhs in productions:
        by_lhs.setdefault(lhs, []).append(rhs)
    reachable = {grammar.start}
    stack = [grammar.start]
    while stack:
        for rhs in by_lhs.get(stack.pop(), []):
            for symbol in rhs:
                if symbol >= 0 and symbol not in reachable:
                    reachable.add(symbol)
                    stack.append(symbol)
    return _renumber(grammar, [(lhs, rhs) for lhs, rhs in productions if lhs in reachable])


def _drop_empty_only_rules(grammar: Grammar) -> Grammar:
    empty_only = {
        lhs
        for lhs in range(len(grammar.names))
        if lhs != grammar.start
        and grammar.by_lhs[lhs]
        and all(not grammar.productions[p][1] for p in grammar.by_lhs[lhs])
    }
    if not empty_only:
        return grammar
    productions = [
        (lhs, tuple(s for s in rhs if s not in empty_only))
        for lhs, rhs in grammar.productions
        if lhs not in empty_only
    ]
    return _renumber(grammar, productions)


def _renumber(grammar: Grammar, productions: list[tuple[int, tuple[int, ...]]]) -> Grammar:
    used = sorted({grammar.start} | {lhs for lhs, _ in productions})
    new_id = {old: new for new, old in enumerate(used)}
    used_terminals = sorted({terminal_index(s) for _, rhs in productions for s in rhs if s < 0})
    new_terminal = {old: new for new, old in enumerate(used_terminals)}

    def symbol(s: int) -> int:
        return new_id[s] if s >= 0 else terminal_symbol(new_terminal[terminal_index(s)])

    unique = list(
        dict.fromkeys((new_id[lhs], tuple(symbol(s) for s in rhs)) for lhs, rhs in productions)
    )
    return Grammar(
        [grammar.names[old] for old in used],
        unique,
        [grammar.terminals[old] for old in used_terminals],
        new_id[grammar.start],
    )
