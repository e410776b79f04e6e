"""Hostile grammars and schemas: each compiles in time and memory in proportion to its size,
or is refused with a GrammarError naming the limit, never a RecursionError, MemoryError or
an exploding build."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from cad.grammar import Vocabulary
from cad.grammar.cfg import GrammarError, compile, front_end
from cad.grammar.cfg.json_schema import _Translator, load_schema_text, translate_schema

BYTES = Vocabulary(tuple(bytes([value]) for value in range(256)), None)


def nested_if(depth: int) -> dict[str, Any]:
    """``depth`` levels of ``if`` around ``{"type": "integer"}``."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"if": schema, "then": {"type": "integer"}}
    return schema


def test_a_long_string_enum_is_one_trie_and_decided_by_hashing(monkeypatch) -> None:
    """10,000 strings become a trie of rules (a DPDA of a few hundred states, where an
    alternative per value needed more LR(1) states than the builder allows), and no value
    is checked by a validator pass over the whole list."""
    validated: list[Any] = []
    original = _Translator.is_valid

    def spy(self: Any, schema: Any, instance: Any) -> bool:
        validated.append(schema)
        return original(self, schema, instance)

    monkeypatch.setattr(_Translator, "is_valid", spy)
    values = [f"value{index}" for index in range(10_000)]
    compiled = compile({"type": "string", "enum": values}, BYTES, format="json-schema")
    assert compiled.engine == "dpda"
    assert compiled.lr_states < 1_000
    assert not any("enum" in schema for schema in validated)
    for value in ("value0", "value9999", "value512"):
        assert compiled.accepts(json.dumps(value).encode())
    for other in ("value", "value10000", "valu", "1"):
        assert not compiled.accepts(json.dumps(other).encode())


def test_a_long_number_enum_is_one_trie_of_every_spelling() -> None:
    """10,000 integers: a DPDA of a few hundred states (an alternative per value gave an
    Earley parser that carried them all at every step), every spelling kept."""
    compiled = compile({"enum": list(range(10_000))}, BYTES, format="json-schema")
    assert compiled.engine == "dpda"
    assert compiled.lr_states < 1_000
    for text in (b"0", b"0.0", b"9999", b"512.0", b" 7 "):
        assert compiled.accepts(text)
    for text in (b"10000", b"-1", b"01", b"5.", b"5.00", b"1e3"):
        assert not compiled.accepts(text)


def test_enum_membership_follows_json_schema_equality() -> None:
    """Numbers equal by value, booleans never equal to numbers, arrays and objects compared
    member by member: the same values the validator keeps."""
    schema = {
        "enum": [1, "a", True, None, {"x": [1]}, [0, 1]],
        "allOf": [{"enum": [1.0, "a", False, {"x": [1.0]}, [False, 1]]}],
    }
    compiled = compile(schema, BYTES, format="json-schema")
    for value in (1, 1.0, 2, "a", True, False, None, {"x": [1]}, [0, 1], [False, 1]):
        expected = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert compiled.accepts(json.dumps(value).encode()) is expected, value


def test_an_object_of_a_thousand_properties_compiles() -> None:
    properties = {f"p{index}": {"type": "integer"} for index in range(1_000)}
    schema = {"type": "object", "properties": properties, "required": ["p999"]}
    compiled = compile(schema, BYTES, format="json-schema")
    assert compiled.accepts(b'{"p0": 1, "p999": 2}')
    assert not compiled.accepts(b'{"p0": 1}')


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        (
            {
                "type": "object",
                "properties": {f"p{i}": {"type": "integer"} for i in range(40)},
                "dependentRequired": {f"p{i}": [f"p{i + 1}"] for i in range(0, 39, 2)},
            },
            "dependentRequired",
        ),
        (
            {
                "type": "object",
                "properties": {f"p{i}": {"type": "integer"} for i in range(300)},
                "maxProperties": 150,
            },
            "maxProperties",
        ),
        ({"type": "object", "maxProperties": 10**9}, "maxProperties"),
        ({"type": "object", "minProperties": 10**9}, "minProperties"),
        ({"type": "array", "minItems": 10**9}, "minItems"),
        ({"type": "string", "minLength": 10**9}, "minLength"),
    ],
)
def test_counts_and_dependencies_past_their_limits_are_refused_or_left_out(
    schema: dict[str, Any], keyword: str
) -> None:
    """Counts multiply an object's member states by the bound, dependencies by two per
    property: past the limits the keyword is refused by name, or left out on request."""
    with pytest.raises(GrammarError, match=keyword):
        front_end(schema, format="json-schema")
    _, details = front_end(schema, format="json-schema", ignore_unsupported=True)
    assert keyword in details["ignored_keywords"]


