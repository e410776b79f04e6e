"""Earley, the DPDA (native and Python reference) and lark agree on acceptance of sampled and
mutated strings."""

from __future__ import annotations

import functools
import os
import random

import pytest

from cad.grammar import Vocabulary, _native
from cad.grammar.cfg import GrammarError, compile_grammar
from cad.grammar.cfg.builtin_grammars import AMBIGUOUS_ARITHMETIC, ARITHMETIC, FUNQL, JSON
from cad.grammar.cfg.compiled import MAX_LR_RULES
from cad.grammar.cfg.dpda import DpdaAutomaton
from cad.grammar.cfg.earley import EarleyAutomaton
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.grammar_ir import Grammar, lower, terminal_symbol
from cad.grammar.cfg.json_schema import SchemaOptions, schema_to_rules
from cad.grammar.cfg.lowering import lower_and_simplify
from cad.grammar.cfg.lr1 import LrTables, NotLr1, build_lr1
from cad.grammar.cfg.token_masks import TransitionTable
from cad.grammar.cfg.transforms import simplify
from tests.grammar.cfg.oracles import LarkReference, grammar_alphabet, mutate, sample_sentence
from tests.grammar.cfg.schema_instances import compact, fixture_schemas, in_schema_order

HEAVY_SCALE = int(os.environ.get("CAD_CFG_FUZZ_SCALE", "1"))
SCHEMA_OPTIONS = SchemaOptions(max_whitespace=4, ignore_unsupported=True)
"""Schemas keep white space (short runs, so sampled sentences stay short) and the one
fixture whose oneOf options overlap compiles as anyOf, which is not LR(1)."""
"""Multiplier for the slow volumes (default bounded for CI; raise it for a long fuzz)."""

LARK_EARLEY_MAX_BYTES = 28
"""lark's Earley (used for non-LR(1) grammars) can take minutes on longer strings of the
ambiguous grammar; past this length only our engines are compared (pruned Earley against
unpruned Earley)."""

TEXT_GRAMMARS = {
    "json": (JSON, "dpda"),
    "arithmetic": (ARITHMETIC, "dpda"),
    "ambiguous_arithmetic": (AMBIGUOUS_ARITHMETIC, "earley"),
    "funql": (FUNQL, "dpda"),
}


BYTES = Vocabulary(tuple(bytes([byte]) for byte in range(256)), None)
"""A vocabulary of the 256 single bytes: the native engines need one, acceptance does not."""


NOT_LALR = 'e ::= "z" | "zz"\nf ::= "z" | "zy"'
"""Rules after which ``"5" e "c" | "5" f "d" | "6" f "c" | "6" e "d"`` is LR(1) but not
LALR(1): after ``z`` the state is the same in both contexts, and merging its lookaheads
makes ``e ::= z`` and ``f ::= z`` both reduce on ``c`` and on ``d``."""


class Engines:
    """Every engine for one grammar: the Python ones behind their own memoised transition
    tables, the native ones, and lark."""

    def __init__(self, grammar: Grammar) -> None:
        self.earley = TransitionTable(EarleyAutomaton(grammar))
        self.unpruned = TransitionTable(EarleyAutomaton(grammar, prune=False))
        self.native_earley = compile_grammar(grammar, BYTES, engine="earley")
        try:
            self.dpda: TransitionTable | None = TransitionTable(DpdaAutomaton(build_lr1(grammar)))
        except NotLr1:
            self.dpda = None
            with pytest.raises(GrammarError):
                compile_grammar(grammar, BYTES, engine="dpda")
        else:
            self.native_dpda = compile_grammar(grammar, BYTES, engine="dpda")
        self.reference = LarkReference(grammar, lalr_safe=self.dpda is not None)

    @staticmethod
    def _accepts(table: TransitionTable, data: bytes) -> bool:
        config = table.walk(table.automaton.initial(), data)
        return config >= 0 and table.automaton.is_accepting(config)

    def verdicts(self, data: bytes, with_unpruned: bool) -> dict[str, bool]:
        result = {
            "earley": self._accepts(self.earley, data),
            "native_earley": self.native_earley.accepts(data),
        }
        if self.reference.kind == "lalr" or len(data) <= LARK_EARLEY_MAX_BYTES:
            result["lark"] = self.reference.accepts(data)
        if self.dpda is None:
            with_unpruned = True
        else:
            result["dpda"] = self._accepts(self.dpda, data)
            result["native_dpda"] = self.native_dpda.accepts(data)
        if with_unpruned:
            result["earley_unpruned"] = self._accepts(self.unpruned, data)
        return result


