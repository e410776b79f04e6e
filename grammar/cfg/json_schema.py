"""JSON Schema -> grammar rules for compact JSON (no whitespace between tokens).

Supported keywords: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties``, ``enum``, ``const``, ``items``, ``anyOf``, ``oneOf`` (as anyOf),
``minLength``/``maxLength``, ``minItems``/``maxItems``, ``pattern`` (see regex_pattern),
and local ``$ref`` into ``$defs``/``definitions`` (recursion allowed). Annotations
(``title``, ``description``, ``default``, ``examples``, ...) are ignored. Any other keyword
raises GrammarError naming it.

Objects list their declared properties in schema order, optional ones may be left out.
With ``properties`` present, other keys are allowed only when ``additionalProperties`` is
``true`` or a schema (they then come after the declared ones); without ``properties`` any
keys are allowed unless ``additionalProperties`` is ``false``."""

from __future__ import annotations

import json
from typing import Any

from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.regex_pattern import pattern_expr
from cad.grammar.cfg.syntax_tree import (
    Choice,
    Expr,
    Literal,
    Repeat,
    RuleRef,
    RuleSet,
    Sequence,
)

_ANNOTATIONS = frozenset({
    "title", "description", "$schema", "$id", "id", "default", "examples", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "meta",
})  # fmt: skip
_SUPPORTED = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "anyOf", "oneOf", "minLength", "maxLength", "minItems", "maxItems", "pattern", "$ref",
})  # fmt: skip

_BASE_RULES = r"""
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" (json-member ("," json-member)*)? "}"
json-member ::= json-string ":" json-value
json-array ::= "[" (json-value ("," json-value)*)? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-number ::= json-integer ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
json-integer ::= "-"? ("0" | [1-9] [0-9]*)
"""


def schema_to_rules(schema: Any) -> RuleSet:
    """Translate a JSON Schema (a dict or a boolean) into grammar rules; start rule ``root``."""
    return _Translator(schema).run()


def _base_rules() -> dict[str, Expr]:
    from cad.grammar.cfg.ebnf_parser import parse_ebnf

    return dict(parse_ebnf(_BASE_RULES).rules)


