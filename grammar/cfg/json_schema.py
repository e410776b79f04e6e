"""JSON Schema -> grammar rules for JSON as it is written (see docs/json-schema.md).

Every schema is first expanded into *alternatives* (``$ref``, ``allOf``, ``anyOf``,
``oneOf``, ``if``/``then``/``else`` and schema-valued dependencies): each alternative is a
conjunction of subschemas whose own keywords must all hold. A conjunction with ``enum`` or
``const`` is a finite set, decided value by value with the ``jsonschema`` validator, so
every keyword next to it (``not``, ``multipleOf``, ``oneOf``'s exclusivity, ...) holds
exactly. Otherwise each JSON type the conjunction allows gets its rules: strings and
numbers as minimal character automata, objects as member chains, arrays as counted chains.

Between any two tokens, JSON white space is allowed, at most ``max_whitespace`` characters
(0: compact JSON), so a model cannot loop on white space. A keyword the grammar cannot
enforce raises ``GrammarError`` naming it, unless ``ignore_unsupported`` is set: then it is
left out (the grammar accepts more) and reported in ``SchemaGrammar.ignored``. Keywords
that are not JSON Schema keywords, ``format``s without a checker, and annotations are
ignored, as the specification says."""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from cad.grammar.cfg.char_automata import ANY, AutomatonTooLarge, Dfa, intersect, literal_dfa
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.json_text import RuleWriter, encoded_char, string_literal, whitespace_rule
from cad.grammar.cfg.schema_arrays import ARRAY_KEYWORDS, array_expr, array_layouts, schemas_at
from cad.grammar.cfg.schema_context import APPLICATORS, TYPES, Conjunction
from cad.grammar.cfg.schema_objects import OBJECT_KEYWORDS, Formula, ObjectBuilder, presence_formula
from cad.grammar.cfg.schema_scalars import (
    NUMBER_KEYWORDS,
    STRING_KEYWORDS,
    finite_values,
    has_number_constraints,
    has_string_constraints,
    number_dfa,
    number_expr,
    string_dfa,
    string_expr,
)
from cad.grammar.cfg.schema_validation import validator_for_root
from cad.grammar.cfg.syntax_tree import (
    EMPTY,
    CharClass,
    Choice,
    Expr,
    Literal,
    Repeat,
    RuleRef,
    RuleSet,
    Sequence,
)

