"""JSON Schema front end: every keyword family with accepted and rejected documents, JSON
white space as people write it, recursion, refusals that name the keyword, the ignore
option, and the grammar's key order."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest

from cad.grammar import GrammarError, Vocabulary, compile
from cad.grammar.cfg.json_schema import SchemaOptions, in_grammar_order, translate_schema
from tests.grammar.cfg.schema_instances import fixture_schemas

BYTES = Vocabulary((*(bytes([b]) for b in range(256)), None), 256)
"""One token per byte: compiling against it is cheap and acceptance is token-free."""


def compiled(schema: Any, **options: Any):
    return compile(schema, BYTES, format="json-schema", **options)


def check(schema: Any, good: list[str], bad: list[str], **options: Any) -> None:
    grammar = compiled(schema, **options)
    for text in good:
        assert grammar.accepts(text.encode()), text
    for text in bad:
        assert not grammar.accepts(text.encode()), text


KEYWORDS = [
    # types and finite sets
    ({"type": "integer"}, ["0", "-12", "7"], ["01", "1.5", '"1"', "1e2"]),
    ({"type": "number"}, ["0", "-1.5e-3", "2E+8"], ["1.", ".5", "+1", "NaN"]),
    ({"type": ["string", "null"]}, ['"a"', "null"], ["1", "true"]),
    ({"type": "boolean"}, ["true", "false"], ["null", '"true"']),
    ({}, ["1", '{"a": [null]}', '"x"'], ["", "{", "nul"]),
    (
        {"enum": ["a", 1, None, {"k": [1, 2]}]},
        ['"a"', "1", "1.0", "null", '{ "k" : [1, 2] }'],
        ['"b"', '{"k":[2,1]}'],
    ),
    ({"const": "é\n"}, ['"é\\n"', '"\\u00e9\\n"', '"\\u00E9\\u000a"'], ['"e\\n"', '"é"']),
    # strings
    (
        {"type": "string", "minLength": 2, "maxLength": 3},
        ['"ab"', '"a\\"c"', '"\\ud83d\\ude00é"'],
        ['"a"', '"abcd"'],
    ),
    ({"type": "string", "pattern": "^[A-Z]{2}\\d+$"}, ['"AB12"'], ['"A1"', '"ab1"', '"AB1x"']),
    ({"type": "string", "pattern": "b+c"}, ['"abbbcd"', '"bc"'], ['"ac"', '"cb"']),
    ({"type": "string", "pattern": "^a|b$"}, ['"ax"', '"xb"'], ['"xa"', '"bx"']),
    (
        {"type": "string", "pattern": "^[^x]{1,2}$", "minLength": 2},
        ['"ab"', '"\\u00e9\\""'],
        ['"a"', '"ax"', '"abc"'],
    ),
    ({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2023-02-29"', '"2024-2-1"']),
    ({"type": "string", "format": "ipv4"}, ['"10.0.0.255"'], ['"10.0.0.256"']),
    (
        {"type": "string", "format": "uuid"},
        ['"123e4567-e89b-12d3-a456-426614174000"'],
        ['"123e4567"'],
    ),
    ({"type": "string", "format": "never-heard-of"}, ['"anything"'], ["1"]),
    # numbers
    (
        {"type": "integer", "minimum": -3, "exclusiveMaximum": 10},
        ["-3", "0", "9"],
        ["-4", "10", "100"],
    ),
    (
        {"type": "number", "minimum": 1.5, "maximum": 2},
        ["1.5", "1.75", "2", "2.000"],
        ["1.49", "2.01", "-2"],
    ),
    ({"type": "number", "exclusiveMinimum": 0}, ["0.001", "5"], ["0", "-0", "0.000", "-1"]),
    (
        {
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": True,
            "$schema": "http://json-schema.org/draft-04/schema#",
        },
        ["1"],
        ["0"],
    ),
    ({"type": "integer", "multipleOf": 3}, ["0", "-9", "12"], ["4", "3.0"]),
    ({"type": "number", "multipleOf": 0.25}, ["0.5", "1.75", "-2", "3.250"], ["0.1", "1.26"]),
    # objects
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
            "required": ["b"],
        },
        ['{"b":true}', '{"a":1,"b":false}', '{"b":true,"c":[1]}'],
        ["{}", '{"a":1}', '{"b":true,"a":1}', '{"b":true,"b":true}', '{"a":1,"b":true,"a":2}'],
    ),
    (
        {"properties": {"a": {"type": "null"}}, "additionalProperties": {"type": "integer"}},
        ["{}", '{"a":null,"x":1,"y":2}', '{"x":1}', "5"],
        ['{"x":"s"}', '{"a":1}'],
    ),
    ({"type": "object", "additionalProperties": False}, ["{}"], ['{"a":1}']),
    (
        {
            "type": "object",
            "patternProperties": {"^x": {"type": "integer"}, "y$": {"type": "string"}},
            "additionalProperties": False,
        },
        ['{"x1":1,"ay":"s"}', "{}"],
        ['{"xy":1}', '{"xy":"s"}', '{"z":1}', '{"x":"s"}'],
    ),
    ({"type": "object", "propertyNames": {"maxLength": 2}}, ['{"ab":1}', "{}"], ['{"abc":1}']),
    (
        {"type": "object", "minProperties": 1, "maxProperties": 2},
        ['{"a":1}', '{"a":1,"b":2}'],
        ["{}", '{"a":1,"b":2,"c":3}'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "dependentRequired": {"a": ["c"]},
            "additionalProperties": False,
        },
        ['{"a":1,"c":3}', '{"b":2}', '{"c":3}', "{}"],
        ['{"a":1}', '{"a":1,"b":2}'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "dependencies": {"b": ["a"], "a": {"not": {"required": ["b"]}}},
        },
        ['{"a":1}', "{}"],
        ['{"b":2}', '{"a":1,"b":2}'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {}, "b": {"type": "integer"}},
            "dependentSchemas": {"a": {"properties": {"b": {"minimum": 5}}}},
        },
        ['{"a":1,"b":7}', '{"b":1}', '{"a":1}'],
        ['{"a":1,"b":2}'],
    ),
    # arrays
    (
        {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2},
        ["[1]", "[1, 2e3]"],
        ["[]", "[1,2,3]", '["a"]'],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        ['["a"]', '["a", 1]', "[]"],
        ["[1]", '["a",1,2]'],
    ),
    (
        {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}},
        ['["a", 1, 2]'],
        ['["a", "b"]'],
    ),
    # combinators
    (
        {"anyOf": [{"type": "boolean"}, {"type": "array", "maxItems": 0}]},
        ["true", "[]"],
        ["[1]", "null"],
    ),
    ({"oneOf": [{"const": 1}, {"const": 2}]}, ["1", "2"], ["3"]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 3}]}, ["1", "3.5", '"s"'], ["3", "2.5"]),
    (
        {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "maxLength": 2}]},
        ['"ab0"', '"b"'],
        ['"ab"', '"bcd"'],
    ),
    (
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                    "required": ["kind"],
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
                    "required": ["kind"],
                },
            ]
        },
        ['{"kind":"a","x":1}', '{"kind":"b","y":"s"}'],
        ['{"kind":"c"}', '{"kind":"a","x":"s"}'],
    ),
    (
        {
            "allOf": [
                {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {
                    "properties": {"a": {"minimum": 0}, "b": {"type": "string"}},
                    "additionalProperties": False,
                },
            ]
        },
        ['{"a":1}', '{"a":0,"b":"x"}'],
        ['{"a":-1}', "{}", '{"a":1,"c":2}'],
    ),
    ({"type": ["string", "integer", "null"], "not": {"type": "integer"}}, ['"a"', "null"], ["1"]),
    ({"type": "string", "not": {"enum": ["a", "b"]}}, ['"c"', '"ab"'], ['"a"', '"\\u0061"']),
    ({"type": "string", "not": {"pattern": "^x"}}, ['"ax"'], ['"xa"']),
    ({"type": "integer", "not": {"minimum": 10}}, ["9", "-5"], ["10", "11"]),
    ({"type": "object", "not": {"required": ["a"]}}, ["{}", '{"b":1}'], ['{"a":1}']),
    (
        {"type": "object", "not": {"allOf": [{"required": ["a"]}, {"required": ["b"]}]}},
        ['{"a":1}', '{"b":1}', "{}"],
        ['{"a":1,"b":2}', '{"b":1,"a":2}'],
    ),
    (
        {
            "if": {"properties": {"kind": {"const": "n"}}, "required": ["kind"]},
            "then": {"properties": {"v": {"type": "integer"}}},
            "else": {"properties": {"v": {"type": "string"}}},
            "type": "object",
        },
        ['{"kind":"n","v":1}', '{"kind":"s","v":"x"}', '{"v":"x"}'],
        ['{"kind":"n","v":"x"}', '{"kind":"s","v":1}'],
    ),
    ({"allOf": [{"enum": [1, 2, 3, 4]}, {"not": {"multipleOf": 2}}]}, ["1", "3"], ["2", "4"]),
    # references and recursion
    (
        {
            "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "$ref": "#/$defs/node",
        },
        ["[]", "[[], [[]]]"],
        ["[1]"],
    ),
    (
        {
            "type": "object",
            "properties": {"value": {"type": "integer"}, "next": {"$ref": "#"}},
            "required": ["value"],
            "additionalProperties": False,
        },
        ['{"value":1,"next":{"value":2,"next":{"value":3}}}'],
        ['{"value":1,"next":{}}'],
    ),
    (
        {
            "definitions": {"a": {"$anchor": "num", "type": "number"}},
            "items": {"$ref": "#num"},
            "type": "array",
        },
        ["[1, 2.5]"],
        ['["x"]'],
    ),
    (
        {"definitions": {"a~b/c": {"type": "null"}}, "$ref": "#/definitions/a~0b~1c"},
        ["null"],
        ["1"],
    ),
]


@pytest.mark.parametrize(
    ("schema", "good", "bad"), KEYWORDS, ids=[json.dumps(c[0])[:40] for c in KEYWORDS]
)
def test_keywords(schema: Any, good: list[str], bad: list[str]) -> None:
    check(schema, good, bad)


def test_grammars_are_lr1() -> None:
    for name, record in fixture_schemas():
        if "oneOf" not in record["schema"]:
            assert compiled(record["schema"]).engine == "dpda", name
    assert compiled({"type": "string", "format": "date-time"}).engine == "dpda"


DOCUMENT = {
    "name": 'Ünïcode "quoted" /path',
    "tags": ["a", "b"],
    "nested": {"level": 1, "deeper": {"level": 2, "deeper": {"level": 3, "deeper": None}}},
    "score": -1.25,
    "empty": {},
    "list": [],
}
NESTED_SCHEMA = {
    "$defs": {
        "level": {
            "type": ["object", "null"],
            "properties": {"level": {"type": "integer"}, "deeper": {"$ref": "#/$defs/level"}},
            "additionalProperties": False,
        }
    },
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nested": {"$ref": "#/$defs/level"},
        "score": {"type": "number", "maximum": 0},
        "empty": {"type": "object"},
        "list": {"type": "array"},
    },
    "required": ["name", "tags"],
    "additionalProperties": False,
}


def deep(depth: int) -> Any:
    return {"level": depth, "deeper": deep(depth + 1) if depth < 12 else None}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(DOCUMENT),
        json.dumps(DOCUMENT, ensure_ascii=False),
        json.dumps(DOCUMENT, indent=2),
        json.dumps(DOCUMENT, indent=4),
        json.dumps(DOCUMENT, indent="\t"),
        json.dumps(DOCUMENT, indent=2).replace("\n", "\r\n") + "\r\n",
        "\n" + json.dumps({**DOCUMENT, "nested": deep(0)}, indent=4) + "\n",
        json.dumps(DOCUMENT, indent=1, separators=(" ,", " : ")),
    ],
)
def test_json_as_people_write_it(text: str) -> None:
    assert compiled(NESTED_SCHEMA).accepts(text.encode())


def test_whitespace_is_bounded_and_compact_is_an_option() -> None:
    grammar = compiled(NESTED_SCHEMA)
    assert grammar.accepts(b'{"name": "x",' + b" " * 64 + b'"tags": []}')
    assert not grammar.accepts(b'{"name": "x",' + b" " * 65 + b'"tags": []}')
    assert not grammar.accepts(b'{"name"' + b" " * 17 + b': "x", "tags": []}')
    assert not grammar.accepts(b" " * 65 + b'{"name": "x", "tags": []}')
    compact = compiled(NESTED_SCHEMA, compact=True)
    assert compact.accepts(json.dumps(DOCUMENT, separators=(",", ":")).encode())
    assert not compact.accepts(json.dumps(DOCUMENT).encode())
    narrow = compiled(NESTED_SCHEMA, max_whitespace=2)
    assert narrow.accepts(b'{"name": "x",\n "tags": []}')
    assert not narrow.accepts(b'{"name": "x",\n  "tags": []}')


def test_every_translation_starts_from_the_same_rules() -> None:
    """The white-space chains and plain JSON values are written once per bound and copied:
    a translation adds its rules to its copy, so the next one (of any schema, with any
    bound) starts from the same rules and fresh names as the first."""
    options = [SchemaOptions(max_whitespace=bound) for bound in (64, 0, 2)]
    first = [translate_schema(NESTED_SCHEMA, option).rules.rules for option in options]
    for option in options:
        translate_schema({"type": "array", "items": {"enum": ["a", "b"]}}, option)
    again = [translate_schema(NESTED_SCHEMA, option).rules.rules for option in options]
    assert [list(rules.items()) for rules in again] == [list(rules.items()) for rules in first]
    assert "ws-1" in first[0] and "ws-1" not in first[1]


def test_a_translation_leaves_nothing_to_the_cyclic_collector() -> None:
    """A translation's expressions are freed by reference counting as soon as it returns,
    not kept alive by a cycle through the translator until Python's collector runs (which
    then walks them inside a later compile or decode step)."""
    schemas = [NESTED_SCHEMA, {"type": "object", "properties": {"id": {"pattern": "^[a-z]+$"}}}]
    for schema in schemas:
        translate_schema(schema)  # the pieces kept across schemas are made first
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for schema in schemas:
            translate_schema(schema)
            assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "array", "uniqueItems": True}, "uniqueItems"),
        ({"type": "array", "contains": {"type": "integer"}}, "contains"),
        ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties"),
        ({"type": "string", "pattern": "(?=a)"}, "pattern"),
        ({"oneOf": [{"type": "array", "minItems": 1}, {"type": "array", "maxItems": 3}]}, "oneOf"),
        ({"$ref": "http://example.com/s.json"}, "\\$ref"),
        ({"type": "array", "maxItems": 5000}, "maxItems"),
        ({"type": "number", "not": {"enum": [1.5]}}, None),
        ({"type": "array", "not": {"minItems": 2}}, "not"),
    ],
)
def test_unenforceable_keywords_are_named_unless_ignored(schema: Any, keyword: str | None) -> None:
    if keyword is None:
        check(schema, ["1", "2.5"], ["1.5", "1.50"])
        return
    with pytest.raises(GrammarError, match=f"keyword '{keyword}' cannot be enforced"):
        compiled(schema)
    grammar = compiled(schema, ignore_unsupported=True)
    assert grammar.details["ignored_keywords"] == (keyword.replace("\\", ""),)


def test_ignored_keywords_widen_the_language() -> None:
    grammar = compiled(
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        ignore_unsupported=True,
    )
    assert grammar.accepts(b"[1, 1]") and not grammar.accepts(b'["a"]')
    loose = compiled(
        {"type": "string", "pattern": "(?<=a)b", "maxLength": 2}, ignore_unsupported=True
    )
    assert loose.accepts(b'"zz"') and not loose.accepts(b'"zzz"')


def test_annotations_and_unknown_keywords_are_ignored() -> None:
    schema = {
        "title": "T", "description": "d", "examples": [1], "default": 2, "$comment": "c",
        "deprecated": True, "readOnly": True, "x-vendor": {"anything": 1}, "comment": "x",
        "type": "integer", "contentMediaType": "text/plain",
    }  # fmt: skip
    grammar = compiled(schema)
    assert grammar.details["ignored_keywords"] == ()
    assert grammar.accepts(b"3")


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (False, "accepts no value"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "accepts no value"),
        ({"allOf": [{"$ref": "#"}]}, "refers back to itself"),
        ({"$ref": "#/nowhere"}, "does not resolve"),
        ({"type": "string", "minLength": -1}, "non-negative"),
        ({"enum": "x"}, "must be an array"),
    ],
)
def test_bad_or_empty_schemas(schema: Any, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        compiled(schema)


def test_in_grammar_order_puts_declared_keys_first() -> None:
    schema = {
        "type": "object",
        "allOf": [{"properties": {"b": {"type": "object", "properties": {"y": {}, "x": {}}}}}],
        "properties": {"a": {}},
    }
    value = {"z": 1, "b": {"x": 1, "y": 2}, "a": 0}
    ordered = in_grammar_order(value, schema)
    assert list(ordered) == ["a", "b", "z"] and list(ordered["b"]) == ["y", "x"]
    assert compiled(schema).accepts(json.dumps(ordered).encode())
    assert not compiled(schema).accepts(json.dumps(value).encode())


@pytest.mark.parametrize(
    ("name", "record"), fixture_schemas(), ids=[n for n, _ in fixture_schemas()]
)
def test_fixture_instances_in_every_spelling(name: str, record: dict[str, Any]) -> None:
    schema = record["schema"]
    grammar = compiled(schema, ignore_unsupported=True)
    for test in record["tests"]:
        value = in_grammar_order(test["data"], schema)
        for text in (
            json.dumps(value),
            json.dumps(value, indent=2),
            json.dumps(value, separators=(",", ":")),
        ):
            assert grammar.accepts(text.encode()) == test["valid"], (name, text)


def test_token_by_token_with_a_real_tokenizer(qwen2_tokenizer, qwen2_vocab) -> None:
    grammar = compile(NESTED_SCHEMA, qwen2_vocab, format="json-schema")
    text = json.dumps({**DOCUMENT, "nested": deep(0)}, indent=2)
    matcher = grammar.matcher()
    for token in qwen2_tokenizer.encode(text, add_special_tokens=False):
        assert matcher.allowed_tokens()[token]
        assert matcher.accept_token(token)
    assert matcher.accept_token(qwen2_vocab.eos_token_id)
