"""Expanding a schema into alternatives: ``$ref``, ``allOf``, ``anyOf``, ``oneOf``,
``if``/``then``/``else``, schema-valued dependencies and ``not`` over object shapes.

Each alternative is a ``Conjunction`` of subschemas whose own (non-applicator) keywords must
all hold; the translator gives every alternative its rules. ``oneOf`` stays a plain choice
when no two options can overlap (different types, values, discriminating properties,
disjoint string or number languages); otherwise each option is taken together with the
negation of the others. Schemas made up here (negations, dependency branches) are kept
alive by the expander because conjunctions are keyed by identity."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from cad.grammar.cfg.char_automata import Dfa, intersect
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.schema_context import (
    KNOWN_KEYWORDS,
    MAX_ALTERNATIVES,
    MAX_SCHEMA_DEPTH,
    TYPES,
    Conjunction,
    SchemaContext,
    kinds,
    required_names,
)
from cad.grammar.cfg.schema_objects import presence_formula
from cad.grammar.cfg.schema_scalars import finite_values, number_dfa, string_dfa


class ReferenceCycle(GrammarError):
    """A ``$ref`` / ``allOf`` chain that returns to itself without a value in between."""


class SchemaExpander:
    """Alternatives of every subschema of one root, memoised by identity."""

    def __init__(self, ctx: SchemaContext, root: Any) -> None:
        self.ctx = ctx
        self.root = root
        self.memo: dict[int, list[Conjunction]] = {}
        self.expanding: set[int] = set()
        self.made_up: list[dict[str, Any]] = []
        self.origins: dict[int, str] = {}
        """Made-up ``{"not": ...}`` schemas by id: the keyword to name when they fail."""
        self.expanded_negations: set[int] = set()
        """``not`` values already expanded into alternatives (the typed translation skips them)."""
        self.anchor_table: dict[str, Any] | None = None

    def alternatives(self, schema: Any) -> list[Conjunction]:
        """The alternatives of one schema (``True``: one empty conjunction; ``False``: none)."""
        if schema is True:
            return [Conjunction(())]
        if schema is False:
            return []
        if not isinstance(schema, dict):
            raise GrammarError(f"a schema must be an object or a boolean, not {schema!r}")
        key = id(schema)
        if key in self.memo:
            return self.memo[key]
        if key in self.expanding:
            raise ReferenceCycle("a $ref or allOf refers back to itself without a value in between")
        if len(self.expanding) >= MAX_SCHEMA_DEPTH:
            raise GrammarError(
                f"the schema's subschemas nest more than {MAX_SCHEMA_DEPTH} levels deep "
                "(allOf, anyOf, $ref and the like, one inside another); flatten it"
            )
        self.expanding.add(key)
        try:
            result = self._expand(schema)
        finally:
            self.expanding.discard(key)
        self.memo[key] = result
        return result

    def _expand(self, schema: dict[str, Any]) -> list[Conjunction]:
        result = [Conjunction((schema,))]
        if "$ref" in schema:
            target = self._resolve(schema["$ref"])
            if target is not None:
                result = self.conjoin(result, self.alternatives(target))
        for sub in schema.get("allOf", []):
            result = self.conjoin(result, self.alternatives(sub))
        if "anyOf" in schema:
            options = [a for option in schema["anyOf"] for a in self.alternatives(option)]
            result = self.conjoin(result, options)
        if "oneOf" in schema:
            result = self.conjoin(result, self._exactly_one(schema["oneOf"], result))
        if "not" in schema:
            branches = self._object_negation(schema["not"])
            if branches is not None:
                self.expanded_negations.add(id(schema["not"]))
                options = [a for branch in branches for a in self.alternatives(branch)]
                result = self.conjoin(result, options)
        if "if" in schema:
            condition = schema["if"]
            then = self.conjoin(
                self.alternatives(condition),
                self.alternatives(schema.get("then", True)),
            )
            negated = self.synthetic({"not": condition}, origin="if")
            otherwise = self.conjoin(
                self.alternatives(negated),
                self.alternatives(schema.get("else", True)),
            )
            result = self.conjoin(result, then + otherwise)
        for keyword in ("dependencies", "dependentSchemas"):
            for trigger, then in schema.get(keyword, {}).items():
                if isinstance(then, list) or presence_formula(then) is not None:
                    continue
                present = self.conjoin(
                    self.alternatives(self.synthetic({"required": [trigger]})),
                    self.alternatives(then),
                )
                absent = self.alternatives(self.synthetic({"properties": {trigger: False}}))
                result = self.conjoin(result, present + absent)
        return result

    def _object_negation(self, negated: Any) -> list[dict[str, Any]] | None:
        """``not`` over objects described by ``required`` and ``properties`` with value
        schemas (what ``if`` discriminators look like), as alternatives: some required key
        is missing, or some declared key holds a value its schema rejects, or the value is
        of a type the negated schema does not accept. None when ``negated`` says more (the
        typed translation then handles it) or only speaks of presence (kept as a formula)."""
        if presence_formula(negated) is not None:
            return None
        alternatives = self.alternatives(negated)
        result: list[dict[str, Any]] = [{}]
        for alternative in alternatives:
            branches = self._negated_alternative(alternative)
            if branches is None:
                return None
            result = [{"allOf": [a, b]} for a in result for b in branches]
            if len(result) > MAX_ALTERNATIVES:
                return None
        return [self.synthetic(branch) for branch in result]

    def _negated_alternative(self, alternative: Conjunction) -> list[dict[str, Any]] | None:
        types = alternative.types()
        if alternative.has("not") or finite_values(self.ctx, alternative) is not None:
            return None
        if "integer" in types and "number" not in types:
            return None
        allowed = {"required", "properties", "type"}
        if any(k in KNOWN_KEYWORDS and k not in allowed for k, _ in alternative.pairs()):
            return None
        others = sorted(set(TYPES) - types - {"integer"})
        branches: list[dict[str, Any]] = [{"type": others}] if others else []
        if "object" in types:
            for name in required_names(alternative):
                branches.append({"type": "object", "properties": {name: False}})
            for properties in alternative.values("properties"):
                for name, schema in properties.items():
                    if schema is False:
                        branches.append({"type": "object", "required": [name]})
                    elif schema is not True and schema != {}:
                        excluded = {
                            "type": "object",
                            "required": [name],
                            "properties": {name: {"not": schema}},
                        }
                        branches.append(excluded)
        return [self.synthetic(branch) for branch in branches]

    def _exactly_one(self, options: list[Any], context: list[Conjunction]) -> list[Conjunction]:
        """Alternatives for ``oneOf``: its options when no two can overlap together with
        their ``context`` (the keywords beside the ``oneOf``), otherwise each option with the
        negation of all the others."""
        branches = [self.alternatives(option) for option in options]
        if not self._disjoint_branches([self.conjoin(context, b) for b in branches]):
            branches = []
            for index, option in enumerate(options):
                alternatives = self.alternatives(option)
                for other in options[:index] + options[index + 1 :]:
                    negated = self.synthetic({"not": other}, origin="oneOf")
                    alternatives = self.conjoin(alternatives, self.alternatives(negated))
                branches.append(alternatives)
        return [a for branch in branches for a in branch]

    def synthetic(self, schema: dict[str, Any], origin: str | None = None) -> dict[str, Any]:
        """Keep a schema made up here alive (conjunctions are keyed by identity); ``origin``
        is the keyword to name when its ``not`` cannot be enforced."""
        self.made_up.append(schema)
        if origin is not None:
            self.origins[id(schema)] = origin
        return schema

    def conjoin(self, left: list[Conjunction], right: list[Conjunction]) -> list[Conjunction]:
        result = [
            Conjunction(tuple({id(p): p for p in (*a.parts, *b.parts)}.values()))
            for a in left
            for b in right
        ]
        if len(result) > MAX_ALTERNATIVES:
            raise GrammarError(
                f"the schema expands into more than {MAX_ALTERNATIVES} alternatives "
                "(anyOf, oneOf, if and dependencies combined)"
            )
        return result

    def _resolve(self, ref: Any) -> Any:
        if not isinstance(ref, str):
            raise GrammarError(f"'$ref' must be a string, not {ref!r}")
        base, _, fragment = ref.partition("#")
        target: Any = self.root
        if base:
            target = self._anchor_index().get(base)
            if target is None:
                self.ctx.unsupported("$ref", f"{ref!r} is not a reference inside this schema")
                return None
        if fragment and not fragment.startswith("/"):
            target = self._anchor_index().get("#" + fragment)
            if target is None:
                raise GrammarError(f"$ref {ref!r} does not resolve")
            return target
        for token in fragment.split("/")[1:] if fragment else []:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(target, list) and _is_index(token) and int(token) < len(target):
                target = target[int(token)]
            elif isinstance(target, dict) and token in target:
                target = target[token]
            else:
                raise GrammarError(f"$ref {ref!r} does not resolve")
        return target

    def _anchor_index(self) -> dict[str, Any]:
        """Subschemas by ``$id`` (as written) and ``#anchor`` (``$anchor`` or ``$id: "#a"``)."""
        if self.anchor_table is None:
            self.anchor_table = {}
            stack = [self.root]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    for keyword in ("$id", "id"):
                        value = node.get(keyword)
                        if isinstance(value, str):
                            self.anchor_table.setdefault(value.rstrip("#"), node)
                    if isinstance(node.get("$anchor"), str):
                        self.anchor_table.setdefault("#" + node["$anchor"], node)
                    stack.extend(v for k, v in node.items() if k not in ("enum", "const"))
                elif isinstance(node, list):
                    stack.extend(node)
        return self.anchor_table

    def _disjoint_branches(self, branches: list[list[Conjunction]]) -> bool:
        """Whether no value can match two ``oneOf`` options (then anyOf is exact)."""
        for index, left in enumerate(branches):
            for right in branches[index + 1 :]:
                for a in left:
                    for b in right:
                        try:
                            if not self._disjoint(a, b, 0):
                                return False
                        except GrammarError:
                            return False
        return True

    def _disjoint(self, a: Conjunction, b: Conjunction, depth: int) -> bool:
        common = kinds(a.types()) & kinds(b.types())
        if not common:
            return True
        for left, right in ((a, b), (b, a)):
            values = finite_values(self.ctx, left)
            if values is not None:
                return not any(all(self.ctx.is_valid(p, v) for p in right.parts) for v in values)
        return all(self._kind_disjoint(kind, a, b, depth) for kind in common)

    def _kind_disjoint(self, kind: str, a: Conjunction, b: Conjunction, depth: int) -> bool:
        if kind == "string":
            return string_dfa(self.ctx, a).is_empty() or _dfa_disjoint(
                string_dfa(self.ctx, a), string_dfa(self.ctx, b)
            )
        if kind == "number":
            return _dfa_disjoint(
                number_dfa(self.ctx, a, "number"), number_dfa(self.ctx, b, "number")
            )
        if kind != "object" or depth > 2:
            return False
        for name in required_names(a) | required_names(b):
            left, right = _property_schemas(a, name), _property_schemas(b, name)
            if (name in required_names(a) and False in right) or (
                name in required_names(b) and False in left
            ):
                return True
            if name in required_names(a) and name in required_names(b):
                lefts, rights = self.alternatives_of(left), self.alternatives_of(right)
                if all(self._disjoint(x, y, depth + 1) for x in lefts for y in rights):
                    return True
        return False

    def alternatives_of(self, schemas: list[Any]) -> list[Conjunction]:
        alternatives = [Conjunction(())]
        for schema in schemas:
            alternatives = self.conjoin(alternatives, self.alternatives(schema))
        return alternatives


def _is_index(token: str) -> bool:
    """Whether a JSON pointer token is an array index: ASCII digits, short enough that no
    array is longer."""
    return token.isascii() and token.isdigit() and len(token) <= 18


def _property_schemas(conjunction: Conjunction, name: str) -> list[Any]:
    return [v[name] for v in conjunction.values("properties") if name in v]


def _dfa_disjoint(left: Dfa, right: Dfa) -> bool:
    return intersect(left, right).is_empty()