def test_nested_conditions_cost_time_in_proportion_to_their_depth() -> None:
    """Every ``if`` asks again for the languages of the level below (through the negation
    of its condition); kept per conjunction, they are built once. In a subprocess, whose
    timeout guards against a build that doubles at every level."""
    code = (
        "import json, sys\n"
        "from cad.grammar.cfg import front_end\n"
        "front_end(json.loads(sys.stdin.read()), format='json-schema', ignore_unsupported=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(nested_if(40)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"type": "integer", "minimum": ' + "9" * 5_000 + "}", "5,000 digits"),
        ('{"type": "number", "maximum": 1e999}', "beyond what a double holds"),
        ('{"type": "number", "maximum": NaN}', "NaN is not a JSON number"),
        ('{"type": "number", "minimum": -Infinity}', "-Infinity is not a JSON number"),
        ('{"items":' * 100_000 + "{}" + "}" * 100_000, "more than 64 levels"),
        ('{"items":' * 65 + "{}" + "}" * 65, "more than 64 levels"),
        ("{not json", "not JSON"),
    ],
)
def test_schema_text_past_the_limits_is_refused(text: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        load_schema_text(text)
    with pytest.raises(GrammarError, match=message):
        front_end(text, format="json-schema")


def test_schema_objects_past_the_limits_are_refused() -> None:
    """A schema given as a dict is measured the same way (without recursion)."""
    with pytest.raises(GrammarError, match="digits"):
        translate_schema({"type": "integer", "minimum": 10**5_000})
    with pytest.raises(GrammarError, match="inf is not a JSON number"):
        translate_schema({"type": "number", "minimum": float("inf")})
    deep: Any = {}
    for _ in range(100_000):
        deep = {"items": deep}
    with pytest.raises(GrammarError, match="more than 64 levels"):
        translate_schema(deep)


@pytest.mark.parametrize("kind", ["items", "allOf", "properties"])
def test_long_reference_chains_are_refused_by_depth(kind: str) -> None:
    """A chain of definitions, each flat, nests values (or subschemas) one inside another
    through ``$ref``: refused past the depth limit rather than by Python's stack."""
    definitions: dict[str, Any] = {}
    for index in range(2_000):
        following: Any = {"$ref": f"#/$defs/d{index + 1}"} if index < 1_999 else {}
        if kind == "items":
            definitions[f"d{index}"] = {"type": "array", "items": following}
        elif kind == "allOf":
            definitions[f"d{index}"] = {"allOf": [following]}
        else:
            definitions[f"d{index}"] = {"type": "object", "properties": {"a": following}}
    with pytest.raises(GrammarError, match="more than 64 levels"):
        front_end({"$defs": definitions, "$ref": "#/$defs/d0"}, format="json-schema")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(" * 1_000 + "a" + ")" * 1_000, "groups nested more than 64 deep"),
        ("a{" + "9" * 5_000 + "}", "a quantifier count of more than 18 digits"),
    ],
)
def test_hostile_patterns_are_refused_by_name(pattern: str, message: str) -> None:
    schema = {"type": "string", "pattern": pattern}
    with pytest.raises(GrammarError, match=message) as refused:
        front_end(schema, format="json-schema")
    assert "'pattern'" in str(refused.value)
    assert len(str(refused.value)) < 400
    _, details = front_end(schema, format="json-schema", ignore_unsupported=True)
    assert details["ignored_keywords"] == ("pattern",)


def test_braces_around_other_digits_are_literal_text() -> None:
    """``{²}`` is no quantifier (its digit is not ASCII): the braces match themselves."""
    compiled = compile({"type": "string", "pattern": "^a{²}$"}, BYTES, format="json-schema")
    assert compiled.accepts(json.dumps("a{²}", ensure_ascii=False).encode())
    assert not compiled.accepts(b'"aa"')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('root ::= "a"{1000000000000000000000000000000}', "more than 18 digits"),
        ('root ::= "a"{' + "9" * 5_000 + "}", "more than 18 digits"),
        ('root ::= "a"{²}', "bad repetition bounds"),
        ('root ::= "a"{0,100000000}', "more than 1,000,"),
        ('root ::= (("a"{1000}){1000}){1000}', "more than 1,000,"),
        ("root ::= " + "(" * 350 + '"a"' + ")" * 350, "groups nested more than 64"),
        ('root ::= "a"' + "?" * 5_000, "nests more than 256 levels"),
    ],
)
def test_hostile_grammar_text_is_refused_with_the_limit(text: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        front_end(text)


def test_deep_but_allowed_grammars_compile() -> None:
    for text in (
        "root ::= " + "(" * 64 + '"a"' + ")" * 64,
        'root ::= "a"' + "?" * 250,
        "root ::= " + '("b" | ' * 63 + '"a"' + ")?" * 63,
    ):
        assert compile(text, BYTES).accepts(b"a")


def test_a_chain_of_ten_thousand_rules_compiles_to_earley() -> None:
    text = "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1} | "c"\n' for i in range(10_000))
    compiled = compile(text + 'r10000 ::= "b"\n', BYTES)
    assert compiled.engine == "earley"
    assert "LR(1) not tried" in compiled.lr_note
    assert compiled.accepts(b"aaac")
    assert not compiled.accepts(b"aaa")


@pytest.mark.slow
def test_a_long_bounded_repetition_compiles_without_the_lr1_tables() -> None:
    """100,000 nested optional rules: the LR(1) tables would take gigabytes."""
    compiled = compile("root ::= [a-z]{0,100000}", BYTES)
    assert compiled.engine == "earley"
    assert compiled.accepts(b"abc" * 1_000)