def run_differential(
    grammar: Grammar, count: int, seed: int, depth: int = 8, engines: Engines | None = None
) -> tuple[int, int]:
    """Check ``count`` samples and ``count`` mutants; returns (accepted, rejected) totals."""
    engines = engines or Engines(grammar)
    rng = random.Random(seed)
    alphabet = grammar_alphabet(grammar)
    accepted = rejected = 0
    for index in range(count):
        sentence = sample_sentence(grammar, rng, depth_budget=rng.randint(2, depth))
        verdicts = engines.verdicts(sentence, with_unpruned=index % 10 == 0)
        assert all(verdicts.values()), (sentence, verdicts)
        mutant = mutate(sentence, rng, alphabet)
        verdicts = engines.verdicts(mutant, with_unpruned=index % 10 == 0)
        assert len(set(verdicts.values())) == 1, (mutant, verdicts)
        accepted += 1 + verdicts["earley"]
        rejected += not verdicts["earley"]
    return accepted, rejected


@functools.cache
def schema_engines(name: str) -> tuple[Grammar, Engines]:
    """A fixture schema's grammar and engines, built once for both schema tests (lark's
    LALR tables are the costly part)."""
    grammar = simplify(
        lower(schema_to_rules(dict(fixture_schemas())[name]["schema"], SCHEMA_OPTIONS))
    )
    return grammar, Engines(grammar)


def text_grammar(name: str) -> Grammar:
    return simplify(lower(parse_ebnf(TEXT_GRAMMARS[name][0])))


@pytest.mark.parametrize("name", sorted(TEXT_GRAMMARS))
def test_engine_choice(name: str) -> None:
    grammar = text_grammar(name)
    try:
        build_lr1(grammar)
        engine = "dpda"
    except NotLr1:
        engine = "earley"
    assert engine == TEXT_GRAMMARS[name][1]


@pytest.mark.parametrize("grammar_name", [*sorted(TEXT_GRAMMARS), "not_lalr", "schemas"])
def test_native_lr1_tables_equal_the_reference(grammar_name: str) -> None:
    """The native builder computes LALR(1) lookaheads by DeRemer and Pennello's relations,
    the reference by propagation to a fixpoint, and each falls back to canonical LR(1) on its
    own: every ACTION and GOTO entry is the same, or both refuse the grammar (wide white
    space, so the white-space chains are many states deep in many contexts). A lookahead
    too many would not show in the masks (the parser would reduce and then fail), so the
    tables themselves are compared."""
    if grammar_name == "schemas":
        options = SchemaOptions(max_whitespace=64, ignore_unsupported=True)
        rule_sets = [schema_to_rules(record["schema"], options) for _, record in fixture_schemas()]
    elif grammar_name == "not_lalr":
        text = f'root ::= "5" e "c" | "5" f "d" | "6" f "c" | "6" e "d"\n{NOT_LALR}'
        rule_sets = [parse_ebnf(text)]
    else:
        rule_sets = [parse_ebnf(TEXT_GRAMMARS[grammar_name][0])]
    for rule_set in rule_sets:
        grammar = lower_and_simplify(rule_set)
        try:
            reference = build_lr1(grammar)
        except NotLr1:
            with pytest.raises(_native.NotLr1):
                _native.lr1_tables(grammar.native)
            continue
        assert LrTables(**_native.lr1_tables(grammar.native)) == reference


@pytest.mark.parametrize("bytes_used", [40, 63, 64, 127, 128, 200, 256])
def test_native_lr1_over_many_atoms(bytes_used: int) -> None:
    """Lookahead sets take as many words as the atoms need (one up to 63 atoms and end of
    input, five for all 256 bytes): grammars on each side of every word boundary build the
    reference's states and accept the same strings. ``S ::= A S | ε``, ``A ::= b_i b_i+1``
    over the first ``bytes_used`` bytes, one terminal each."""
    terminals = [1 << byte for byte in range(bytes_used)]
    pairs = [
        (1, (terminal_symbol(i), terminal_symbol((i + 1) % bytes_used))) for i in range(bytes_used)
    ]
    grammar = Grammar(["S", "A"], [(0, (1, 0)), (0, ()), *pairs], terminals, 0)
    compiled = compile_grammar(grammar, BYTES, engine="dpda")
    assert compiled.lr_states == len(build_lr1(grammar).actions)
    last = bytes_used - 1
    assert compiled.accepts(b"")
    assert compiled.accepts(bytes([last, 0, 0, 1]))
    assert not compiled.accepts(bytes([last, 1]))
    assert not compiled.accepts(bytes([0]))
    if bytes_used < 256:
        assert not compiled.accepts(bytes([bytes_used, (bytes_used + 1) % 256]))


