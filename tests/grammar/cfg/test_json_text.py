"""Object keys written from the names' trie: the same rules, names and order as the key
automaton they stand for, and the keys a compiled object accepts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad.grammar import Vocabulary, compile
from cad.grammar.cfg.char_automata import literal_dfa
from cad.grammar.cfg.json_text import RuleWriter

REGION = ("region", frozenset())
BYTES = Vocabulary((*(bytes([b]) for b in range(256)), None), 256)
"""One token per byte: compiling against it is cheap and acceptance is token-free."""

# Characters where key rules differ: the first and last code points (the gaps before and
# after a node's children), what JSON escapes, non-ASCII and beyond the BMP.
KEY_CHARS = st.sampled_from(["a", "b", "z", "\x00", "\x1f", '"', "\\", "/", "é", "\u2028", "😀",
                             "\U0010ffff"])  # fmt: skip


def both_ways(names: list[str], others: object) -> tuple[RuleWriter, dict, RuleWriter, dict]:
    tagged = [(name, ("name", index)) for index, name in enumerate(names)]
    through_automaton, from_trie = RuleWriter({}), RuleWriter({})
    through_automaton.counter = from_trie.counter = 7  # as inside a translation
    expected = through_automaton.dfa_keys("key", literal_dfa(tagged, others))
    found = from_trie.literal_keys("key", tagged, others)
    return through_automaton, expected, from_trie, found


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(st.text(KEY_CHARS, max_size=4), max_size=6, unique=True),
    open_object=st.booleans(),
)
def test_literal_keys_equal_the_key_automaton(names: list[str], open_object: bool) -> None:
    through_automaton, expected, from_trie, found = both_ways(
        names, REGION if open_object else None
    )
    assert list(found.items()) == list(expected.items())
    assert list(from_trie.rules.items()) == list(through_automaton.rules.items())
    assert from_trie.counter == through_automaton.counter


EDGE_NAMES = [[], [""], ["", "a"], ["a", "ab", "abc"], ["\x00", "\x00a", "b"], ["\U0010ffff"],
              ["id", "name", "tags", "type", "title", "é"]]  # fmt: skip


@pytest.mark.parametrize("names", EDGE_NAMES)
@pytest.mark.parametrize("others", [None, REGION])
def test_literal_keys_edge_cases(names: list[str], others: object) -> None:
    through_automaton, expected, from_trie, found = both_ways(names, others)
    assert list(found.items()) == list(expected.items())
    assert list(from_trie.rules.items()) == list(through_automaton.rules.items())


def test_literal_keys_needs_a_tag_per_name() -> None:
    with pytest.raises(ValueError, match="tag of its own"):
        RuleWriter({}).literal_keys("key", [("a", "same"), ("b", "same")])


@pytest.mark.parametrize("closed", [True, False])
def test_object_keys_through_a_compiled_schema(closed: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "ab": {"type": "string"}, 'é/"': {}},
        "additionalProperties": not closed,
    }
    grammar = compile(schema, BYTES, format="json-schema", compact=True)
    declared = {"a": 1, "ab": "x", 'é/"': None}
    for ascii_only in (False, True):  # é raw, then as \u00e9
        text = json.dumps(declared, ensure_ascii=ascii_only, separators=(",", ":"))
        assert grammar.accepts(text.encode()), text
    for other in ('{"a":1,"abc":2}', '{"":2}', '{"b":[]}'):
        assert grammar.accepts(other.encode()) is not closed, other
    # printable ASCII is written raw only, so a declared name cannot come back as another key
    assert not grammar.accepts(b'{"\\u0061b":7}')