DEFAULT_MAX_WHITESPACE = 64
"""White-space characters allowed between two tokens: ``json.dumps(x, indent=4)`` fits up
to 15 levels deep (``indent=2``: 31), CRLF line ends included."""
INLINE_WHITESPACE = 16
"""White-space characters allowed around a colon (``{"a" : 1}``): values never start on
a new line in the JSON people write, and a small bound keeps the grammar small."""
MAX_ALTERNATIVES = 256
KNOWN_KEYWORDS = (
    APPLICATORS | STRING_KEYWORDS | NUMBER_KEYWORDS | OBJECT_KEYWORDS | ARRAY_KEYWORDS
    | {"not", "enum", "const", "type", "format", "$dynamicRef", "$recursiveRef",
       "unevaluatedProperties", "unevaluatedItems"}
)  # fmt: skip
_NEVER_SUPPORTED = {
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "recursive references are not supported; use $ref",
    "unevaluatedProperties": "it depends on what other keywords evaluated",
    "unevaluatedItems": "it depends on what other keywords evaluated",
}


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema becomes a grammar."""

    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    """White-space characters allowed between two tokens; 0 for compact JSON."""
    ignore_unsupported: bool = False
    """Leave out keywords that cannot be enforced instead of raising GrammarError."""


@dataclass(frozen=True)
class SchemaGrammar:
    """The rules of a schema and the keywords that were ignored to build them."""

    rules: RuleSet
    ignored: tuple[str, ...]


def schema_to_rules(schema: Any, options: SchemaOptions | None = None) -> RuleSet:
    """Translate a JSON Schema (a dict or a boolean) into grammar rules; start rule ``root``."""
    return translate_schema(schema, options).rules


def translate_schema(schema: Any, options: SchemaOptions | None = None) -> SchemaGrammar:
    """Translate a schema; also report which unsupported keywords were ignored."""
    return _Translator(schema, options or SchemaOptions()).run()


def in_grammar_order(instance: Any, schema: Any) -> Any:
    """``instance`` with the keys of every object in the order the grammar writes them:
    declared properties first, in schema order, then the others as they were. Where the
    schema branches (anyOf, oneOf, if), the first branch the instance is valid against
    decides. For checking existing documents against a grammar, whose key order is fixed."""
    return _Translator(schema, SchemaOptions(ignore_unsupported=True)).order(instance, [schema])


class _ReferenceCycle(GrammarError):
    """A ``$ref`` / ``allOf`` chain that returns to itself without a value in between."""


@dataclass
class _Negation:
    """What the ``not`` keywords of a conjunction take away, per JSON type."""

    types: set[str]
    strings: list[Dfa]
    numbers: list[Dfa]
    literals: set[str]
    formulas: list[Formula]


class _Translator:
    def __init__(self, root: Any, options: SchemaOptions) -> None:
        self.root = root
        self.options = options
        self.rules: dict[str, Expr] = {}
        self.writer = RuleWriter(self.rules)
        self.ws = whitespace_rule(self.writer, "ws", options.max_whitespace)
        inline = whitespace_rule(
            self.writer, "ws-inline", min(options.max_whitespace, INLINE_WHITESPACE)
        )
        self.colon = Sequence((inline, Literal(":"), inline))
        self.ignored: set[str] = set()
        self.synthetic: list[dict[str, Any]] = []
        self.alternatives_memo: dict[int, list[Conjunction]] = {}
        self.expanding: set[int] = set()
        self.conjunction_memo: dict[tuple[int, ...], Expr] = {}
        self.validator: Any = None
        self.anchors: dict[str, Any] | None = None
        self.cache: dict[Hashable, Any] = {}
        self.expanded_negations: set[int] = set()
        self.origins: dict[int, str] = {}
        self.naming = "not"
        self.fresh = self.writer.fresh
        self.define = self.writer.define
        self.chain = self.writer.chain
        self.dfa_body = self.writer.dfa_body
        self.dfa_keys = self.writer.dfa_keys

    def run(self) -> SchemaGrammar:
        self._base_rules()
        value = self.value_expr([self.root])
        self.rules["root"] = Sequence((self.ws, value, self.ws))
        return SchemaGrammar(RuleSet(self.rules, "root"), tuple(sorted(self.ignored)))

    # ------------------------------------------------------------ services (SchemaContext)

    def unsupported(self, keyword: str, detail: str) -> None:
        if keyword == "not" and self.naming != "not":
            keyword, detail = self.naming, f"it needs a 'not' that cannot be enforced: {detail}"
        if not self.options.ignore_unsupported:
            raise GrammarError(
                f"JSON Schema keyword {keyword!r} cannot be enforced: {detail} "
                "(ignore_unsupported / --ignore-unsupported leaves it out)"
            )
        self.ignored.add(keyword)

    def is_valid(self, schema: Any, instance: Any) -> bool:
        if self.validator is None:
            self.validator = validator_for_root(self.root)
        try:
            return bool(self.validator.evolve(schema=schema).is_valid(instance))
        except Exception as error:  # the validator's errors for unresolvable or bad schemas
            raise GrammarError(
                f"cannot validate {instance!r} against the schema: {error}"
            ) from None

    def value_expr(self, schemas: list[Any]) -> Expr:
        alternatives = [Conjunction(())]
        for schema in schemas:
            alternatives = self._conjoin(alternatives, self.schema_alternatives(schema))
        options = list(dict.fromkeys(self._conjunction_expr(a) for a in alternatives))
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def schema_alternatives(self, schema: Any) -> list[Conjunction]:
        if schema is True:
            return [Conjunction(())]
        if schema is False:
            return []
        if not isinstance(schema, dict):
            raise GrammarError(f"a schema must be an object or a boolean, not {schema!r}")
        key = id(schema)
        if key in self.alternatives_memo:
            return self.alternatives_memo[key]
        if key in self.expanding:
            raise _ReferenceCycle(
                "a $ref or allOf refers back to itself without a value in between"
            )
        self.expanding.add(key)
        try:
            result = self._expand(schema)
        finally:
            self.expanding.discard(key)
        self.alternatives_memo[key] = result
        return result

    def order(self, value: Any, schemas: list[Any]) -> Any:
        """See ``in_grammar_order``."""
        if not isinstance(value, dict | list):
            return value
        try:
            alternatives = self._alternatives_of(schemas)
        except GrammarError:
            return value
        chosen = next(
            (a for a in alternatives if all(self._valid_or_false(p, value) for p in a.parts)),
            alternatives[0] if alternatives else None,
        )
        if chosen is None:
            return value
        try:
            values = finite_values(self, chosen)
        except GrammarError:
            values = None
        if values is not None:
            return next((v for v in values if _same_json(v, value)), value)
        if isinstance(value, list):
            layouts = array_layouts(chosen)
            return [self.order(item, schemas_at(layouts, i)) for i, item in enumerate(value)]
        layout = ObjectBuilder(self, chosen, [], KNOWN_KEYWORDS)
        names = [name for name in layout.names if name in value]
        names += [key for key in value if key not in layout.names]
        return {key: self.order(value[key], layout.value_schemas(key)) for key in names}

    def _valid_or_false(self, schema: Any, value: Any) -> bool:
        try:
            return self.is_valid(schema, value)
        except GrammarError:
            return False

    # ------------------------------------------------------------ expansion

    def _expand(self, schema: dict[str, Any]) -> list[Conjunction]:
        result = [Conjunction((schema,))]
        if "$ref" in schema:
            target = self._resolve(schema["$ref"])
            if target is not None:
                result = self._conjoin(result, self.schema_alternatives(target))
        for sub in schema.get("allOf", []):
            result = self._conjoin(result, self.schema_alternatives(sub))
        if "anyOf" in schema:
            options = [a for option in schema["anyOf"] for a in self.schema_alternatives(option)]
            result = self._conjoin(result, options)
        if "oneOf" in schema:
            result = self._conjoin(result, self._exactly_one(schema["oneOf"], result))
        if "not" in schema:
            branches = self._object_negation(schema["not"])
            if branches is not None:
                self.expanded_negations.add(id(schema["not"]))
                options = [a for branch in branches for a in self.schema_alternatives(branch)]
                result = self._conjoin(result, options)
        if "if" in schema:
            condition = schema["if"]
            then = self._conjoin(
                self.schema_alternatives(condition),
                self.schema_alternatives(schema.get("then", True)),
            )
            negated = self._synthetic({"not": condition}, origin="if")
            otherwise = self._conjoin(
                self.schema_alternatives(negated),
                self.schema_alternatives(schema.get("else", True)),
            )
            result = self._conjoin(result, then + otherwise)
        for keyword in ("dependencies", "dependentSchemas"):
            for trigger, then in schema.get(keyword, {}).items():
                if isinstance(then, list) or presence_formula(then, KNOWN_KEYWORDS) is not None:
                    continue
                present = self._conjoin(
                    self.schema_alternatives(self._synthetic({"required": [trigger]})),
                    self.schema_alternatives(then),
                )
                absent = self.schema_alternatives(self._synthetic({"properties": {trigger: False}}))
                result = self._conjoin(result, present + absent)
        return result

    def _object_negation(self, negated: Any) -> list[dict[str, Any]] | None:
        """``not`` over objects described by ``required`` and ``properties`` with value
        schemas (what ``if`` discriminators look like), as alternatives: some required key
        is missing, or some declared key holds a value its schema rejects, or the value is
        of a type the negated schema does not accept. None when ``negated`` says more (the
        typed translation then handles it) or only speaks of presence (kept as a formula)."""
        if presence_formula(negated, KNOWN_KEYWORDS) is not None:
            return None
        alternatives = self.schema_alternatives(negated)
        result: list[dict[str, Any]] = [{}]
        for alternative in alternatives:
            branches = self._negated_alternative(alternative)
            if branches is None:
                return None
            result = [{"allOf": [a, b]} for a in result for b in branches]
            if len(result) > MAX_ALTERNATIVES:
                return None
        return [self._synthetic(branch) for branch in result]

    def _negated_alternative(self, alternative: Conjunction) -> list[dict[str, Any]] | None:
        types = alternative.types()
        if alternative.has("not") or finite_values(self, alternative) is not None:
            return None
        if "integer" in types and "number" not in types:
            return None
        allowed = {"required", "properties", "type"}
        if any(k in KNOWN_KEYWORDS and k not in allowed for k, _ in alternative.pairs()):
            return None
        others = sorted(set(TYPES) - types - {"integer"})
        branches: list[dict[str, Any]] = [{"type": others}] if others else []
        if "object" in types:
            for name in _required(alternative):
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
        return [self._synthetic(branch) for branch in branches]

    def _exactly_one(self, options: list[Any], context: list[Conjunction]) -> list[Conjunction]:
        """Alternatives for ``oneOf``: its options when no two can overlap together with
        their ``context`` (the keywords beside the ``oneOf``), otherwise each option with the
        negation of all the others."""
        branches = [self.schema_alternatives(option) for option in options]
        if not self._disjoint_branches([self._conjoin(context, b) for b in branches]):
            branches = []
            for index, option in enumerate(options):
                alternatives = self.schema_alternatives(option)
                for other in options[:index] + options[index + 1 :]:
                    negated = self._synthetic({"not": other}, origin="oneOf")
                    alternatives = self._conjoin(alternatives, self.schema_alternatives(negated))
                branches.append(alternatives)
        return [a for branch in branches for a in branch]

    def _synthetic(self, schema: dict[str, Any], origin: str | None = None) -> dict[str, Any]:
        """Keep a schema made up here alive (conjunctions are keyed by identity); ``origin``
        is the keyword to name when its ``not`` cannot be enforced."""
        self.synthetic.append(schema)
        if origin is not None:
            self.origins[id(schema)] = origin
        return schema

    def _conjoin(self, left: list[Conjunction], right: list[Conjunction]) -> list[Conjunction]:
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
                self.unsupported("$ref", f"{ref!r} is not a reference inside this schema")
                return None
        if fragment and not fragment.startswith("/"):
            target = self._anchor_index().get("#" + fragment)
            if target is None:
                raise GrammarError(f"$ref {ref!r} does not resolve")
            return target
        for token in fragment.split("/")[1:] if fragment else []:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            elif isinstance(target, dict) and token in target:
                target = target[token]
            else:
                raise GrammarError(f"$ref {ref!r} does not resolve")
        return target

    def _anchor_index(self) -> dict[str, Any]:
        """Subschemas by ``$id`` (as written) and ``#anchor`` (``$anchor`` or ``$id: "#a"``)."""
        if self.anchors is None:
            self.anchors = {}
            stack = [self.root]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    for keyword in ("$id", "id"):
                        value = node.get(keyword)
                        if isinstance(value, str):
                            self.anchors.setdefault(value.rstrip("#"), node)
                    if isinstance(node.get("$anchor"), str):
                        self.anchors.setdefault("#" + node["$anchor"], node)
                    stack.extend(v for k, v in node.items() if k not in ("enum", "const"))
                elif isinstance(node, list):
                    stack.extend(node)
        return self.anchors

    # ------------------------------------------------------------ oneOf

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
        common = _kinds(a.types()) & _kinds(b.types())
        if not common:
            return True
        for left, right in ((a, b), (b, a)):
            values = finite_values(self, left)
            if values is not None:
                return not any(all(self.is_valid(p, v) for p in right.parts) for v in values)
        return all(self._kind_disjoint(kind, a, b, depth) for kind in common)

    def _kind_disjoint(self, kind: str, a: Conjunction, b: Conjunction, depth: int) -> bool:
        if kind == "string":
            return string_dfa(self, a).is_empty() or _dfa_disjoint(
                string_dfa(self, a), string_dfa(self, b)
            )
        if kind == "number":
            return _dfa_disjoint(number_dfa(self, a, "number"), number_dfa(self, b, "number"))
        if kind != "object" or depth > 2:
            return False
        for name in _required(a) | _required(b):
            left, right = _property_schemas(a, name), _property_schemas(b, name)
            if (name in _required(a) and False in right) or (
                name in _required(b) and False in left
            ):
                return True
            if name in _required(a) and name in _required(b):
                lefts, rights = self._alternatives_of(left), self._alternatives_of(right)
                if all(self._disjoint(x, y, depth + 1) for x in lefts for y in rights):
                    return True
        return False

    def _alternatives_of(self, schemas: list[Any]) -> list[Conjunction]:
        alternatives = [Conjunction(())]
        for schema in schemas:
            alternatives = self._conjoin(alternatives, self.schema_alternatives(schema))
        return alternatives

    # ------------------------------------------------------------ conjunctions

    def _conjunction_expr(self, conjunction: Conjunction) -> Expr:
        key = conjunction.key
        found = self.conjunction_memo.get(key)
        if found is not None:
            return found
        if not conjunction.parts:
            return RuleRef("json-value")
        name = self.fresh("value")
        reference = self.conjunction_memo[key] = RuleRef(name)
        options = self._conjunction_options(conjunction)
        self.rules[name] = options[0] if len(options) == 1 else Choice(tuple(options))
        return reference

    def _conjunction_options(self, conjunction: Conjunction) -> list[Expr]:
        for keyword, reason in _NEVER_SUPPORTED.items():
            if conjunction.has(keyword):
                self.unsupported(keyword, reason)
        values = finite_values(self, conjunction)
        if values is not None:
            return list(dict.fromkeys(self.literal(value) for value in values))
        negation = _Negation(conjunction.types(), [], [], set(), [])
        for part in conjunction.parts:
            negated = part.get("not")
            if negated is not None and id(negated) not in self.expanded_negations:
                self.naming = self.origins.get(id(part), "not")
                try:
                    self._negate(negated, negation)
                finally:
                    self.naming = "not"
        return self._typed_options(conjunction, negation)

    def _typed_options(self, conjunction: Conjunction, negation: _Negation) -> list[Expr]:
        types = negation.types
        options: list[Expr | None] = []
        for word in ("null", "true", "false"):
            kind = "null" if word == "null" else "boolean"
            if kind in types and word not in negation.literals:
                options.append(Literal(word))
        if "string" in types:
            options.append(
                self._bounded_size(
                    lambda: string_expr(self, conjunction, negation.strings),
                    _first(conjunction, ("pattern", "format", "maxLength", "minLength", "not")),
                    RuleRef("json-string"),
                )
            )
        if types & {"number", "integer"}:
            integer = "number" not in types
            options.append(
                self._bounded_size(
                    lambda: number_expr(self, conjunction, integer, negation.numbers),
                    _first(conjunction, ("multipleOf", *sorted(NUMBER_KEYWORDS), "not")),
                    RuleRef("json-integer" if integer else "json-number"),
                )
            )
        if "object" in types:
            options.append(self._object(conjunction, negation.formulas))
        if "array" in types:
            options.append(self._array(conjunction))
        return [option for option in options if option is not None]

    def _bounded_size(self, build: Any, keyword: str, fallback: Expr) -> Expr | None:
        """``build()``, or (when its automaton would be too large and the caller ignores
        ``keyword``) the unconstrained ``fallback``."""
        try:
            return build()
        except AutomatonTooLarge as error:
            self.unsupported(keyword, f"its automaton is too large ({error})")
            return fallback

    def _object(self, conjunction: Conjunction, formulas: list[Formula]) -> Expr | None:
        if not formulas and not any(conjunction.has(k) for k in OBJECT_KEYWORDS):
            return RuleRef("json-object")
        return ObjectBuilder(self, conjunction, formulas, KNOWN_KEYWORDS).build()

    def _array(self, conjunction: Conjunction) -> Expr | None:
        if not any(conjunction.has(k) for k in ARRAY_KEYWORDS):
            return RuleRef("json-array")
        return array_expr(self, conjunction)

    def _negate(self, schema: Any, negation: _Negation) -> None:
        """Take away from ``negation.types`` what ``schema`` accepts (``not`` is the
        conjunction of the negated alternatives)."""
        try:
            self._negate_alternatives(schema, negation)
        except AutomatonTooLarge as error:
            self.unsupported("not", f"its automaton is too large ({error})")

    def _negate_alternatives(self, schema: Any, negation: _Negation) -> None:
        for alternative in self.schema_alternatives(schema):
            values = finite_values(self, alternative)
            nested = alternative.has("not")
            for kind in sorted(_kinds(negation.types) & _kinds(alternative.types())):
                if values is not None:
                    self._negate_values(kind, alternative, values, negation)
                elif kind == "string":
                    if has_string_constraints(alternative) or nested or _lengths(alternative):
                        negation.strings.append(string_dfa(self, alternative))
                    else:
                        negation.types.discard("string")
                elif kind == "number":
                    self._negate_numbers(alternative, nested, negation)
                elif kind in ("boolean", "null"):
                    if nested:
                        self.unsupported("not", f"a 'not' inside 'not' for {kind} values")
                    else:
                        negation.types.discard(kind)
                elif kind == "object":
                    self._negate_objects(alternative, nested, negation)
                elif kind == "array":
                    if nested or any(alternative.has(k) for k in ARRAY_KEYWORDS):
                        self.unsupported("not", "excluding arrays by their items or length")
                    else:
                        negation.types.discard("array")

    def _negate_values(
        self, kind: str, alternative: Conjunction, values: list[Any], negation: _Negation
    ) -> None:
        chosen = [v for v in values if _kind_of(v) == kind]
        if not chosen:
            return
        if kind == "string":
            negation.strings.append(literal_dfa((v, "accept") for v in chosen))
        elif kind == "number":
            negation.numbers.append(number_dfa(self, alternative, "number"))
        elif kind in ("boolean", "null"):
            negation.literals.update(json.dumps(v) for v in chosen)
        else:
            self.unsupported("not", f"excluding particular {kind} values")

    def _negate_numbers(self, alternative: Conjunction, nested: bool, negation: _Negation) -> None:
        types = alternative.types()
        if has_number_constraints(alternative) or nested:
            negation.numbers.append(number_dfa(self, alternative, "number"))
        elif "number" in types:
            negation.types.difference_update({"number", "integer"})
        elif "number" in negation.types:
            negation.numbers.append(number_dfa(self, alternative, "integral"))
        else:
            negation.types.discard("integer")

    def _negate_objects(self, alternative: Conjunction, nested: bool, negation: _Negation) -> None:
        relevant = [k for k in OBJECT_KEYWORDS if alternative.has(k)]
        if not relevant and not nested:
            negation.types.discard("object")
            return
        formula = presence_formula(
            {
                k: v
                for part in alternative.parts
                for k, v in part.items()
                if k in ("required", "properties", "not")
            },
            KNOWN_KEYWORDS,
        )
        if formula is None or any(k not in ("required", "properties") for k in relevant):
            self.unsupported("not", "excluding objects by more than which keys are present")
            return
        negation.formulas.append(("not", formula))

    # ------------------------------------------------------------ literals and base rules

    def literal(self, value: Any) -> Expr:
        """A JSON value equal to ``value``, white space allowed inside."""
        ws = self.ws
        if value is None or isinstance(value, bool):
            return Literal(json.dumps(value))
        if isinstance(value, int | float):
            texts = [json.dumps(value)]
            if isinstance(value, float) and value.is_integer():
                texts.append(str(int(value)))
            elif isinstance(value, int):
                texts.append(f"{value}.0")
            options = tuple(Literal(text) for text in texts)
            return options[0] if len(options) == 1 else Choice(options)
        if isinstance(value, str):
            return string_literal(value)
        if isinstance(value, list):
            items = [Sequence((self.literal(item), ws)) for item in value]
            joined = _joined(items, ws)
            return Sequence((Literal("["), ws, joined, Literal("]")))
        if isinstance(value, dict):
            members = [
                Sequence((string_literal(key), self.colon, self.literal(item), ws))
                for key, item in value.items()
            ]
            return Sequence((Literal("{"), ws, _joined(members, ws), Literal("}")))
        raise GrammarError(f"{value!r} is not a JSON value")

    def _base_rules(self) -> None:
        ws = self.ws
        rule = RuleRef
        self.define("json-char", [encoded_char(ANY, every_escape=True)])
        self.define(
            "json-string",
            [Sequence((Literal('"'), Repeat(rule("json-char"), 0, None), Literal('"')))],
        )
        digits = CharClass(((48, 57),))
        integer = Sequence(
            (
                Repeat(Literal("-"), 0, 1),
                Choice((Literal("0"), Sequence((CharClass(((49, 57),)), Repeat(digits, 0, None))))),
            )
        )
        self.define("json-integer", [integer])
        fraction = Repeat(Sequence((Literal("."), Repeat(digits, 1, None))), 0, 1)
        exponent = Repeat(
            Sequence(
                (
                    CharClass(((69, 69), (101, 101))),
                    Repeat(CharClass(((43, 43), (45, 45))), 0, 1),
                    Repeat(digits, 1, None),
                )
            ),
            0,
            1,
        )
        self.define("json-number", [Sequence((rule("json-integer"), fraction, exponent))])
        member = Sequence((rule("json-string"), self.colon, rule("json-value"), ws))
        self.define(
            "json-object",
            [
                Sequence(
                    (
                        Literal("{"),
                        ws,
                        Repeat(
                            Sequence(
                                (member, Repeat(Sequence((Literal(","), ws, member)), 0, None))
                            ),
                            0,
                            1,
                        ),
                        Literal("}"),
                    )
                )
            ],
        )
        item = Sequence((rule("json-value"), ws))
        self.define(
            "json-array",
            [
                Sequence(
                    (
                        Literal("["),
                        ws,
                        Repeat(
                            Sequence((item, Repeat(Sequence((Literal(","), ws, item)), 0, None))),
                            0,
                            1,
                        ),
                        Literal("]"),
                    )
                )
            ],
        )
        self.define(
            "json-value",
            [
                rule("json-object"),
                rule("json-array"),
                rule("json-string"),
                rule("json-number"),
                Literal("true"),
                Literal("false"),
                Literal("null"),
            ],
        )


def _same_json(left: Any, right: Any) -> bool:
    """Equal as JSON values (key order aside)."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _joined(items: list[Expr], ws: Expr) -> Expr:
    if not items:
        return EMPTY
    rest = [Sequence((Literal(","), ws, item)) for item in items[1:]]
    return Sequence((items[0], *rest))


def _kinds(types: set[str]) -> set[str]:
    """JSON types with integers folded into numbers."""
    return {"number" if t == "integer" else t for t in types}


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _first(conjunction: Conjunction, keywords: tuple[str, ...]) -> str:
    """The first of ``keywords`` the conjunction has (to name in an error)."""
    return next((k for k in keywords if conjunction.has(k)), keywords[0])


def _lengths(conjunction: Conjunction) -> bool:
    return conjunction.has("minLength") or conjunction.has("maxLength")


def _required(conjunction: Conjunction) -> set[str]:
    return {name for value in conjunction.values("required") for name in value}


def _property_schemas(conjunction: Conjunction, name: str) -> list[Any]:
    return [v[name] for v in conjunction.values("properties") if name in v]


def _dfa_disjoint(left: Dfa, right: Dfa) -> bool:
    return intersect(left, right).is_empty()
