"""Allowed-token masks equal brute-force checking of every Qwen2 token; Matcher behaviour."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from cad import grammar
from cad.grammar.cfg import GrammarError, compile, fill_masks
from cad.grammar.cfg.builtin_grammars import AMBIGUOUS_ARITHMETIC, ARITHMETIC, FUNQL, JSON
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.grammar_ir import lower
from cad.grammar.cfg.transforms import simplify
from tests.grammar.cfg.oracles import brute_force_mask, sample_sentence
from tests.grammar.cfg.schema_instances import fixture_schemas

HEAVY_SCALE = int(os.environ.get("CAD_CFG_FUZZ_SCALE", "1"))
CASES = {
    "json": (JSON, "ebnf"),
    "arithmetic": (ARITHMETIC, "ebnf"),
    "ambiguous_arithmetic": (AMBIGUOUS_ARITHMETIC, "ebnf"),
    "funql": (FUNQL, "ebnf"),
    "schema_JME_18": (dict(fixture_schemas())["JME_18"]["schema"], "json-schema"),
    "schema_BFCL_simple_136": (dict(fixture_schemas())["BFCL_simple_136"]["schema"], "json-schema"),
}


def sampled_prefixes(grammar, tokenizer, rng: random.Random, count: int):
    """Inputs that stop at random token boundaries (a token list) or at random mid-token byte
    offsets (a byte string) of sampled sentences."""
    prefixes: list[list[int] | bytes] = []
    while len(prefixes) < count:
        sentence = sample_sentence(grammar, rng, depth_budget=rng.randint(3, 7))
        if rng.random() < 0.5:
            ids = tokenizer.encode(sentence.decode("utf-8"), add_special_tokens=False)
            prefixes.append(ids[: rng.randint(0, len(ids))])
        else:
            prefixes.append(sentence[: rng.randint(0, len(sentence))])
    return prefixes


def advance(matcher, prefix: list[int] | bytes) -> None:
    if isinstance(prefix, bytes):
        assert matcher.accept_bytes(prefix)
    else:
        for token_id in prefix:
            assert matcher.accept_token(token_id)


def native_mask(matcher) -> np.ndarray:
    bitmask = grammar.allocate_token_bitmask(1, matcher.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return grammar.unpack_bitmask(bitmask[0], matcher.vocab_size).numpy()


def check_masks(name: str, engine: str, tokenizer, vocab, states: int, seed: int) -> None:
    """The native mask, the reference mask and brute force (every token's bytes stepped
    through the reference engine) are equal on sampled states."""
    source, kind = CASES[name]
    try:
        native = compile(source, vocab, format=kind, engine=engine)
        reference = compile(source, vocab, format=kind, engine=engine, backend="python")
    except GrammarError:
        pytest.skip(f"{name} is not LR(1)")
    assert native.engine == reference.engine == engine
    for prefix in sampled_prefixes(native.grammar, tokenizer, random.Random(seed), states):
        matchers = native.matcher(), reference.matcher()
        for matcher in matchers:
            advance(matcher, prefix)
        expected = brute_force_mask(
            reference.automaton, matchers[1].config, vocab.token_bytes, vocab.eos_token_id
        )
        for actual in (native_mask(matchers[0]), matchers[1].allowed_tokens().numpy()):
            difference = np.flatnonzero(actual != expected)
            assert difference.size == 0, [
                (int(i), vocab.token_bytes[i], bool(actual[i])) for i in difference[:5]
            ]


@pytest.mark.parametrize("engine", ["dpda", "earley"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_masks_equal_brute_force(name: str, engine: str, qwen2_tokenizer, qwen2_vocab) -> None:
    check_masks(name, engine, qwen2_tokenizer, qwen2_vocab, states=2, seed=len(name))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dpda", "earley"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_masks_equal_brute_force_heavy(
    name: str, engine: str, qwen2_tokenizer, qwen2_vocab
) -> None:
    check_masks(
        name, engine, qwen2_tokenizer, qwen2_vocab, states=6 * HEAVY_SCALE, seed=99 + len(name)
    )


def test_engines_give_equal_masks(qwen2_tokenizer, qwen2_vocab) -> None:
    dpda = compile(JSON, qwen2_vocab, engine="dpda")
    earley = compile(JSON, qwen2_vocab, engine="earley")
    text = '{"key": [1, -2.5e3, true, null, {"s": "caf\\u00e9 \\"q\\""}], "x" : "日本"}'
    ids = qwen2_tokenizer.encode(text, add_special_tokens=False)
    left, right = dpda.matcher(), earley.matcher()
    for token_id in ids:
        assert torch.equal(left.allowed_tokens(), right.allowed_tokens())
        assert left.accept_token(token_id) and right.accept_token(token_id)
    assert left.is_accepting() and right.is_accepting()


def test_matcher_protocol_rollback_and_eos(qwen2_tokenizer, qwen2_vocab) -> None:
    compiled = compile(FUNQL, qwen2_vocab)
    assert compiled.engine == "dpda"
    matcher = compiled.matcher()
    assert isinstance(matcher, grammar.Matcher)
    ids = qwen2_tokenizer.encode(
        "answer(count(state(loc_2(countryid('usa')))))", add_special_tokens=False
    )
    masks = []
    for token_id in ids:
        masks.append(matcher.allowed_tokens())
        assert masks[-1].shape == (qwen2_vocab.size,) and masks[-1].dtype == torch.bool
        assert matcher.accept_token(token_id)
    eos = qwen2_vocab.eos_token_id
    assert matcher.is_accepting() and matcher.allowed_tokens()[eos]
    assert not matcher.accept_token(qwen2_tokenizer.encode("(", add_special_tokens=False)[0])
    matcher.rollback(3)
    assert torch.equal(matcher.allowed_tokens(), masks[-3])
    assert not matcher.is_accepting() and not matcher.allowed_tokens()[eos]
    assert not matcher.accept_token(eos)
    for token_id in ids[-3:]:
        assert matcher.accept_token(token_id)
    assert matcher.accept_token(eos) and matcher.is_finished()
    assert not matcher.allowed_tokens().any()
    matcher.rollback(1)
    assert matcher.allowed_tokens()[eos]


def test_fill_masks_matches_single_masks(qwen2_tokenizer, qwen2_vocab) -> None:
    json_grammar = compile(JSON, qwen2_vocab)
    arithmetic = compile(ARITHMETIC, qwen2_vocab)
    matchers = [
        json_grammar.matcher(),
        json_grammar.matcher(),
        arithmetic.matcher(),
        json_grammar.matcher(),
    ]
    matchers[1].accept_bytes(b'{"a": [1, ')
    matchers[2].accept_bytes(b"(1+2")
    matchers[3].accept_bytes(b'{"a": [1, ')
    out = torch.zeros((4, qwen2_vocab.size), dtype=torch.bool)
    fill_masks(matchers, out)
    for row, matcher in enumerate(matchers):
        assert torch.equal(out[row], matcher.allowed_tokens())


def test_masks_built_on_many_threads_at_once_equal_masks_built_one_by_one(
    qwen2_tokenizer, qwen2_vocab
) -> None:
    """Matchers at every token boundary of a pretty-printed instance, filled together on
    threads from a cold grammar, so that first visits, deeper suffixes and their growing child
    tables are built concurrently, give the masks a fresh grammar gives one by one."""
    import json

    from tests.grammar.cfg.schema_instances import in_schema_order

    record = dict(fixture_schemas())["BFCL_simple_136"]
    schema = record["schema"]
    ids: list[int] = []
    for test in record["tests"]:
        if test["valid"]:
            text = json.dumps(in_schema_order(test["data"], schema, schema), indent=2)
            ids = qwen2_tokenizer.encode(text, add_special_tokens=False)
            break
    together, alone = (
        compile(schema, qwen2_vocab, format="json-schema", precompute=False) for _ in range(2)
    )
    matchers = []
    for position in range(len(ids)):
        matcher = together.matcher()
        assert all(matcher.accept_token(token) for token in ids[:position])
        matchers.append(matcher)
    bitmask = grammar.allocate_token_bitmask(len(matchers), qwen2_vocab.size)
    grammar.fill_next_token_bitmasks(matchers, bitmask, threads=8)
    one = grammar.allocate_token_bitmask(1, qwen2_vocab.size)
    matcher = alone.matcher()
    for position, token in enumerate(ids):
        matcher.fill_next_token_bitmask(one)
        assert torch.equal(bitmask[position], one[0]), position
        assert matcher.accept_token(token)
    assert len(ids) > 40


def test_token_after_rejected_prefix_is_refused(qwen2_vocab) -> None:
    matcher = compile(ARITHMETIC, qwen2_vocab).matcher()
    assert not matcher.accept_bytes(b"1+*")
    assert matcher.accept_bytes(b"1+2*3")
    assert matcher.is_accepting()


def test_grammar_is_simplified_before_engines() -> None:
    grammar_text = 'root ::= a | b\na ::= "x" a\nb ::= "y" c?\nc ::= ""\nunused ::= "z"'
    simplified = simplify(lower(parse_ebnf(grammar_text)))
    assert simplified.describe() == "root ::= b\nb ::= 'y'"


def test_masks_along_pretty_printed_documents_equal_the_reference(
    qwen2_tokenizer, qwen2_vocab
) -> None:
    """Along `json.dumps(indent=2)` instances the walks take every shortcut (white space
    whose tokens die at their second byte, string slices, regions shared across grammars):
    at each token boundary the native mask equals the reference engine's."""
    import json

    from tests.grammar.cfg.schema_instances import in_schema_order

    constrained = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "maxLength": 3},
            "name": {"type": "string", "pattern": "^[a-z ]+$"},
            "note": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
        },
    }
    instance = {"code": "ab", "name": "lower case only", "note": 'Any "text"', "tags": ["x"]}
    records = [dict(fixture_schemas())[name] for name in ("BFCL_simple_136", "JME_18")]
    records.append({"schema": constrained, "tests": [{"valid": True, "data": instance}]})
    checked = 0
    for record in records:
        schema = record["schema"]
        native = compile(schema, qwen2_vocab, format="json-schema")
        reference = compile(schema, qwen2_vocab, format="json-schema", backend="python")
        valid = next(test["data"] for test in record["tests"] if test["valid"])
        text = json.dumps(in_schema_order(valid, schema, schema), indent=2)
        ids = qwen2_tokenizer.encode(text, add_special_tokens=False)
        matchers = native.matcher(), reference.matcher()
        for position, token_id in enumerate(ids):
            before = qwen2_tokenizer.decode(ids[:position])
            if position == 0 or before[-1] in ' \n"':
                expected = matchers[1].allowed_tokens().numpy()
                assert np.array_equal(native_mask(matchers[0]), expected), before
                checked += 1
            for matcher in matchers:
                assert matcher.accept_token(token_id)
    assert checked >= 20