def test_a_grammar_lalr1_cannot_parse_gets_canonical_lr1_tables() -> None:
    """Where merging lookaheads creates a conflict, the canonical LR(1) tables are built
    instead: the grammar still runs on the DPDA, with the reference's states."""
    text = f'root ::= "5" e "c" | "5" f "d" | "6" f "c" | "6" e "d"\n{NOT_LALR}'
    grammar = simplify(lower(parse_ebnf(text)))
    compiled = compile_grammar(grammar, BYTES)
    assert compiled.engine == "dpda"
    assert compiled.lr_states == len(build_lr1(grammar).actions)
    for word in (b"5zc", b"5zzc", b"5zd", b"5zyd", b"6zc", b"6zyc", b"6zd", b"6zzd"):
        assert compiled.accepts(word)
    for word in (b"5zyc", b"5zzd", b"6zzc", b"6zyd", b"5z"):
        assert not compiled.accepts(word)


def test_a_repetition_in_several_contexts_shares_its_lalr1_states() -> None:
    """A bounded repetition in four contexts with different lookaheads would need more
    canonical LR(1) states than the builder allows; LALR(1) builds it once for all four."""
    text = 'root ::= "1" x "b" | "2" x "c" | "3" x "d" | "4" x "e"\nx ::= "a"{0,3000}'
    grammar = simplify(lower(parse_ebnf(text)))
    compiled = compile_grammar(grammar, BYTES)
    assert compiled.engine == "dpda"
    assert compiled.lr_states == len(build_lr1(grammar).actions) < 20000 / 3
    assert compiled.accepts(b"1" + b"a" * 3000 + b"b")
    assert not compiled.accepts(b"1" + b"a" * 5 + b"c")
    assert not compiled.accepts(b"2" + b"a" * 3001 + b"c")


def test_too_many_lr1_states_fall_back_to_earley() -> None:
    """The repetition above beside rules LALR(1) cannot parse: the canonical tables it falls
    back to need more states than the builder allows (with fewer rules than the LR(1)
    attempt takes), so it stops there and the grammar runs on Earley, with the reason kept."""
    contexts = '"1" x "b" | "2" x "c" | "3" x "d" | "4" x "e"'
    text = (
        f'root ::= {contexts} | "5" e "c" | "5" f "d" | "6" f "c" | "6" e "d"\n'
        f'x ::= "a"{{0,3000}}\n{NOT_LALR}'
    )
    grammar = simplify(lower(parse_ebnf(text)))
    assert len(grammar.names) <= MAX_LR_RULES
    compiled = compile_grammar(grammar, BYTES)
    assert compiled.engine == "earley"
    assert "more than 20000 LR(1) states" in compiled.lr_note
    assert compiled.accepts(b"1" + b"a" * 300 + b"b")
    assert compiled.accepts(b"6zyc")
    assert not compiled.accepts(b"1" + b"a" * 5 + b"c")


def test_grammars_of_many_rules_skip_the_lr1_tables() -> None:
    """Past ``MAX_LR_RULES`` rules the dense LR(1) tables (rules times states) are not
    built: ``auto`` goes to Earley and says why, ``dpda`` is refused naming the limit."""
    grammar = simplify(lower(parse_ebnf('root ::= "a"{0,10001} "b"')))
    assert len(grammar.names) > MAX_LR_RULES
    compiled = compile_grammar(grammar, BYTES)
    assert compiled.engine == "earley"
    assert f"more than {MAX_LR_RULES:,}" in compiled.lr_note
    assert compiled.accepts(b"a" * 300 + b"b")
    assert not compiled.accepts(b"a" * 5 + b"c")
    with pytest.raises(GrammarError, match="4,000"):
        compile_grammar(grammar, BYTES, engine="dpda")


@pytest.mark.parametrize("name", sorted(TEXT_GRAMMARS))
def test_text_grammars_agree(name: str) -> None:
    count = 150 if name == "ambiguous_arithmetic" else 500
    accepted, rejected = run_differential(text_grammar(name), count, seed=sum(name.encode()))
    assert accepted + rejected == 2 * count and rejected > count // 10


@pytest.mark.parametrize(
    ("name", "record"), fixture_schemas(), ids=[n for n, _ in fixture_schemas()]
)
def test_json_schemas_agree(name: str, record: dict) -> None:
    grammar, engines = schema_engines(name)
    run_differential(grammar, 40, seed=len(name), depth=6, engines=engines)
    for test in record["tests"]:
        if test["valid"]:
            data = compact(in_schema_order(test["data"], record["schema"], record["schema"]))
            assert all(engines.verdicts(data, with_unpruned=True).values()), data


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TEXT_GRAMMARS))
def test_text_grammars_agree_heavy(name: str) -> None:
    if name == "ambiguous_arithmetic":
        run_differential(text_grammar(name), 100 * HEAVY_SCALE, seed=1234, depth=6)
    else:
        run_differential(text_grammar(name), 1500 * HEAVY_SCALE, seed=1234, depth=11)


@pytest.mark.slow
def test_json_schemas_agree_heavy() -> None:
    for name, _ in fixture_schemas():
        grammar, engines = schema_engines(name)
        run_differential(grammar, 150 * HEAVY_SCALE, seed=len(name) + 1, depth=9, engines=engines)
