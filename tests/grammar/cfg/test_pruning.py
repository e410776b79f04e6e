"""Dependency-based pruning keeps Earley states small, equal and correct."""

from __future__ import annotations

import json

from cad.grammar.cfg.builtin_grammars import ARITHMETIC, JSON
from cad.grammar.cfg.earley import EarleyAutomaton
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.grammar_ir import lower
from cad.grammar.cfg.transforms import simplify


def parse(text: str, data: bytes, prune: bool) -> tuple[EarleyAutomaton, list[int]]:
    automaton = EarleyAutomaton(simplify(lower(parse_ebnf(text))), prune=prune)
    configs = [automaton.initial()]
    for byte in data:
        configs.append(automaton.step(configs[-1], byte))
        assert configs[-1] >= 0
    return automaton, configs


def test_pruned_state_size_is_bounded_by_nesting_not_length() -> None:
    document = json.dumps([{"k": i, "v": [i, str(i)]} for i in range(60)]).encode()
    pruned, configs = parse(JSON, document, prune=True)
    unpruned, raw_configs = parse(JSON, document, prune=False)
    assert pruned.is_accepting(configs[-1]) and unpruned.is_accepting(raw_configs[-1])
    most = max(pruned.live_items(c) for c in configs)
    assert most < 80
    assert unpruned.live_items(raw_configs[-1]) > 50 * most


def test_pruning_turns_repeated_situations_into_one_state() -> None:
    automaton, configs = parse(ARITHMETIC, b"1+2+3+4+5+6+7+8", prune=True)
    after_plus = {configs[i] for i in range(2, len(configs), 2)}
    assert len(after_plus) == 1
    assert automaton.size() < 12