def test_masks_inside_names_of_several_words_equal_the_reference(qwen2_tokenizer, qwen2_vocab):
    """A FunQL name's last word ends by reducing below what the top state's view shows: those
    states take one more state of context so that their walk can come from the region cache.
    The native mask equals the reference engine's at every token of names of one to three
    words."""
    native = compile(FUNQL, qwen2_vocab, format="ebnf")
    reference = compile(FUNQL, qwen2_vocab, format="ebnf", backend="python")
    queries = [
        "answer(state(stateid('texas')))",
        "answer(population_1(cityid('new york',_)))",
        "answer(loc_1(placeid('mount mc kinley')))",
    ]
    for query in queries:
        ids = qwen2_tokenizer.encode(query, add_special_tokens=False)
        matchers = native.matcher(), reference.matcher()
        for token_id in ids:
            expected = matchers[1].allowed_tokens().numpy()
            assert np.array_equal(native_mask(matchers[0]), expected), query
            for matcher in matchers:
                assert matcher.accept_token(token_id)


@pytest.mark.parametrize("name", sorted(CASES))
def test_simplified_grammars_are_a_fixed_point(name: str) -> None:
    """One pass of each transform that changes nothing ends simplification: a second call
    finds nothing left to remove."""
    from cad.grammar.cfg.json_schema import schema_to_rules

    source, kind = CASES[name]
    rules = parse_ebnf(source) if kind == "ebnf" else schema_to_rules(source)
    once = simplify(lower(rules))
    assert simplify(once).describe() == once.describe()


