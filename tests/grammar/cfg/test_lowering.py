"""The native lowering gives the Python reference's grammar exactly (names, numbering,
productions, terminals, start) on every grammar the front ends make, on generated rule sets
and on the translations of generated schemas, fails with the same errors, and compiles to the
same engines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad.grammar import Vocabulary
from cad.grammar.cfg import GrammarError, compile_grammar
from cad.grammar.cfg.builtin_grammars import AMBIGUOUS_ARITHMETIC, ARITHMETIC, FUNQL, JSON
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.grammar_ir import Grammar, lower, symbol_budget
from cad.grammar.cfg.json_schema import SchemaOptions, schema_length, schema_to_rules
from cad.grammar.cfg.lowering import lower_and_simplify
from cad.grammar.cfg.syntax_tree import (
    CharClass,
    Choice,
    Expr,
    Literal,
    Repeat,
    RuleRef,
    RuleSet,
    Sequence,
)
from cad.grammar.cfg.transforms import simplify
from tests.grammar.cfg.schema_instances import fixture_schemas

SCHEMA_BENCH = Path(__file__).parents[3].parent / "shared" / "data" / "jsonschemabench"
"""JSONSchemaBench next to the repository, where the machine has it (not copied in)."""

HEAVY_SCALE = int(os.environ.get("CAD_CFG_FUZZ_SCALE", "1"))
"""Multiplier for the slow volume (default bounded for CI)."""

OPTION_SETS = {
    "compact": SchemaOptions(max_whitespace=0, ignore_unsupported=True),
    "pretty": SchemaOptions(ignore_unsupported=True),
    "file": SchemaOptions(ignore_unsupported=True, file=True),
}

BYTES = Vocabulary(tuple(bytes([byte]) for byte in range(256)), None)


def outcome(lowering: Any) -> tuple[Any, ...]:
    """What a lowering gives: the grammar's lists, or the error's type and message."""
    try:
        grammar = lowering()
    except (GrammarError, KeyError, ValueError) as error:
        return type(error).__name__, str(error)
    return grammar.names, grammar.productions, grammar.terminals, grammar.start


def assert_same_lowering(rules: RuleSet, budget: int | None = None) -> None:
    reference = outcome(lambda: simplify(lower(rules, budget)))
    assert outcome(lambda: lower_and_simplify(rules, budget)) == reference


@pytest.mark.parametrize(
    "text", [JSON, ARITHMETIC, AMBIGUOUS_ARITHMETIC, FUNQL], ids=["json", "ar", "amb", "funql"]
)
def test_builtin_grammars(text: str) -> None:
    assert_same_lowering(parse_ebnf(text))


@pytest.mark.parametrize("options", sorted(OPTION_SETS))
def test_fixture_schemas(options: str) -> None:
    for _, record in fixture_schemas():
        rules = schema_to_rules(record["schema"], OPTION_SETS[options])
        assert_same_lowering(rules, symbol_budget(schema_length(record["schema"])))


@pytest.mark.slow
@pytest.mark.skipif(not SCHEMA_BENCH.is_dir(), reason="JSONSchemaBench is not on this machine")
def test_jsonschemabench_schemas() -> None:
    """The benchmark subset's schemas (every fourth by default; all 1,006 with
    ``CAD_CFG_FUZZ_SCALE=4``), compact and pretty: the grammars of the ones that translate
    are equal, and so are the errors of the ones that do not lower."""
    step = max(1, 4 // HEAVY_SCALE)
    lowered = 0
    for path in sorted(SCHEMA_BENCH.glob("*.json"))[::step]:
        schema = json.loads(path.read_text())["schema"]
        for options in ("compact", "pretty"):
            try:
                rules = schema_to_rules(schema, OPTION_SETS[options])
            except (GrammarError, RecursionError):
                continue
            assert_same_lowering(rules, symbol_budget(schema_length(schema)))
            lowered += 1
    assert lowered > 1_500 // step


def test_the_budget_and_an_empty_language_fail_alike() -> None:
    counted = parse_ebnf('root ::= "ab"{0,5000} "c"')
    assert_same_lowering(counted, 1_000)
    with pytest.raises(GrammarError, match="more than 1,000 symbols"):
        lower_and_simplify(counted, 1_000)
    empty = parse_ebnf("root ::= a\na ::= a")
    assert_same_lowering(empty)
    with pytest.raises(GrammarError, match="derives no string"):
        lower_and_simplify(empty)


def test_bad_rules_are_refused() -> None:
    with pytest.raises(KeyError, match="missing"):
        lower_and_simplify(RuleSet({"root": RuleRef("missing")}, "root"))
    with pytest.raises(KeyError, match="root"):
        lower_and_simplify(RuleSet({"other": Literal("a")}, "root"))
    with pytest.raises(ValueError, match="code point"):
        lower_and_simplify(RuleSet({"root": CharClass(((0, 0x110000),))}, "root"))
    with pytest.raises(ValueError, match="negative"):
        lower_and_simplify(RuleSet({"root": Repeat(Literal("a"), -1, None)}, "root"))
    with pytest.raises(TypeError, match="grammar expression"):
        lower_and_simplify(RuleSet({"root": "a"}, "root"))  # type: ignore[dict-item]


def test_the_lists_are_built_only_when_read() -> None:
    grammar = lower_and_simplify(parse_ebnf(JSON))
    assert grammar.native is not None
    assert grammar._productions is None
    reference = simplify(lower(parse_ebnf(JSON)))
    assert grammar.nonterminal_count == len(reference.names)
    assert grammar.by_lhs == reference.by_lhs
    assert grammar.describe() == reference.describe()


@pytest.mark.parametrize("text", [JSON, FUNQL, AMBIGUOUS_ARITHMETIC], ids=["json", "funql", "amb"])
def test_a_native_grammar_compiles_to_the_same_engine(text: str) -> None:
    native = compile_grammar(lower_and_simplify(parse_ebnf(text)), BYTES)
    lists = simplify(lower(parse_ebnf(text)))
    reference = compile_grammar(
        Grammar(lists.names, lists.productions, lists.terminals, lists.start), BYTES
    )
    assert (native.engine, native.lr_states) == (reference.engine, reference.lr_states)
    for sentence in [b"[1,2]", b'{"a":true}', b"1+2*3", b"answer(count(state(all)))", b"[1,"]:
        assert native.accepts(sentence) == reference.accepts(sentence)


EDGES = (0, 9, 0x20, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF, 0x10000)
"""Code points at the edges of UTF-8 lengths and of the surrogates."""
CODE_POINTS = st.sampled_from((*EDGES, 0x10FFFF)) | st.integers(0, 0x10FFFF)


@st.composite
def ranges(draw: st.DrawFn) -> tuple[int, int]:
    low, high = sorted((draw(CODE_POINTS), draw(CODE_POINTS)))
    return low, high


def expressions(names: list[str]) -> st.SearchStrategy[Expr]:
    leaves = st.one_of(
        st.builds(Literal, st.text(st.characters(blacklist_categories=("Cs",)), max_size=3)),
        st.builds(CharClass, st.lists(ranges(), max_size=3).map(tuple), st.booleans()),
        st.builds(RuleRef, st.sampled_from(names)),
    )

    def composite(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        parts = st.lists(inner, max_size=3)
        return st.one_of(
            st.builds(Sequence, parts.map(tuple)),
            st.builds(Choice, parts.map(lambda p: tuple(p + p[:1]))),  # a repeated option too
            st.integers(0, 3).flatmap(
                lambda low: st.builds(
                    Repeat, inner, st.just(low), st.none() | st.integers(low, low + 3)
                )
            ),
        )

    return st.recursive(leaves, composite, max_leaves=12)


@st.composite
def rule_sets(draw: st.DrawFn) -> tuple[RuleSet, int]:
    """Rules whose expressions share objects (a pool drawn once, used in several places),
    sometimes with a budget small enough to stop the lowering."""
    names = [f"r{i}" for i in range(draw(st.integers(1, 4)))]
    pool = draw(st.lists(expressions(names), min_size=1, max_size=6))
    rules: dict[str, Expr] = {}
    for name in names:
        picks = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        rules[name] = picks[0] if len(picks) == 1 else Choice(tuple(picks))
    return RuleSet(rules, names[0]), draw(st.sampled_from([10, 60, 1_000_000]))


@settings(max_examples=300, deadline=None)
@given(rule_sets())
def test_generated_rule_sets(case: tuple[RuleSet, int]) -> None:
    rules, budget = case
    assert_same_lowering(rules, budget)


NAMES = st.sampled_from(["a", "b", "id", "name", "x_1", "é"])
PATTERNS = st.sampled_from(["^a+$", "^[a-c]{1,3}$", "x", "^[0-9]+(\\.[0-9]+)?$"])


def schemas(depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas from the keywords translation handles most (types, objects, arrays, strings
    with patterns and lengths, numbers with bounds, enums and consts, the combinators and a
    local ``$ref``), nested ``depth`` levels."""
    scalar = st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["null", "boolean", "integer", "number"])}),
        st.fixed_dictionaries(
            {"type": st.just("string")},
            optional={
                "minLength": st.integers(0, 3),
                "maxLength": st.integers(3, 9),
                "pattern": PATTERNS,
            },
        ),
        st.fixed_dictionaries(
            {"type": st.just("integer")},
            optional={
                "minimum": st.integers(-5, 5),
                "maximum": st.integers(6, 300),
                "multipleOf": st.sampled_from([2, 5]),
            },
        ),
        st.fixed_dictionaries(
            {
                "enum": st.lists(
                    st.one_of(st.integers(-3, 3), NAMES, st.none()), min_size=1, max_size=4
                )
            }
        ),
        st.fixed_dictionaries({"const": st.one_of(st.booleans(), NAMES)}),
        st.just({"$ref": "#/$defs/word"}),
        st.just({}),
    )
    if depth == 0:
        return scalar
    inner = schemas(depth - 1)
    return st.one_of(
        scalar,
        st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.dictionaries(NAMES, inner, max_size=3)},
            optional={
                "required": st.lists(NAMES, max_size=2, unique=True),
                "additionalProperties": st.one_of(st.booleans(), inner),
                "maxProperties": st.integers(0, 4),
            },
        ),
        st.fixed_dictionaries(
            {"type": st.just("array"), "items": inner},
            optional={"minItems": st.integers(0, 2), "maxItems": st.integers(2, 4)},
        ),
        st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"oneOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(inner, min_size=1, max_size=2)}),
        st.fixed_dictionaries({"not": inner}),
    )


@settings(max_examples=300, deadline=None)
@given(schemas(), st.sampled_from(sorted(OPTION_SETS)))
def test_generated_schemas(schema: dict[str, Any], options: str) -> None:
    """Hypothesis-made schemas through the translator, then both lowerings."""
    schema = {**schema, "$defs": {"word": {"type": "string", "pattern": "^[a-z]+$"}}}
    try:
        rules = schema_to_rules(schema, OPTION_SETS[options])
    except GrammarError:
        return
    assert_same_lowering(rules, symbol_budget(schema_length(schema)))
