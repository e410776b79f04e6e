"""Hypothesis-generated instances, the ``jsonschema`` library as ground truth: the grammar
accepts an instance (keys in grammar order, compact and pretty-printed) exactly when the
validator says it is valid.

Instances are drawn near the schema (values built from its keywords, with random JSON put
in at random places), so both verdicts occur often. Strings are ASCII without line breaks
and patterns are matched in full when drawn (Python's ``$`` also matches before a final
newline, ECMA-262's does not); numbers are plain decimals. There Python's ``re`` and
floats agree with JSON Schema."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad.grammar import Vocabulary, compile
from cad.grammar.cfg.json_schema import in_grammar_order
from cad.grammar.cfg.schema_validation import validator_for_root

BYTES = Vocabulary((*(bytes([b]) for b in range(256)), None), 256)
ALPHABET = "abcxyz019_-"

SCHEMAS: dict[str, dict[str, Any]] = {
    "record": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 0},
            "name": {"type": "string", "minLength": 1, "maxLength": 8},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    "regions": {
        "type": "object",
        "properties": {"ab": {"type": "string"}},
        "patternProperties": {"^x": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"},
        "propertyNames": {"maxLength": 3},
    },
    "presence": {
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {}},
        "dependentRequired": {"a": ["b"]},
        "dependencies": {"c": {"not": {"required": ["a"]}}},
        "maxProperties": 2,
    },
    "one_of": {
        "oneOf": [
            {"type": "string", "pattern": "^[ab]+$"},
            {"type": "integer", "maximum": 5},
            {"type": "null"},
        ]
    },
    "discriminated": {
        "type": "object",
        "allOf": [
            {"properties": {"kind": {"enum": ["n", "s"]}}, "required": ["kind"]},
            {
                "if": {"properties": {"kind": {"const": "n"}}},
                "then": {"properties": {"v": {"type": "integer"}}},
                "else": {"properties": {"v": {"type": "string", "not": {"const": "bad"}}}},
            },
        ],
    },
    "tuple": {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "boolean"}],
        "items": {"type": "integer", "exclusiveMinimum": -3},
        "minItems": 1,
        "maxItems": 4,
    },
    "tree": {
        "$defs": {
            "t": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2},
                },
                "required": ["v"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/t",
    },
    "untyped": {"properties": {"a": {"type": "string"}}, "minLength": 2, "not": {"type": "null"}},
    "finite": {"enum": [1, 2, 3, "x", [1], {"a": 1}], "not": {"type": "array"}, "minimum": 2},
    "decimals": {"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.25},
    "multiples": {"type": "integer", "multipleOf": 7, "maximum": 100},
    "strings": {"type": "string", "pattern": "a.?b", "maxLength": 5, "not": {"pattern": "^x"}},
}

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-20, 200)
    | st.integers(-300, 300).filter(lambda n: n % 100).map(lambda n: n / 100)
    | st.text(ALPHABET, max_size=6)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(ALPHABET, max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def near(draw: Any, schema: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """A value built from ``schema``'s keywords, or (sometimes) any JSON value."""
    if schema is True or not isinstance(schema, dict) or depth > 5 or draw(st.integers(0, 15)) == 0:
        return draw(JSON_VALUES)
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        return draw(near(target, root, depth + 1))
    for keyword in ("enum", "const"):
        if keyword in schema:
            values = schema[keyword] if keyword == "enum" else [schema[keyword]]
            return draw(st.sampled_from(values))
    for keyword in ("oneOf", "anyOf", "allOf"):
        if keyword in schema:
            return draw(near(draw(st.sampled_from(schema[keyword])), root, depth + 1))
    kind = schema.get("type", draw(st.sampled_from(["object", "string", "integer"])))
    if kind == "object":
        value = {}
        for name, sub in schema.get("properties", {}).items():
            if name in schema.get("required", []) or draw(st.booleans()):
                value[name] = draw(near(sub, root, depth + 1))
        if draw(st.integers(0, 4)) == 0:
            value[draw(st.sampled_from(["x", "xa", "ab", "q", "abcd"]))] = draw(SCALARS)
        return value
    if kind == "array":
        prefix = schema.get("prefixItems", [])
        count = draw(st.integers(0, schema.get("maxItems", 3) + (draw(st.integers(0, 4)) == 0)))
        return [
            draw(near(prefix[i] if i < len(prefix) else schema.get("items", True), root, depth + 1))
            for i in range(count)
        ]
    if kind == "string":
        if "pattern" in schema and draw(st.booleans()):
            found = st.from_regex(schema["pattern"], alphabet=ALPHABET, fullmatch=True)
            return draw(found)
        return draw(st.text(ALPHABET, max_size=schema.get("maxLength", 6) + 1))
    if kind == "integer":
        return draw(st.integers(-10, 110)) * schema.get("multipleOf", 1)
    if kind == "number":
        return draw(st.integers(-400, 400).filter(lambda n: n % 100).map(lambda n: n / 100))
    return draw(SCALARS)


COMPILED: dict[str, Any] = {}


def grammar_for(name: str) -> Any:
    if name not in COMPILED:
        COMPILED[name] = compile(SCHEMAS[name], BYTES, format="json-schema")
    return COMPILED[name]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_grammar_agrees_with_the_validator(name: str, data: Any) -> None:
    schema = SCHEMAS[name]
    value = data.draw(near(schema, schema))
    expected = validator_for_root(schema).is_valid(value)
    ordered = in_grammar_order(value, schema)
    grammar = grammar_for(name)
    for text in (json.dumps(ordered), json.dumps(ordered, indent=2)):
        assert grammar.accepts(text.encode()) == expected, text


def test_instances_exercise_both_verdicts() -> None:
    seen: Counter[tuple[str, bool]] = Counter()

    @settings(
        max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(data=st.data())
    def sample(data: Any) -> None:
        for name, schema in SCHEMAS.items():
            seen[name, validator_for_root(schema).is_valid(data.draw(near(schema, schema)))] += 1

    sample()
    for name in SCHEMAS:
        assert seen[name, True] >= 5 and seen[name, False] >= 5, (name, seen)