def test_masks_inside_free_keys_equal_the_reference_without_walking_the_trie(
    qwen2_tokenizer, qwen2_vocab
) -> None:
    """A key an object leaves open (any name but the declared ones) is a right-recursive
    rule: every character pushes a state, so the string slice is checked on the top views of
    the parser's configurations. Along an instance with such keys (ASCII, two-, three- and
    four-byte characters, next to a declared name they may start like) the native mask
    equals the reference engine's at every token, and no fill walks more than a tenth of the
    trie (without the views each key's first visits walked all of it)."""
    import json

    from cad.grammar import _native

    schema = {
        "type": "object",
        "properties": {
            "FitnessTracking": {"type": "number"},
            "cards": {"type": "object", "additionalProperties": True},
        },
    }
    instance = {
        "FitnessTracking": 1,
        "cards": {"Alex": ["A"], "ключ 键 \U0001f0a1": 2},
        "Fitness": "open",
    }
    native = compile(schema, qwen2_vocab, format="json-schema", precompute=False)
    reference = compile(schema, qwen2_vocab, format="json-schema", backend="python")
    ids = qwen2_tokenizer.encode(json.dumps(instance, ensure_ascii=False), add_special_tokens=False)
    matchers = native.matcher(), reference.matcher()
    most = 0
    for token_id in ids:
        stepped = _native.trie_nodes_stepped()
        mask = native_mask(matchers[0])
        most = max(most, _native.trie_nodes_stepped() - stepped)
        assert np.array_equal(mask, matchers[1].allowed_tokens().numpy())
        for matcher in matchers:
            assert matcher.accept_token(token_id)
    assert 0 < most < qwen2_vocab.native_trie.node_count // 10


