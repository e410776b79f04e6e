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
import math
from collections.abc import Hashable
from contextlib import closing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cad.grammar.cfg import char_automata, json_text, regex_pattern
from cad.grammar.cfg.char_automata import ACCEPT, ANY, AutomatonTooLarge, literal_dfa
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.json_text import (
    WHITESPACE_CHARS,
    RuleWriter,
    encoded_char,
    string_literal,
    whitespace_rule,
)
from cad.grammar.cfg.schema_arrays import array_expr, array_layouts, schemas_at
from cad.grammar.cfg.schema_context import (
    ARRAY_KEYWORDS,
    MAX_SCHEMA_DEPTH,
    NEVER_SUPPORTED,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    Conjunction,
)
from cad.grammar.cfg.schema_expansion import SchemaExpander
from cad.grammar.cfg.schema_negation import Negation, negate
from cad.grammar.cfg.schema_objects import Formula, ObjectBuilder
from cad.grammar.cfg.schema_scalars import finite_values, number_expr, string_expr
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


MAX_NUMBER_DIGITS = 1_000
"""Most digits (and other characters) in one number of a schema."""


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema becomes a grammar."""

    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    """White-space characters allowed between two tokens; 0 for compact JSON."""
    ignore_unsupported: bool = False
    """Leave out keywords that cannot be enforced instead of raising GrammarError."""
    file: bool = False
    """The value is a whole file: any white space before and after it (RFC 8259's ``ws
    value ws``, so a file may end with a newline), not only ``max_whitespace``."""


@dataclass(frozen=True)
class SchemaGrammar:
    """The rules of a schema, the keywords that were ignored to build them, and the schema's
    size as :func:`schema_length` measures it (the lowering's symbol budget follows it)."""

    rules: RuleSet
    ignored: tuple[str, ...]
    length: int


def load_schema_text(text: str) -> Any:
    """A JSON Schema read from JSON text, strictly: GrammarError for text that is not JSON,
    for ``NaN`` and ``Infinity``, for numbers a double cannot hold or longer than
    ``MAX_NUMBER_DIGITS``, and for nesting deeper than ``MAX_SCHEMA_DEPTH``."""
    try:
        schema = json.loads(
            text, parse_int=_integer, parse_float=_fraction, parse_constant=_not_a_number
        )
    except RecursionError:
        raise GrammarError(_too_deep()) from None
    except json.JSONDecodeError as error:
        raise GrammarError(
            f"the schema is not JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from None
    schema_length(schema)
    return schema


def schema_length(schema: Any) -> int:
    """About how many characters ``schema`` takes as JSON text; GrammarError for a schema
    nested deeper than ``MAX_SCHEMA_DEPTH`` or holding a number outside the bounds
    :func:`load_schema_text` enforces. Walks the schema with a stack of its own, so any
    depth is measured without recursion."""
    length = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        length += 1
        if isinstance(value, dict | list):
            if depth > MAX_SCHEMA_DEPTH:
                raise GrammarError(_too_deep())
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                length += len(key) if isinstance(key, str) else 0
                stack.append((item, depth + 1))
        elif isinstance(value, str):
            length += len(value)
        elif isinstance(value, float) and not math.isfinite(value):
            _not_a_number(repr(value))
        elif isinstance(value, int) and value.bit_length() > MAX_NUMBER_DIGITS * 3:
            raise GrammarError(_too_long_number(value.bit_length() * 3 // 10))
    return length


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_DIGITS:
        raise GrammarError(_too_long_number(len(text)))
    return int(text)


def _fraction(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS:
        raise GrammarError(_too_long_number(len(text)))
    value = float(text)
    if not math.isfinite(value):
        raise GrammarError(f"the number {text} is beyond what a double holds; write a smaller one")
    return value


def _not_a_number(text: str) -> Any:
    raise GrammarError(f"{text} is not a JSON number; write a finite number")


def _too_long_number(digits: int) -> str:
    return (
        f"a number of about {digits:,} digits; schema numbers have at most "
        f"{MAX_NUMBER_DIGITS:,} characters"
    )


def _too_deep() -> str:
    return (
        f"the schema nests more than {MAX_SCHEMA_DEPTH} levels deep (objects and arrays, "
        "or values and subschemas through $ref); flatten it"
    )


def schema_to_rules(schema: Any, options: SchemaOptions | None = None) -> RuleSet:
    """Translate a JSON Schema (a dict or a boolean) into grammar rules; start rule ``root``."""
    return translate_schema(schema, options).rules


def translate_schema(schema: Any, options: SchemaOptions | None = None) -> SchemaGrammar:
    """Translate a schema; also report which unsupported keywords were ignored. A schema
    nested deeper than ``MAX_SCHEMA_DEPTH`` or with numbers out of bounds is refused first
    (see :func:`schema_length`)."""
    length = schema_length(schema)
    try:
        with closing(_Translator(schema, options or SchemaOptions())) as translator:
            return translator.run(length)
    except RecursionError:  # a recursion the depth limits do not count: still one error
        raise GrammarError(_too_deep()) from None


def clear_memoised() -> None:
    """Forget what translation keeps across schemas (pattern automata, their set operations,
    character encodings, white-space chains), so that the next schema translates as the
    first one in a new process does: for measuring a first compile. Nothing else needs it;
    the kept pieces are bounded."""
    json_text.clear_memoised()
    char_automata.clear_memoised()
    _preamble.cache_clear()
    regex_pattern.pattern_dfa.cache_clear()


def in_grammar_order(instance: Any, schema: Any) -> Any:
    """``instance`` with the keys of every object in the order the grammar writes them:
    declared properties first, in schema order, then the others as they were. Where the
    schema branches (anyOf, oneOf, if), the first branch the instance is valid against
    decides. For checking existing documents against a grammar, whose key order is fixed."""
    with closing(_Translator(schema, SchemaOptions(ignore_unsupported=True))) as translator:
        return translator.order(instance, [schema])


class _Translator:
    def __init__(self, root: Any, options: SchemaOptions) -> None:
        self.root = root
        self.options = options
        preamble = _preamble(options.max_whitespace)
        self.rules: dict[str, Expr] = dict(preamble.rules)
        self.writer = RuleWriter(self.rules)
        self.writer.counter = preamble.counter
        self.ws = preamble.ws
        self.colon = preamble.colon
        self.ignored: set[str] = set()
        self.expander = SchemaExpander(self, root)
        self.conjunction_memo: dict[tuple[int, ...], Expr] = {}
        self.depth = 0
        """Values being translated inside one another (objects, arrays, ``$ref`` chains)."""
        self.validator: Any = None
        self.cache: dict[Hashable, Any] = {}
        self.naming = "not"
        self.fresh = self.writer.fresh
        self.define = self.writer.define
        self.chain = self.writer.chain
        self.dfa_body = self.writer.dfa_body
        self.dfa_keys = self.writer.dfa_keys
        self.literal_keys = self.writer.literal_keys

    def close(self) -> None:
        """Drop the expander once the translation is done: it refers back to the translator,
        and that cycle would keep every expression the translation made alive until Python's
        cyclic collector ran (hundreds to thousands of objects a schema, and a collection of
        a fraction of a millisecond inside the next compile or decode step)."""
        del self.expander

    def run(self, length: int) -> SchemaGrammar:
        value = self.value_expr([self.root])
        outer = Repeat(CharClass(WHITESPACE_CHARS), 0, None) if self.options.file else self.ws
        self.rules["root"] = Sequence((outer, value, outer))
        return SchemaGrammar(RuleSet(self.rules, "root"), tuple(sorted(self.ignored)), length)

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
        if self.depth >= MAX_SCHEMA_DEPTH:
            raise GrammarError(_too_deep())
        self.depth += 1
        try:
            alternatives = self.expander.alternatives_of(schemas)
            options = list(dict.fromkeys(self._conjunction_expr(a) for a in alternatives))
        finally:
            self.depth -= 1
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def schema_alternatives(self, schema: Any) -> list[Conjunction]:
        return self.expander.alternatives(schema)

    def order(self, value: Any, schemas: list[Any]) -> Any:
        """See ``in_grammar_order``."""
        if not isinstance(value, dict | list):
            return value
        try:
            alternatives = self.expander.alternatives_of(schemas)
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
        layout = ObjectBuilder(self, chosen, [])
        names = [name for name in layout.names if name in value]
        names += [key for key in value if key not in layout.names]
        return {key: self.order(value[key], layout.value_schemas(key)) for key in names}

    def _valid_or_false(self, schema: Any, value: Any) -> bool:
        try:
            return self.is_valid(schema, value)
        except GrammarError:
            return False

    # ------------------------------------------------------------ expansion

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
        for keyword, reason in NEVER_SUPPORTED.items():
            if conjunction.has(keyword):
                self.unsupported(keyword, reason)
        values = finite_values(self, conjunction)
        if values is not None:
            return self._finite_options(values)
        negation = Negation(conjunction.types(), [], [], set(), [])
        for part in conjunction.parts:
            negated = part.get("not")
            if negated is not None and id(negated) not in self.expander.expanded_negations:
                self.naming = self.expander.origins.get(id(part), "not")
                try:
                    negate(self, negated, negation)
                finally:
                    self.naming = "not"
        return self._typed_options(conjunction, negation)

    def _finite_options(self, values: list[Any]) -> list[Expr]:
        """The values as alternatives. Several strings become one trie of right-linear rules
        (``dfa_keys``), and several numbers another (``dfa_words``, every spelling of each):
        a trie stays deterministic and as large as the values' text however many there are,
        where an alternative per value would make the parser carry them all at every step.
        The few other values (``true``, objects, ...) are alternatives of their own."""
        strings = [value for value in values if isinstance(value, str)]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        options = [
            self.literal(value)
            for value in values
            if not isinstance(value, str | int | float) or isinstance(value, bool)
        ]
        if len(strings) > 1:
            trie = self.dfa_keys("enum", literal_dfa((text, ACCEPT) for text in strings))
            options += trie.values()
        else:
            options += map(string_literal, strings)
        if len(numbers) > 1:
            texts = (text for number in numbers for text in _number_texts(number))
            options.append(self.writer.dfa_words("enum", literal_dfa((t, ACCEPT) for t in texts)))
        else:
            options += map(self.literal, numbers)
        return list(dict.fromkeys(options))

    def _typed_options(self, conjunction: Conjunction, negation: Negation) -> list[Expr]:
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
        return ObjectBuilder(self, conjunction, formulas).build()

    def _array(self, conjunction: Conjunction) -> Expr | None:
        if not any(conjunction.has(k) for k in ARRAY_KEYWORDS):
            return RuleRef("json-array")
        return array_expr(self, conjunction)

    # ------------------------------------------------------------ literals and base rules

    def literal(self, value: Any) -> Expr:
        """A JSON value equal to ``value``, white space allowed inside."""
        ws = self.ws
        if value is None or isinstance(value, bool):
            return Literal(json.dumps(value))
        if isinstance(value, int | float):
            options = tuple(Literal(text) for text in _number_texts(value))
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


@dataclass(frozen=True)
class _Preamble:
    """The rules every schema's grammar starts with for one white-space bound: the white-space
    chains and the plain JSON values, with the fresh-name counter after them."""

    rules: dict[str, Expr]
    counter: int
    ws: Expr
    colon: Expr


@lru_cache(maxsize=16)
def _preamble(max_whitespace: int) -> _Preamble:
    """The preamble, written once per bound and copied by each translation (its expressions
    are values): about a tenth of a small schema's translation otherwise."""
    writer = RuleWriter({})
    ws = whitespace_rule(writer, "ws", max_whitespace)
    inline = whitespace_rule(writer, "ws-inline", min(max_whitespace, INLINE_WHITESPACE))
    colon = Sequence((inline, Literal(":"), inline))
    rule = RuleRef
    writer.define("json-char", [encoded_char(ANY, every_escape=True)])
    writer.define(
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
    writer.define("json-integer", [integer])
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
    writer.define("json-number", [Sequence((rule("json-integer"), fraction, exponent))])
    member = Sequence((rule("json-string"), colon, rule("json-value"), ws))
    writer.define(
        "json-object",
        [
            Sequence(
                (
                    Literal("{"),
                    ws,
                    Repeat(
                        Sequence((member, Repeat(Sequence((Literal(","), ws, member)), 0, None))),
                        0,
                        1,
                    ),
                    Literal("}"),
                )
            )
        ],
    )
    item = Sequence((rule("json-value"), ws))
    writer.define(
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
    writer.define(
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

    return _Preamble(writer.rules, writer.counter, ws, colon)


def _number_texts(value: int | float) -> list[str]:
    """The spellings a number is written in: as JSON writes it, and an integral value also
    with (or without) ``.0``."""
    texts = [json.dumps(value)]
    if isinstance(value, float) and value.is_integer():
        texts.append(str(int(value)))
    elif isinstance(value, int):
        texts.append(f"{value}.0")
    return texts


def _same_json(left: Any, right: Any) -> bool:
    """Equal as JSON values (key order aside)."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _joined(items: list[Expr], ws: Expr) -> Expr:
    if not items:
        return EMPTY
    rest = [Sequence((Literal(","), ws, item)) for item in items[1:]]
    return Sequence((items[0], *rest))


def _first(conjunction: Conjunction, keywords: tuple[str, ...]) -> str:
    """The first of ``keywords`` the conjunction has (to name in an error)."""
    return next((k for k in keywords if conjunction.has(k)), keywords[0])
