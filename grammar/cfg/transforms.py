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
    """Apply all transforms until nothing changes; raises GrammarError for an empty language.
    Removing useless rules leaves nothing more to remove, so only dropping empty-only rules
    can make another round worthwhile."""
    while True:
        grammar = _remove_useless(grammar)
        dropped = _drop_empty_only_rules(grammar)
        if dropped is grammar:
            return grammar
        grammar = dropped


def _productive(grammar: Grammar) -> list[bool]:
    """Which nonterminals derive some string: a production fires once all the nonterminals
    on its right are productive (a worklist, linear in the grammar's size)."""
    productive = [False] * len(grammar.names)
    waiting = [0] * len(grammar.productions)  # right-hand nonterminals not yet productive
    used_in: list[list[int]] = [[] for _ in grammar.names]
    ready: list[int] = []
    for index, (_, rhs) in enumerate(grammar.productions):
        for symbol in rhs:
            if symbol >= 0:
                waiting[index] += 1
                used_in[symbol].append(index)
        if not waiting[index]:
            ready.append(index)
    while ready:
        lhs = grammar.productions[ready.pop()][0]
        if productive[lhs]:
            continue
        productive[lhs] = True
        for index in used_in[lhs]:
            waiting[index] -= 1
            if not waiting[index]:
                ready.append(index)
    return productive


def _remove_useless(grammar: Grammar) -> Grammar:
    productive = _productive(grammar)
    if not productive[grammar.start]:
        raise GrammarError("the grammar's start rule derives no string")
    productions = grammar.productions
    if not all(productive):
        productions = [
            (lhs, rhs)
            for lhs, rhs in productions
            if productive[lhs] and all(s < 0 or productive[s] for s in rhs)
        ]
    by_lhs: list[list[tuple[int, ...]]] = [[] for _ in grammar.names]
    for lhs, rhs in productions:
        by_lhs[lhs].append(rhs)
    reachable = [False] * len(grammar.names)
    reachable[grammar.start] = True
    stack = [grammar.start]
    while stack:
        for rhs in by_lhs[stack.pop()]:
            for symbol in rhs:
                if symbol >= 0 and not reachable[symbol]:
                    reachable[symbol] = True
                    stack.append(symbol)
    kept = [(lhs, rhs) for lhs, rhs in productions if reachable[lhs]]
    if len(kept) == len(grammar.productions) and all(reachable) and len(set(kept)) == len(kept):
        return grammar  # nothing to remove: renumbering would rebuild the same grammar
    return _renumber(grammar, kept)


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
    used_terminals = sorted({terminal_index(s) for _, rhs in productions for s in rhs if s < 0})
    # one table for both kinds of symbol: nonterminals keep their sign, terminals theirs
    new_symbol = {old: new for new, old in enumerate(used)}
    new_symbol.update(
        (terminal_symbol(old), terminal_symbol(new)) for new, old in enumerate(used_terminals)
    )
    rename = new_symbol.__getitem__
    unique = list(
        dict.fromkeys((new_symbol[lhs], tuple(map(rename, rhs))) for lhs, rhs in productions)
    )
    return Grammar(
        [grammar.names[old] for old in used],
        unique,
        [grammar.terminals[old] for old in used_terminals],
        new_symbol[grammar.start],
    )