def test_masks_after_any_accepts_and_rollbacks_equal_a_fresh_matchers(
    qwen2_tokenizer, qwen2_vocab
) -> None:
    """A matcher reuses its last resolution of a state's context-dependent tokens while the
    stack under them is unchanged (every token along a string's text). Whatever mix of
    accepts, repeated fills and rollbacks came before, including rollbacks that cut the stack
    the reused resolution was found over and then grow it anew in another context, each mask
    equals that of a fresh matcher fed the same tokens."""
    import json

    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    "name": {"type": "string"},
                },
                "required": ["name"],
            }
        },
        "$ref": "#/$defs/node",
    }
    leaf = {"name": "a leaf with a long name"}
    documents = [
        {"name": "the root, named at length"},
        {"kids": [leaf], "name": "the root, named at length"},
        {"kids": [{"kids": [leaf, leaf], "name": "a kid"}, leaf], "name": "the root"},
        {"kids": [{"kids": [{"kids": [leaf], "name": "c"}], "name": "b"}], "name": "a"},
    ]
    streams = [
        qwen2_tokenizer.encode(json.dumps(document, indent=indent), add_special_tokens=False)
        for document in documents
        for indent in (None, 2)
    ]
    compiled = compile(schema, qwen2_vocab, format="json-schema", precompute=False)
    assert compiled.engine == "dpda"
    rng = random.Random(5)
    matcher, fed, stream = compiled.matcher(), [], streams[0]
    checked = rollbacks = 0
    for _ in range(400):
        if fed and rng.random() < 0.15:
            stream = rng.choice(streams)
            shared = next(
                (i for i, (a, b) in enumerate(zip(fed, stream, strict=False)) if a != b),
                min(len(fed), len(stream)),
            )
            keep = rng.randint(0, shared)
            matcher.rollback(len(fed) - keep)
            fed = fed[:keep]
            rollbacks += 1
        elif len(fed) < len(stream):
            assert matcher.accept_token(stream[len(fed)])
            fed.append(stream[len(fed)])
        fresh = compiled.matcher()
        advance(fresh, fed)
        expected = native_mask(fresh)
        for _ in range(rng.randint(1, 2)):
            assert np.array_equal(native_mask(matcher), expected), qwen2_tokenizer.decode(fed)
        checked += 1
    assert checked == 400 and rollbacks >= 30
