"""Objects: declared members in schema order, presence constraints, extra keys by region.

Declared properties (from ``properties``, ``required`` and the dependency keywords of every
part) appear in the order they are first declared; optional ones may be left out. Keys
that are not declared come after them, each with the value schema of its *region*: the
set of ``patternProperties`` it matches, or ``additionalProperties`` when it matches none
(``propertyNames`` narrows every key). All keys, declared and extra, are read by one
deterministic automaton, so the parser knows which member it is in when the key closes.

Which members are present is tracked as the members are read: ``required``,
``dependentRequired`` / ``dependencies`` (and their schema forms when they only speak of
presence, e.g. ``{"not": {"required": ["b"]}}``), ``minProperties`` / ``maxProperties``.
Every rule is a state of that bookkeeping, and states with no valid ending are left out,
so the parser can never enter a dead end."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from cad.grammar.cfg.char_automata import (
    Dfa,
    any_string,
    intersect,
    literal_dfa,
    minimize,
    product,
    subtract,
    union,
)
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.regex_pattern import pattern_dfa
from cad.grammar.cfg.schema_context import (
    KNOWN_KEYWORDS,
    MAX_COUNTED,
    Conjunction,
    SchemaContext,
)
from cad.grammar.cfg.schema_scalars import count_value, string_dfa
from cad.grammar.cfg.syntax_tree import EMPTY, Choice, Expr, Literal, RuleRef, Sequence

Formula = tuple[Any, ...]
"""Presence formula: ``("has", name)``, ``("not", f)``, ``("and", fs)``, ``("or", fs)``,
``("const", bool)``."""

MAX_OBJECT_STATES = 20_000
"""Most member states one object may need. A state is where the member list stands: the
next declared property, which of the properties that dependencies speak of are present,
and how many members there are so far (with ``minProperties`` / ``maxProperties``). Counts
multiply the states by the bound, dependencies by two per property they name, so a schema
of a few lines could ask for billions; past this limit the keyword is refused (or left
out under ``ignore_unsupported``)."""


class _TooManyStates(Exception):
    """The member states of one object passed ``MAX_OBJECT_STATES``."""


_PRESENCE_KEYWORDS = frozenset({"required", "not", "anyOf", "allOf", "oneOf", "properties", "type"})


def presence_formula(schema: Any) -> Formula | None:
    """The schema as a formula over which keys are present, if that is all it says about an
    object; None otherwise."""
    if isinstance(schema, bool):
        return ("const", schema)
    if not isinstance(schema, dict):
        return None
    terms: list[Formula] = []
    for keyword, value in schema.items():
        if keyword not in KNOWN_KEYWORDS:
            continue
        if keyword not in _PRESENCE_KEYWORDS:
            return None
        if keyword == "type":
            named = {value} if isinstance(value, str) else set(value)
            terms.append(("const", "object" in named))
        elif keyword == "required":
            terms.append(("and", tuple(("has", name) for name in value)))
        elif keyword == "properties":
            for name, sub in value.items():
                if sub is False:
                    terms.append(("not", ("has", name)))
                elif sub is not True and sub != {}:
                    return None
        elif keyword == "not":
            inner = presence_formula(value)
            if inner is None:
                return None
            terms.append(("not", inner))
        else:
            options = [presence_formula(option) for option in value]
            if any(option is None for option in options):
                return None
            if keyword == "oneOf":
                options = [
                    ("and", (option, *(("not", o) for o in options if o is not option)))
                    for option in options
                ]
            terms.append(("and" if keyword == "allOf" else "or", tuple(options)))
    return ("and", tuple(terms))


def holds(formula: Formula, present: frozenset[str]) -> bool:
    """Whether the formula holds when exactly ``present`` (among its names) are present."""
    kind = formula[0]
    if kind == "has":
        return formula[1] in present
    if kind == "const":
        return bool(formula[1])
    if kind == "not":
        return not holds(formula[1], present)
    if kind == "and":
        return all(holds(f, present) for f in formula[1])
    return any(holds(f, present) for f in formula[1])


def names_in(formula: Formula) -> set[str]:
    """The property names a formula mentions."""
    kind = formula[0]
    if kind == "has":
        return {formula[1]}
    if kind == "not":
        return names_in(formula[1])
    if kind in ("and", "or"):
        return set().union(*(names_in(f) for f in formula[1]))
    return set()


def dependency_formulas(part: dict[str, Any]) -> list[Formula]:
    """``dependentRequired`` / ``dependencies`` / ``dependentSchemas`` entries of one part
    that speak only of presence, as formulas (the others are expanded into alternatives
    by the translator)."""
    formulas: list[Formula] = []
    for keyword in ("dependentRequired", "dependencies", "dependentSchemas"):
        for trigger, then in part.get(keyword, {}).items():
            if isinstance(then, list):
                inner: Formula | None = ("and", tuple(("has", name) for name in then))
            else:
                inner = presence_formula(then)
            if inner is not None:
                formulas.append(("or", (("not", ("has", trigger)), inner)))
    return formulas


class ObjectBuilder:
    """Grammar rules for the objects one conjunction accepts."""

    def __init__(
        self,
        ctx: SchemaContext,
        conjunction: Conjunction,
        formulas: list[Formula],
    ) -> None:
        self.ctx = ctx
        self.parts = conjunction.parts
        self.conjunction = conjunction
        self.formulas = list(formulas)
        for part in self.parts:
            self.formulas += dependency_formulas(part)
        self.patterns = self._patterns()
        self.names = self._declared_names()
        self.relevant = (
            set().union(*(names_in(f) for f in self.formulas)) if self.formulas else set()
        )
        required: set[str] = set()
        for part in self.parts:
            required.update(part.get("required", []))
        self.required = required
        self.min_count = max(
            [count_value(v, "minProperties") for v in conjunction.values("minProperties")],
            default=0,
        )
        maxima = [count_value(v, "maxProperties") for v in conjunction.values("maxProperties")]
        self.max_count = min(maxima) if maxima else None
        if self.min_count > MAX_COUNTED:
            ctx.unsupported(
                "minProperties", f"{self.min_count} is above the enforced limit of {MAX_COUNTED}"
            )
            self.min_count = 0
        if self.max_count is not None and self.max_count > MAX_COUNTED:
            ctx.unsupported(
                "maxProperties", f"{self.max_count} is above the enforced limit of {MAX_COUNTED}"
            )
            self.max_count = None
        self.track_count = self.min_count > 0 or self.max_count is not None
        self.memo: dict[tuple[int, frozenset[str], int, bool], Expr | None] = {}

    def _patterns(self) -> list[tuple[int, Dfa, Any]]:
        found = []
        for index, part in enumerate(self.parts):
            for pattern, schema in part.get("patternProperties", {}).items():
                try:
                    found.append((index, pattern_dfa(pattern), schema))
                except GrammarError as error:
                    self.ctx.unsupported("patternProperties", str(error))
        return found

    def _declared_names(self) -> list[str]:
        names: dict[str, None] = {}
        for part in self.parts:
            names.update(dict.fromkeys(part.get("properties", {})))
        for part in self.parts:
            names.update(dict.fromkeys(part.get("required", [])))
        for formula in self.formulas:
            names.update(dict.fromkeys(sorted(names_in(formula))))
        return list(names)

    def value_schemas(self, name: str | None, region: frozenset[int] = frozenset()) -> list[Any]:
        """Schemas the value of key ``name`` (or of an extra key in ``region``) must meet."""
        schemas: list[Any] = []
        for index, part in enumerate(self.parts):
            own: list[Any] = []
            if name is not None and name in part.get("properties", {}):
                own.append(part["properties"][name])
            for number, (owner, dfa, schema) in enumerate(self.patterns):
                if owner == index and (dfa.run(name) if name is not None else number in region):
                    own.append(schema)
            if not own and "additionalProperties" in part:
                own.append(part["additionalProperties"])
            schemas += own
        return schemas

    def build(self) -> Expr | None:
        """The object expression, or None when no object is valid."""
        self.allowed = [self._name_allowed(name) for name in self.names]
        if any(
            name in self.required and not ok
            for name, ok in zip(self.names, self.allowed, strict=True)
        ):
            return None
        self.members = self._members()
        while True:
            try:
                start = self._state(0, frozenset(), 0, True)
                break
            except _TooManyStates:
                self._leave_out_tracking()
        if start is None:
            return None
        return Sequence((Literal("{"), self.ctx.ws, start, Literal("}")))

    def _leave_out_tracking(self) -> None:
        """Refuse what made the member states too many (the dependencies first, then the
        counts), or, when the caller ignores it, build the object again without it."""
        detail = (
            f"following it over {len(self.names)} properties needs more than "
            f"{MAX_OBJECT_STATES:,} grammar states"
        )
        if self.formulas:
            keywords = ("dependentRequired", "dependencies", "dependentSchemas", "not")
            named = next((k for k in keywords if self.conjunction.has(k)), "not")
            self.ctx.unsupported(named, detail)
            self.formulas = []
            self.relevant = set()
        else:
            self.ctx.unsupported(
                "maxProperties" if self.max_count is not None else "minProperties", detail
            )
            self.track_count = False
            self.min_count = 0
            self.max_count = None
        self.memo = {}

    def _name_allowed(self, name: str) -> bool:
        if any(
            not self.ctx.is_valid(schema, name)
            for schema in self.conjunction.values("propertyNames")
        ):
            return False
        return False not in self.value_schemas(name)

    def _members(self) -> dict[Hashable, Expr]:
        """Member expressions (key, colon, value) for every declared name and extra region."""
        key_exprs = self._key_exprs()
        members: dict[Hashable, Expr] = {}
        ws = self.ctx.ws
        for tag, key in key_exprs.items():
            kind, what = tag
            if kind == "name":
                schemas = self.value_schemas(self.names[what])
            else:
                schemas = self.value_schemas(None, what)
            value = self.ctx.value_expr(schemas)
            members[tag] = Sequence((key, self.ctx.colon, value, ws))
        return members

    def _key_exprs(self) -> dict[Hashable, Expr]:
        """Key expressions per tag: ``("name", index)`` and ``("region", patterns)``. Objects
        whose keys differ only by declared names share them (one automaton per name list)."""
        names = [
            (name, ("name", index))
            for index, (name, ok) in enumerate(zip(self.names, self.allowed, strict=True))
            if ok
        ]
        if self.patterns or self.conjunction.has("propertyNames"):
            extras = self._extra_keys()
            declared = literal_dfa(names)
            keys = minimize(union(declared, extras)) if extras is not None else declared
            return self.ctx.dfa_keys("key", keys)
        closed = (
            self.max_count is not None and self.max_count <= 0
        ) or False in self.value_schemas(None)
        cache_key = ("keys", tuple(names), closed)
        found = self.ctx.cache.get(cache_key)
        if found is None:
            region = None if closed else ("region", frozenset())
            found = self.ctx.cache[cache_key] = self.ctx.literal_keys("key", names, region)
        return found

    def _extra_keys(self) -> Dfa | None:
        if self.max_count is not None and self.max_count <= 0:
            return None
        regions = any_string().retag(lambda tags: frozenset({("region", frozenset())}))
        for number, (_, dfa, _) in enumerate(self.patterns):
            tagged = dfa.retag(lambda tags, n=number: frozenset({n}) if tags else frozenset())
            regions = _merge_regions(regions, tagged)
        for schema in self.conjunction.values("propertyNames"):
            regions = intersect(regions, self._names_dfa(schema))
        regions = subtract(regions, literal_dfa((name, "declared") for name in self.names))
        dropped = {tag for tag in regions.all_tags() if False in self.value_schemas(None, tag[1])}
        if dropped:
            regions = minimize(regions.retag(lambda tags: tags - dropped))
        return None if regions.is_empty() else regions

    def _names_dfa(self, schema: Any) -> Dfa:
        found: Dfa | None = None
        try:
            for alternative in self.ctx.schema_alternatives(schema):
                dfa = string_dfa(self.ctx, alternative)
                found = dfa if found is None else union(found, dfa)
        except GrammarError as error:
            self.ctx.unsupported("propertyNames", str(error))
            return any_string()
        return found if found is not None else literal_dfa(())

    def _state(self, index: int, present: frozenset[str], count: int, first: bool) -> Expr | None:
        """The members from ``index`` on, given what is present so far (None: no valid
        ending). A state with one plain option is that option, not a rule of its own.

        States are built after the states they lead to, depth first with a stack of our own
        rather than by recursion, so an object with thousands of properties does not run
        out of Python's call stack."""
        key = (index, present, count, first)
        stack = [key]
        while stack:
            top = stack[-1]
            if top in self.memo:
                stack.pop()
                continue
            waiting = [after for after in self._following(*top) if after not in self.memo]
            if waiting:
                stack.extend(reversed(waiting))
                continue
            stack.pop()
            self.memo[top] = self._build_state(*top)
            if len(self.memo) > MAX_OBJECT_STATES:
                raise _TooManyStates
        return self.memo[key]

    def _following(
        self, index: int, present: frozenset[str], count: int, first: bool
    ) -> list[tuple[int, frozenset[str], int, bool]]:
        """The states ``_step`` reads from this one: after the member, and without it."""
        if index == len(self.names):
            return []
        name = self.names[index]
        result = []
        if ("name", index) in self.members and (self.max_count is None or count < self.max_count):
            with_it = present | {name} if name in self.relevant else present
            result.append((index + 1, with_it, self._counted(count + 1), False))
        if name not in self.required:
            result.append((index + 1, present, count, first))
        return result

    def _build_state(
        self, index: int, present: frozenset[str], count: int, first: bool
    ) -> Expr | None:
        """One state's expression, once the states it leads to are in ``memo``."""
        if index == len(self.names):
            options = self._end(present, count, first)
        else:
            options = self._step(index, present, count, first)
        if (
            len(options) == 1
            and isinstance(options[0], RuleRef | Sequence)
            and (options[0] == EMPTY or isinstance(options[0], RuleRef))
        ):
            return options[0]
        if options:
            return self.ctx.define(self.ctx.fresh("members"), options)
        return None

    def _step(self, index: int, present: frozenset[str], count: int, first: bool) -> list[Expr]:
        name = self.names[index]
        options: list[Expr] = []
        member = self.members.get(("name", index))
        if member is not None and (self.max_count is None or count < self.max_count):
            with_it = present | {name} if name in self.relevant else present
            following = self.memo[(index + 1, with_it, self._counted(count + 1), False)]
            if following is not None:
                options.append(Sequence((self._separator(first), member, following)))
        if name not in self.required:
            skipped = self.memo[(index + 1, present, count, first)]
            if skipped is not None:
                options.append(skipped)
        return options

    def _counted(self, count: int) -> int:
        return count if self.track_count else 0

    def _end(self, present: frozenset[str], count: int, first: bool) -> list[Expr]:
        if not all(holds(f, present) for f in self.formulas):
            return []
        extras = [m for tag, m in self.members.items() if tag[0] == "region"]
        low = max(self.min_count - count, 0) if self.track_count else 0
        high = None if self.max_count is None else self.max_count - count
        if not extras:
            high = 0
        if high is not None and high < low:
            return []
        if high == 0:
            return [EMPTY]
        extra = extras[0] if len(extras) == 1 else Choice(tuple(extras))
        following = Sequence((Literal(","), self.ctx.ws, extra))
        leading = extra if first else following
        return [self.ctx.chain("extras", lambda k: leading if k == 0 else following, low, high, 1)]

    def _separator(self, first: bool) -> Expr:
        return EMPTY if first else Sequence((Literal(","), self.ctx.ws))


def _merge_regions(regions: Dfa, pattern: Dfa) -> Dfa:
    """Split every region by whether a key also matches ``pattern`` (whose tags are the
    pattern's number): region tags are the sets of patterns a key matches."""

    def combine(left: frozenset[Hashable], right: frozenset[Hashable]) -> frozenset[Hashable]:
        if not left or not right:
            return left
        ((kind, matched),) = left  # type: ignore[misc]
        return frozenset({(kind, matched | right)})

    return product(regions, pattern, combine)