class _Translator:
    def __init__(self, schema: Any) -> None:
        self.root = schema
        self.rules: dict[str, Expr] = _base_rules()
        self.ref_rules: dict[str, str] = {}
        self.counter = 0

    def run(self) -> RuleSet:
        self.rules["root"] = self.translate(self.root)
        return RuleSet(self.rules, "root")

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}-{self.counter}"

    def translate(self, schema: Any) -> Expr:
        if schema is True or schema == {}:
            return RuleRef("json-value")
        if schema is False:
            raise GrammarError("schema 'false' (matches nothing) is only supported as a property")
        if not isinstance(schema, dict):
            raise GrammarError(f"a schema must be an object or a boolean, not {schema!r}")
        for keyword in schema:
            if keyword not in _SUPPORTED and keyword not in _ANNOTATIONS:
                raise GrammarError(f"unsupported JSON Schema keyword {keyword!r}")
        if "$ref" in schema:
            return RuleRef(self.reference(schema["$ref"]))
        if "const" in schema:
            return Literal(_compact(schema["const"]))
        if "enum" in schema:
            return Choice(tuple(Literal(_compact(value)) for value in schema["enum"]))
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                siblings = {k: v for k, v in schema.items() if k not in (combinator, *_ANNOTATIONS)}
                options = tuple(
                    self.translate(_merge(siblings, option)) for option in schema[combinator]
                )
                return options[0] if len(options) == 1 else Choice(options)
        types = schema.get("type")
        if types is None:
            types = _implied_types(schema)
        if isinstance(types, list):
            options = tuple(self.typed(t, schema) for t in types)
            return options[0] if len(options) == 1 else Choice(options)
        return self.typed(types, schema)

    def reference(self, ref: str) -> str:
        if ref not in self.ref_rules:
            target: Any = self.root
            if ref != "#":
                if not ref.startswith("#/"):
                    raise GrammarError(
                        f"unsupported JSON Schema keyword '$ref' to {ref!r} (only local refs)"
                    )
                for part in ref[2:].split("/"):
                    part = part.replace("~1", "/").replace("~0", "~")
                    if not isinstance(target, dict) or part not in target:
                        raise GrammarError(f"$ref {ref!r} does not resolve")
                    target = target[part]
            name = self.ref_rules[ref] = self.fresh("ref")
            self.rules[name] = self.translate(target)
        return self.ref_rules[ref]

    def typed(self, kind: Any, schema: dict[str, Any]) -> Expr:
        if kind is None:
            return RuleRef("json-value")
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return RuleRef("json-integer")
        if kind == "number":
            return RuleRef("json-number")
        if kind == "boolean":
            return Choice((Literal("true"), Literal("false")))
        if kind == "null":
            return Literal("null")
        if kind == "object":
            return self.object(schema)
        if kind == "array":
            return self.array(schema)
        raise GrammarError(f"unsupported JSON Schema keyword 'type' value {kind!r}")

    def string(self, schema: dict[str, Any]) -> Expr:
        if "pattern" in schema:
            if "minLength" in schema or "maxLength" in schema:
                raise GrammarError(
                    "unsupported JSON Schema keyword 'pattern' together with a length bound"
                )
            return Sequence(
                (Literal('"'), pattern_expr(schema["pattern"], "json-char"), Literal('"'))
            )
        low = int(schema.get("minLength", 0))
        high = schema.get("maxLength")
        body = Repeat(RuleRef("json-char"), low, None if high is None else int(high))
        return Sequence((Literal('"'), body, Literal('"')))

    def object(self, schema: dict[str, Any]) -> Expr:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        extra_schema = schema.get("additionalProperties", not properties)
        extra: Expr | None = None
        if extra_schema is not False:
            value = self.translate(True if extra_schema is True else extra_schema)
            extra = Sequence((RuleRef("json-string"), Literal(":"), value))
        members = [
            (Sequence((Literal(_compact(name) + ":"), self.translate(sub))), name in required)
            for name, sub in properties.items()
            if sub is not False
        ]
        missing = required - set(properties)
        if missing and extra is None:
            raise GrammarError(
                f"required properties {sorted(missing)} are not declared and extra keys are not allowed"
            )
        after: Expr = Repeat(Sequence((Literal(","), extra)), 0, None) if extra else Sequence(())
        first: Expr = Repeat(Sequence((extra, after)), 0, 1) if extra else Sequence(())
        for member, is_required in reversed(members):
            after_name, first_name = self.fresh("after"), self.fresh("first")
            with_comma = Sequence((Literal(","), member, after))
            self.rules[after_name] = with_comma if is_required else Choice((with_comma, after))
            leading = Sequence((member, after))
            self.rules[first_name] = leading if is_required else Choice((leading, first))
            after, first = RuleRef(after_name), RuleRef(first_name)
        return Sequence((Literal("{"), first, Literal("}")))

    def array(self, schema: dict[str, Any]) -> Expr:
        items = schema.get("items", True)
        if isinstance(items, list):
            raise GrammarError(
                "unsupported JSON Schema keyword 'items' as a list (tuple validation)"
            )
        element = self.translate(items)
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        if high is not None and int(high) == 0:
            return Literal("[]")
        following = Repeat(
            Sequence((Literal(","), element)),
            max(low - 1, 0),
            None if high is None else int(high) - 1,
        )
        body: Expr = Sequence((element, following))
        if low == 0:
            body = Repeat(body, 0, 1)
        return Sequence((Literal("["), body, Literal("]")))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _merge(siblings: dict[str, Any], option: Any) -> Any:
    if not siblings or not isinstance(option, dict):
        return option
    return {**siblings, **option}


def _implied_types(schema: dict[str, Any]) -> str | None:
    if "properties" in schema or "additionalProperties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "minItems" in schema or "maxItems" in schema:
        return "array"
    if "minLength" in schema or "maxLength" in schema or "pattern" in schema:
        return "string"
    return None
