"""The JSON syntax machines run on the native core and agree with the pure-Python reference
engines: the same texts accepted and rejected at the same token, the same whole files, the
same masks, over JSON files and over JSON Schemas, with either native engine.

The oracles are the machines as they were built on ``backend="python"`` (the Python DPDA or
Earley engine with the numpy mask kernel), a schema's file padded with white space in Python
(:mod:`tests.grammar.syntax.reference_machines`)."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from cad.grammar.cfg import compile, compile_grammar, front_end
from cad.grammar.syntax.languages import JSON_FILE, MAX_JSON_DEPTH, GrammarMachine, syntax_machine
from cad.grammar.syntax.machine import DEAD, SyntaxMachine
from cad.grammar.vocab import Vocabulary
from tests.grammar.cfg.schema_instances import fixture_schemas, in_schema_order
from tests.grammar.syntax.conftest import small_vocabulary
from tests.grammar.syntax.reference_machines import PaddedReference, ReferenceMachine
from tests.grammar.syntax.test_agreement import SCHEMA, mutated_instances, mutated_json
from tests.grammar.syntax.test_masks import JSON_DOCUMENTS, greedy_tokens

ENGINES = ("dpda", "earley")
_SMALL = small_vocabulary()


def machine_pair(
    vocabulary: Vocabulary, schema: Any = None, engine: str = "dpda"
) -> tuple[SyntaxMachine, SyntaxMachine]:
    """(native, reference) machines of a JSON file (``schema`` None) or of a file following
    ``schema``, the native one as ``syntax_machine`` builds it, both on ``engine``."""
    if schema is None:
        native = compile(JSON_FILE, vocabulary, engine=engine)
        reference = compile(JSON_FILE, vocabulary, engine=engine, backend="python")
        return GrammarMachine(native, "json"), ReferenceMachine(reference)
    grammar, _ = front_end(schema, format="json-schema", file=True)
    native = compile_grammar(grammar, vocabulary, engine=engine)
    value = compile(schema, vocabulary, format="json-schema", engine=engine, backend="python")
    return GrammarMachine(native, "json"), PaddedReference(ReferenceMachine(value))


def assert_agree(native: SyntaxMachine, reference: SyntaxMachine, text: bytes) -> None:
    """Walk ``text`` token by token (longest match in the small vocabulary, which both
    machines are built for): at every step both are alive or both dead, and while alive they
    agree on whole files, on the mask and on which single tokens follow."""
    vocabulary_bytes = native.token_bytes
    ours, theirs = native.initial, reference.initial
    for token in [*greedy_tokens(_SMALL, text), None]:
        assert native.is_complete(ours) == reference.is_complete(theirs), text
        assert native.packed(ours).tobytes() == reference.packed(theirs).tobytes(), text
        for data in vocabulary_bytes:
            if data:
                assert (native.feed(ours, data) == DEAD) == (reference.feed(theirs, data) == DEAD)
        if token is None:
            break
        ours = native.feed(ours, vocabulary_bytes[token])  # type: ignore[arg-type]
        theirs = reference.feed(theirs, vocabulary_bytes[token])  # type: ignore[arg-type]
        assert (ours == DEAD) == (theirs == DEAD), text
        if ours == DEAD:
            break
    whole_ours, whole_theirs = (
        native.feed(native.initial, text),
        reference.feed(reference.initial, text),
    )
    assert (whole_ours == DEAD) == (whole_theirs == DEAD), text
    if whole_ours != DEAD:
        assert native.is_complete(whole_ours) == reference.is_complete(whole_theirs), text


_PAIRS: dict[tuple[str, str], tuple[SyntaxMachine, SyntaxMachine]] = {}


def cached_pair(schema: Any, engine: str) -> tuple[SyntaxMachine, SyntaxMachine]:
    """The machine pair of ``schema`` on ``engine`` over the small vocabulary, built once."""
    key = (json.dumps(schema, sort_keys=True), engine)
    if key not in _PAIRS:
        _PAIRS[key] = machine_pair(_SMALL, schema, engine)
    return _PAIRS[key]


def _mutations(text: str, seed: int) -> list[str]:
    """``text`` with a character deleted, or a piece inserted or put in place of one, six ways."""
    rng = random.Random(seed)
    pieces = [*'{}[],:"\\ \n0123456789.eE-', "true", "null", "nul", "\\u12"]
    variants = []
    for _ in range(6):
        at = rng.randrange(len(text) + 1)
        kind = rng.randrange(3)
        if kind == 0:
            variants.append(text[: max(0, at - 1)] + text[at:])
        elif kind == 1:
            variants.append(text[:at] + rng.choice(pieces) + text[at:])
        else:
            variants.append(text[: max(0, at - 1)] + rng.choice(pieces) + text[at:])
    return variants


@pytest.mark.parametrize("engine", ENGINES)
def test_json_files_agree_with_the_reference(engine: str) -> None:
    native, reference = cached_pair(None, engine)
    for document in JSON_DOCUMENTS:
        for text in [document, *_mutations(document, seed=len(document))]:
            assert_agree(native, reference, text.encode())


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_json())
def test_mutated_json_agrees_with_the_reference(engine: str, text: str) -> None:
    native, reference = cached_pair(None, engine)
    assert_agree(native, reference, text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_instances())
def test_mutated_schema_instances_agree_with_the_reference(engine: str, text: str) -> None:
    native, reference = cached_pair(SCHEMA, engine)
    assert_agree(native, reference, text.encode("utf-8", "surrogatepass"))


_COMPILED_FIXTURES = [
    (name, record) for name, record in fixture_schemas() if not name.startswith("Handwritten")
]


@pytest.mark.parametrize(
    ("name", "record"), _COMPILED_FIXTURES, ids=[name for name, _ in _COMPILED_FIXTURES]
)
def test_schema_corpus_agrees_with_the_reference(name: str, record: dict[str, Any]) -> None:
    schema = record["schema"]
    native, reference = cached_pair(schema, "dpda")
    for case in record["tests"]:
        value = in_schema_order(case["data"], schema, schema)
        compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        for text in [compact, compact + "\n", *_mutations(compact, seed=len(name))]:
            assert_agree(native, reference, text.encode())


def test_schema_on_earley_agrees_with_the_reference() -> None:
    name, record = _COMPILED_FIXTURES[0]
    native, reference = cached_pair(record["schema"], "earley")
    value = in_schema_order(record["tests"][0]["data"], record["schema"], record["schema"])
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for text in [compact + "\n", *_mutations(compact, seed=len(name))]:
        assert_agree(native, reference, text.encode())


def test_real_vocabulary_masks_agree_with_the_reference(qwen2_tokenizer, qwen2_vocab) -> None:
    record = dict(fixture_schemas())["JME_18"]
    value = in_schema_order(record["tests"][0]["data"], record["schema"], record["schema"])
    for schema, text in [
        (None, json.dumps({"a": [1, 2.5, None], "b": {"c": "d\u00e9"}}, indent=2) + "\n"),
        (record["schema"], json.dumps(value, separators=(",", ":")) + "\n"),
    ]:
        native, reference = machine_pair(qwen2_vocab, schema)
        ours, theirs = native.initial, reference.initial
        for token in qwen2_tokenizer.encode(text):
            assert np.array_equal(native.packed(ours), reference.packed(theirs))
            ours = native.feed(ours, qwen2_vocab.token_bytes[token])
            theirs = reference.feed(theirs, qwen2_vocab.token_bytes[token])
            assert ours != DEAD and theirs != DEAD
        assert native.is_complete(ours) and reference.is_complete(theirs)
        assert np.array_equal(native.packed(ours), reference.packed(theirs))


@pytest.mark.parametrize("engine", ENGINES)
def test_states_are_interned_and_resumable(engine: str) -> None:
    native, _ = cached_pair(None, engine)
    text = b'{"a": [1, {"b": null}], "c": "x"}'
    whole = native.feed(native.initial, text)
    state = native.initial
    for byte in text:
        state = native.feed(state, bytes([byte]))
    assert state == whole and native.is_complete(whole)
    middle = native.feed(native.initial, text[:10])
    other = native.feed(native.initial, b"[" * 5)  # other states in between change nothing
    assert native.feed(other, b"]" * 5) != DEAD
    assert native.feed(middle, text[10:]) == whole
    assert native.feed(middle, b"}") == DEAD


def test_unknown_states_are_refused() -> None:
    native, _ = cached_pair(None, "dpda")
    with pytest.raises(IndexError):
        native.feed(1 << 30, b"1")
    with pytest.raises(IndexError):
        native.packed(-5)


def test_the_json_machine_is_native() -> None:
    machine = syntax_machine("json", _SMALL)
    assert isinstance(machine, GrammarMachine) and machine.compiled.engine == "dpda"
    typed = syntax_machine("json", _SMALL, schema=SCHEMA)
    assert isinstance(typed, GrammarMachine) and typed.compiled.engine == "dpda"


def test_deep_nesting_stays_within_a_few_nodes_a_level() -> None:
    machine = GrammarMachine(compile(JSON_FILE, _SMALL), "json")
    opened = machine.feed(machine.initial, b'{"a":[' * (MAX_JSON_DEPTH // 2))
    assert opened != DEAD and machine.packed(opened).any()
    # A state names a node of the shared stacks: their count grows by a few nodes a level.
    assert opened < 16 * MAX_JSON_DEPTH
    closed = machine.feed(opened, b"1" + b"]}" * (MAX_JSON_DEPTH // 2))
    assert closed != DEAD and machine.is_complete(closed)
