"""What the JSON Schema builders share: a conjunction of subschemas, keyword access and the
translator's services (rules, whitespace, validation, refusals)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from cad.grammar.cfg.syntax_tree import Expr, RuleRef

TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")
APPLICATORS = frozenset({"$ref", "allOf", "anyOf", "oneOf", "if", "then", "else"})
"""Keywords the expansion into alternatives consumes; builders never read them."""
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern"})
NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependencies", "dependentRequired", "dependentSchemas",
})  # fmt: skip
ARRAY_KEYWORDS = frozenset({
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains",
})  # fmt: skip
NEVER_SUPPORTED = {
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "recursive references are not supported; use $ref",
    "unevaluatedProperties": "it depends on what other keywords evaluated",
    "unevaluatedItems": "it depends on what other keywords evaluated",
}
"""Keywords a grammar never enforces, with the reason given when refusing them."""
KNOWN_KEYWORDS = (
    APPLICATORS | STRING_KEYWORDS | NUMBER_KEYWORDS | OBJECT_KEYWORDS | ARRAY_KEYWORDS
    | {"not", "enum", "const", "type", "format"} | NEVER_SUPPORTED.keys()
)  # fmt: skip
"""Every keyword that constrains values; anything else is an annotation or unknown."""
MAX_COUNTED = 1024
"""Largest ``maxItems`` / ``maxLength`` enforced exactly (each count is a grammar rule)."""
MAX_ALTERNATIVES = 256
"""Most alternatives one schema may expand into (anyOf, oneOf, if and dependencies)."""
MAX_SCHEMA_DEPTH = 64
"""How deeply a schema may nest: its JSON (objects and arrays), and the values and
subschemas the translation walks into, through ``$ref`` too. The translation recurses as
the schema nests; a deeper schema is refused rather than let it exhaust Python's stack.
(The deepest schema among the JSONSchemaBench files nests 63 levels.)"""


@dataclass(frozen=True)
class Conjunction:
    """Subschemas (dicts) that must all hold, without their applicator keywords: one
    alternative of a schema's expansion. Compared by the identity of its parts."""

    parts: tuple[dict[str, Any], ...]

    @property
    def key(self) -> tuple[int, ...]:
        """Identity of the conjunction (its parts are kept alive by the translator)."""
        return tuple(id(part) for part in self.parts)

    def values(self, keyword: str) -> list[Any]:
        """The keyword's value in every part that has it, in order."""
        return [part[keyword] for part in self.parts if keyword in part]

    def has(self, keyword: str) -> bool:
        """Whether some part has the keyword."""
        return any(keyword in part for part in self.parts)

    def pairs(self) -> Iterator[tuple[str, Any]]:
        """Every (keyword, value) of every part."""
        for part in self.parts:
            yield from part.items()

    def types(self) -> set[str]:
        """The JSON types the ``type`` keywords allow (``number`` also admits integers;
        ``integer`` alone excludes fractions)."""
        allowed = set(TYPES)
        for value in self.values("type"):
            named = {value} if isinstance(value, str) else set(value)
            if "number" in named:
                named.add("integer")
            allowed &= named
        return allowed


def kinds(types: set[str]) -> set[str]:
    """JSON types with integers folded into numbers."""
    return {"number" if t == "integer" else t for t in types}


def required_names(conjunction: Conjunction) -> set[str]:
    """Names some part requires."""
    return {name for value in conjunction.values("required") for name in value}


class SchemaContext(Protocol):
    """Services of the translator that the keyword builders use."""

    ws: Expr
    """Reference to the bounded white-space rule (empty when compact)."""
    colon: Expr
    """A colon between keys and values, with its (smaller) white-space bound."""
    cache: dict[Hashable, Any]
    """Shared rule fragments, by what they were built from."""

    def fresh(self, hint: str) -> str:
        """A new rule name."""
        ...

    def define(self, name: str, options: list[Expr]) -> RuleRef:
        """Define a rule with alternatives."""
        ...

    def chain(
        self, hint: str, element: Any, low: int, high: int | None, uniform_from: int = 0
    ) -> Expr:
        """Counted concatenation as left-linear rules (see ``RuleWriter.chain``)."""
        ...

    def dfa_body(self, hint: str, dfa: Any) -> Expr:
        """A character DFA's strings as left-linear rules."""
        ...

    def dfa_keys(self, hint: str, dfa: Any) -> dict[Hashable, Expr]:
        """A tagged DFA's quoted strings per tag."""
        ...

    def literal_keys(
        self, hint: str, names: list[tuple[str, Hashable]], others: Hashable | None = None
    ) -> dict[Hashable, Expr]:
        """Quoted names per tag, and every other key under ``others`` (see
        ``RuleWriter.literal_keys``)."""
        ...

    def value_expr(self, schemas: list[Any]) -> Expr:
        """A JSON value valid against every schema in ``schemas``."""
        ...

    def schema_alternatives(self, schema: Any) -> list[Conjunction]:
        """The expansion of one schema into alternatives."""
        ...

    def is_valid(self, schema: Any, instance: Any) -> bool:
        """Ground-truth validation of ``instance`` against a subschema of the root."""
        ...

    def unsupported(self, keyword: str, detail: str) -> None:
        """Refuse ``keyword`` (GrammarError naming it) unless the caller ignores it."""
        ...
