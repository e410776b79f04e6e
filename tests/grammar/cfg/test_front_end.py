"""Grammar text format, UTF-8 lowering and their errors (JSON Schema: test_json_schema.py)."""

from __future__ import annotations

import random

import pytest

from cad.grammar.cfg import GrammarError
from cad.grammar.cfg.earley import EarleyAutomaton
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.grammar_ir import lower
from cad.grammar.cfg.token_masks import TransitionTable
from cad.grammar.cfg.transforms import simplify
from cad.grammar.cfg.utf8_ranges import utf8_sequences


def accepts(grammar_rules, data: bytes) -> bool:
    table = TransitionTable(EarleyAutomaton(simplify(lower(grammar_rules))))
    config = table.walk(table.automaton.initial(), data)
    return config >= 0 and table.automaton.is_accepting(config)


def text_accepts(text: str, data: bytes) -> bool:
    return accepts(parse_ebnf(text), data)


@pytest.mark.parametrize(
    ("text", "good", "bad"),
    [
        ('root ::= "a" | "b" "c"', [b"a", b"bc"], [b"b", b"ac", b""]),
        ("root ::= [a-c]+ [^a-z]?", [b"abc", b"a1", b"c\xc3\xa9"], [b"", b"1", b"a12"]),
        ('root ::= ("x" "y"?){2,3}', [b"xx", b"xyx", b"xyxyxy"], [b"x", b"xxxx"]),
        ('root ::= "a"{2} "b"{1,} "c"{0,1}', [b"aab", b"aabbbc"], [b"ab", b"aac"]),
        (
            'root ::= "\\x41\\u00e9\\n\\t\\"" [\\]\\-]',
            ['A\u00e9\n\t"]'.encode(), 'A\u00e9\n\t"-'.encode()],
            [b"A"],
        ),
        ("root ::= . .", ["日本".encode(), b"ab"], [b"a", b"\xe6\x97"]),
        ("root ::= item\n# comment\nitem ::= 'q'\n  | item 'q'", [b"q", b"qqq"], [b""]),
        ('root ::= [^"\\\\]*', [b"abc", "ü".encode()], [b'"', b"\\", b"\xff", b"\xc3"]),
    ],
)
def test_text_format(text: str, good: list[bytes], bad: list[bytes]) -> None:
    for data in good:
        assert text_accepts(text, data), data
    for data in bad:
        assert not text_accepts(text, data), data


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('root ::= "a', "unterminated string"),
        ("root ::= other", "undefined rule 'other'"),
        ('root ::= "a"{3,1}', "max < min"),
        ("root = 'a'", "expected '::='"),
        ("root ::= [b-a]", "reversed range"),
        ("root ::= root 'a'", "derives no string"),
        ("::= 'a'", "expected a rule name at line 1, column 1"),
    ],
)
def test_text_format_errors(text: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        simplify(lower(parse_ebnf(text)))


def test_utf8_sequences_cover_exactly_the_range() -> None:
    rng = random.Random(3)
    for _ in range(30):
        low = rng.randrange(0, 0x10FFFF)
        high = min(0x10FFFF, low + rng.choice([1, 50, 3000, 70000]))
        sequences = utf8_sequences(((low, high),))
        for code_point in [low, high, *(rng.randint(low, high) for _ in range(20))]:
            if 0xD800 <= code_point <= 0xDFFF:
                continue
            encoded = chr(code_point).encode()
            assert any(
                len(seq) == len(encoded)
                and all(a <= b <= z for (a, z), b in zip(seq, encoded, strict=True))
                for seq in sequences
            )
        for outside in (low - 1, high + 1):
            if 0 <= outside <= 0x10FFFF and not 0xD800 <= outside <= 0xDFFF:
                encoded = chr(outside).encode()
                assert not any(
                    len(seq) == len(encoded)
                    and all(a <= b <= z for (a, z), b in zip(seq, encoded, strict=True))
                    for seq in sequences
                )


@pytest.mark.parametrize("enabled", [True, False])
def test_front_end_leaves_the_garbage_collector_as_it_found_it(enabled: bool) -> None:
    """The front end pauses the cyclic collector while it translates, and restores it after
    a grammar, after an error, and when the caller had it off already."""
    import gc

    from cad.grammar.cfg.compiled import front_end

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        front_end(
            {"type": "object", "properties": {"a": {"type": "integer"}}}, format="json-schema"
        )
        assert gc.isenabled() is enabled
        with pytest.raises(GrammarError):
            front_end(
                {"type": "object", "minProperties": 2, "maxProperties": 1}, format="json-schema"
            )
        assert gc.isenabled() is enabled
        with pytest.raises(GrammarError):
            front_end("root ::= (", format="ebnf")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
