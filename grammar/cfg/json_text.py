"""JSON text pieces as grammar expressions: how one string character may be written,
string literals, bounded whitespace, counted repetition, and character DFAs as rules.

A character of a JSON string is written raw (UTF-8) unless JSON forbids it (quote,
backslash, control characters), or as an escape: ``\\" \\\\ \\/ \\b \\f \\n \\r \\t``, or
``\\uXXXX`` (either case; characters beyond the BMP as a surrogate pair). Escapes are
accepted for the characters encoders escape: quote, backslash, solidus, control characters
and everything outside ASCII (``json.dumps`` writes ``\\u00e9`` by default). Printable ASCII
is accepted raw only, except in unconstrained strings, which accept every escape.

Every alternative set built here is a partition (no two alternatives derive the same
bytes), and every rule set built from a DFA is deterministic, so the grammars stay LR(1)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache

from cad.grammar.cfg.char_automata import (
    ACCEPT,
    ANY,
    MAX_CODE_POINT,
    Dfa,
    Ranges,
    intersect_ranges,
    normalize,
    string_trie,
    subtract_ranges,
)
from cad.grammar.cfg.syntax_tree import (
    EMPTY,
    CharClass,
    Choice,
    Expr,
    Literal,
    RuleRef,
    Sequence,
)

QUOTE = Literal('"')
WHITESPACE_CHARS: Ranges = ((9, 10), (13, 13), (32, 32))
_WHITESPACE_CLASS = CharClass(WHITESPACE_CHARS)
"""One white-space character: one object for every link of every white-space chain."""
_FORBIDDEN_RAW: Ranges = ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_SURROGATES: Ranges = ((0xD800, 0xDFFF),)
_SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x2F: "\\/", 0x08: "\\b", 0x0C: "\\f",
                  0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}  # fmt: skip
_ESCAPED_BY_ENCODERS: Ranges = ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x80, 0x10FFFF))
_PLAIN_ASCII: Ranges = ((0x20, 0x21), (0x23, 0x2E), (0x30, 0x5B), (0x5D, 0x7E))
"""Printable ASCII written only raw: not quote, backslash or solidus (which has ``\\/``)."""


@lru_cache(maxsize=4096)
def encoded_char(ranges: Ranges, *, every_escape: bool = False) -> Expr:
    """The ways to write one character out of ``ranges`` inside a JSON string
    (``every_escape``: also ``\\uXXXX`` for printable ASCII). Kept per argument: every
    schema's strings need the same few, and expressions are immutable."""
    ranges = normalize(ranges)
    options: list[Expr] = []
    raw = subtract_ranges(subtract_ranges(ranges, _FORBIDDEN_RAW), _SURROGATES)
    if raw:
        options.append(CharClass(raw))
    for code_point, text in _SHORT_ESCAPES.items():
        if any(low <= code_point <= high for low, high in ranges):
            options.append(Literal(text))
    escaped = ranges if every_escape else intersect_ranges(ranges, _ESCAPED_BY_ENCODERS)
    for low, high in subtract_ranges(escaped, _SURROGATES):
        options.extend(_unicode_escapes(low, high))
    if not options:
        return Choice(())
    return options[0] if len(options) == 1 else Choice(tuple(options))


@lru_cache(maxsize=4096)
def _plain_and_rest(ranges: Ranges) -> tuple[Ranges, Ranges]:
    """The characters of ``ranges`` a JSON string holds only raw (printable ASCII but quote,
    backslash and solidus) and the others. Kept per argument: the key automata of every
    schema ask for the same few sets."""
    ranges = normalize(ranges)
    return intersect_ranges(ranges, _PLAIN_ASCII), subtract_ranges(ranges, _PLAIN_ASCII)


def clear_memoised() -> None:
    """Forget the pieces kept per argument across schemas (character encodings, white-space
    chains), as a new process would start."""
    encoded_char.cache_clear()
    _plain_and_rest.cache_clear()
    _whitespace_chain.cache_clear()


def _unicode_escapes(low: int, high: int) -> list[Expr]:
    """``\\uXXXX`` (or surrogate pair) sequences for the code points ``low..high``."""
    result: list[Expr] = []
    if low <= 0xFFFF:
        for digits in _hex_sequences(low, min(high, 0xFFFF), 4):
            result.append(Sequence((Literal("\\u"), *digits)))
    if high >= 0x10000:
        low = max(low, 0x10000)
        first_high, first_low = _surrogates(low)
        last_high, last_low = _surrogates(high)
        pairs: list[tuple[int, int, int, int]] = []
        if first_high == last_high:
            pairs.append((first_high, first_high, first_low, last_low))
        else:
            pairs.append((first_high, first_high, first_low, 0xDFFF))
            if last_high - first_high > 1:
                pairs.append((first_high + 1, last_high - 1, 0xDC00, 0xDFFF))
            pairs.append((last_high, last_high, 0xDC00, last_low))
        for high_lo, high_hi, low_lo, low_hi in pairs:
            for lead in _hex_sequences(high_lo, high_hi, 4):
                for trail in _hex_sequences(low_lo, low_hi, 4):
                    result.append(Sequence((Literal("\\u"), *lead, Literal("\\u"), *trail)))
    return result


def _surrogates(code_point: int) -> tuple[int, int]:
    offset = code_point - 0x10000
    return 0xD800 + (offset >> 10), 0xDC00 + (offset & 0x3FF)


def _hex_sequences(low: int, high: int, width: int) -> list[tuple[Expr, ...]]:
    """A partition of ``low..high`` into runs of ``width`` hex digit classes."""
    return [tuple(_hex_digit(a, b) for a, b in run) for run in _digit_runs(low, high, width)]


def _digit_runs(low: int, high: int, width: int) -> list[list[tuple[int, int]]]:
    if width == 1:
        return [[(low, high)]]
    base = 16 ** (width - 1)
    low_head, low_tail = divmod(low, base)
    high_head, high_tail = divmod(high, base)
    if low_head == high_head:
        return [
            [(low_head, low_head), *rest] for rest in _digit_runs(low_tail, high_tail, width - 1)
        ]
    runs: list[list[tuple[int, int]]] = []
    first, last = low_head, high_head
    if low_tail:
        runs += [[(low_head, low_head), *r] for r in _digit_runs(low_tail, base - 1, width - 1)]
        first += 1
    tail: list[list[tuple[int, int]]] = []
    if high_tail != base - 1:
        tail = [[(high_head, high_head), *r] for r in _digit_runs(0, high_tail, width - 1)]
        last -= 1
    if first <= last:
        runs.append([(first, last)] + [(0, 15)] * (width - 1))
    return runs + tail


def _hex_digit(low: int, high: int) -> Expr:
    ranges: list[tuple[int, int]] = []
    if low <= 9:
        ranges.append((48 + low, 48 + min(high, 9)))
    if high >= 10:
        start = max(low, 10) - 10
        ranges += [(97 + start, 97 + high - 10), (65 + start, 65 + high - 10)]
    return CharClass(normalize(ranges))


def string_literal(text: str) -> Expr:
    """A JSON string equal to ``text`` (quotes included), in any of its encodings."""
    parts: list[Expr] = [QUOTE]
    plain: list[str] = []
    for char in text:
        code_point = ord(char)
        if 0x20 <= code_point < 0x7F and char not in '"\\/':
            plain.append(char)
            continue
        if plain:
            parts.append(Literal("".join(plain)))
            plain = []
        parts.append(encoded_char(((code_point, code_point),)))
    if plain:
        parts.append(Literal("".join(plain)))
    parts.append(QUOTE)
    return Sequence(tuple(parts))


class RuleWriter:
    """Adds named rules to a rule dictionary, with fresh names."""

    def __init__(self, rules: dict[str, Expr]) -> None:
        self.rules = rules
        self.counter = 0
        self.char_rules: dict[Ranges, Expr] = {}
        self.char_exprs: dict[Ranges, Expr] = {}

    def char(self, ranges: Ranges) -> Expr:
        """One character of ``ranges`` in a JSON string. Printable ASCII is a byte class;
        the rest (escapes, non-ASCII) is one shared rule per distinct set, so the many
        classes of a key automaton, which differ only in a few ASCII letters, stay small."""
        known = self.char_exprs.get(ranges)
        if known is not None:
            return known
        result = self.char_exprs[ranges] = self._char(*_plain_and_rest(ranges))
        return result

    def _char(self, plain: Ranges, rest: Ranges) -> Expr:
        options: list[Expr] = [CharClass(plain)] if plain else []
        if rest:
            shared = self.char_rules.get(rest)
            if shared is None:
                expr = encoded_char(rest)
                shared = (
                    expr
                    if isinstance(expr, CharClass | Literal)
                    else self.define(self.fresh("char"), [expr])
                )
                self.char_rules[rest] = shared
            options.append(shared)
        if not options:
            return Choice(())
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def fresh(self, hint: str) -> str:
        """A rule name not used yet."""
        self.counter += 1
        return f"{hint}-{self.counter}"

    def define(self, name: str, options: list[Expr]) -> RuleRef:
        """Define ``name`` with the given alternatives; a reference to it."""
        self.rules[name] = options[0] if len(options) == 1 else Choice(tuple(options))
        return RuleRef(name)

    def chain(
        self,
        hint: str,
        element: Callable[[int], Expr],
        low: int,
        high: int | None,
        uniform_from: int = 0,
    ) -> Expr:
        """``element(0) element(1) ... element(n-1)`` for ``low <= n <= high`` (``element(k)``
        is the same for every ``k >= uniform_from``). Left-linear rules ``C_n ::= C_{n-1}
        element(n-1)``, so a parser's stack stays flat however long the run."""
        options: list[Expr] = [EMPTY] if low == 0 else []
        explicit = high if high is not None else max(low, uniform_from, 1)
        previous: Expr = EMPTY
        for count in range(1, explicit + 1):
            name = self.fresh(hint)
            body = Sequence((previous, element(count - 1))) if count > 1 else element(0)
            previous = self.define(name, [body])
            if count >= low and (high is not None or count < explicit):
                options.append(previous)
        if high is None:
            star = self.fresh(hint + "-more")
            self.define(star, [previous, Sequence((RuleRef(star), element(explicit)))])
            options.append(RuleRef(star))
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def dfa_body(self, hint: str, dfa: Dfa) -> Expr:
        """The strings of ``dfa`` (its characters JSON-encoded, quotes not included), as
        left-linear rules: ``L_q`` derives the text that leads from the start to state ``q``."""
        names = [self.fresh(hint) for _ in range(dfa.size)]
        options: list[list[Expr]] = [[] for _ in range(dfa.size)]
        options[0].append(EMPTY)
        for state, row in enumerate(dfa.transitions):
            for target, ranges in _by_target(row).items():
                options[target].append(Sequence((RuleRef(names[state]), self.char(ranges))))
        for state, alternatives in enumerate(options):
            if alternatives:
                self.define(names[state], alternatives)
        accepting = [RuleRef(names[s]) for s, tags in enumerate(dfa.tags) if tags]
        if not accepting:
            return Choice(())
        return accepting[0] if len(accepting) == 1 else Choice(tuple(accepting))

    def dfa_keys(self, hint: str, dfa: Dfa) -> dict[Hashable, Expr]:
        """Per tag, the quoted strings of ``dfa`` that end with that tag, as right-linear rules
        ``R_q ::= char R_q' | '"'`` sharing one character set per state, so strings of several
        tags can start at the same place and be told apart by the parser as it reads. A run of
        states with a single way on (a declared name) is written out as one sequence."""
        all_tags = sorted({t for tags in dfa.tags for t in tags}, key=repr)
        reaches = _reachable_tags(dfa, all_tags)
        result: dict[Hashable, Expr] = {}
        moves = [_by_target(row) for row in dfa.transitions]
        for bit, tag in enumerate(all_tags):
            if reaches[0] >> bit & 1:
                alive = [m >> bit & 1 == 1 for m in reaches]
                accepting = [tag in tags for tags in dfa.tags]
                writer = _TagRules(self, hint, moves, accepting, alive, QUOTE)
                result[tag] = Sequence((QUOTE, writer.from_state(0)))
        return result

    def literal_keys(
        self, hint: str, names: list[tuple[str, Hashable]], others: Hashable | None = None
    ) -> dict[Hashable, Expr]:
        """``dfa_keys(hint, literal_dfa(names, others))`` for names of distinct tags (an
        object's declared properties; ``others``: the tag of every other key), written from
        the names' trie without building the automaton: each name is a straight run, and
        the other keys' rules follow the trie with its gaps leading to one state that takes
        any string. The trie is that automaton already minimal (no two of its states hold
        the same tags), so the rules, their names and their order are the same; a schema's
        objects spend most of their translation here."""
        tags = [tag for _, tag in names]
        if len(set(tags)) != len(tags):
            raise ValueError("literal_keys needs a tag of its own for every name")
        runs = {tag: text for text, tag in names}
        result: dict[Hashable, Expr] = {}
        for tag in sorted(tags if others is None else [*tags, others], key=repr):
            text = runs.get(tag)
            if text is None:
                result[tag] = Sequence((QUOTE, self._other_keys(hint, names)))
            else:
                chars = [self.char(((code, code),)) for code in map(ord, text)]
                result[tag] = Sequence((QUOTE, Sequence((*chars, QUOTE))))
        return result

    def _other_keys(self, hint: str, names: list[tuple[str, Hashable]]) -> Expr:
        """The rules of :meth:`literal_keys` for the keys that are no name, over the names'
        trie: every node but a name's end accepts, and the code points no child takes lead to
        ``sink``, which takes anything. Each node's ways are in the order of their first code
        point. Without names the root is that state."""
        children, ending = string_trie(names)
        if len(children) == 1 and not ending[0]:
            return _TagRules(self, hint, [{0: ANY}], [True], [True], QUOTE).from_state(0)
        sink = len(children)
        moves: list[dict[int, Ranges]] = []
        for node_children in children:
            row: dict[int, Ranges] = {}
            gaps: list[tuple[int, int]] = []
            cursor = 0
            for code in sorted(node_children):
                if code > cursor:
                    gaps.append((cursor, code - 1))
                    row.setdefault(sink, ())
                row[node_children[code]] = ((code, code),)
                cursor = code + 1
            if cursor <= MAX_CODE_POINT:
                gaps.append((cursor, MAX_CODE_POINT))
                row.setdefault(sink, ())
            row[sink] = tuple(gaps)
            moves.append(row)
        moves.append({sink: ANY})
        accepting = [not tags for tags in ending] + [True]  # a name's end holds its tag
        rules = _TagRules(self, hint, moves, accepting, [True] * (sink + 1), QUOTE)
        return rules.from_state(0)

    def dfa_words(self, hint: str, dfa: Dfa) -> Expr:
        """The strings ``dfa`` accepts written as they are, not quoted (number spellings:
        their characters are printable ASCII, written raw), as the right-linear rules of
        :meth:`dfa_keys`: a trie stays deterministic however many strings it holds."""
        reaches = _reachable_tags(dfa, [ACCEPT])
        if not reaches[0]:
            return Choice(())
        moves = [_by_target(row) for row in dfa.transitions]
        alive = [mask == 1 for mask in reaches]
        accepting = [ACCEPT in tags for tags in dfa.tags]
        return _TagRules(self, hint, moves, accepting, alive, EMPTY).from_state(0)


class _TagRules:
    """Right-linear rules for one tag of a key automaton, or of the words of
    ``RuleWriter.dfa_words`` (see ``RuleWriter.dfa_keys``)."""

    def __init__(
        self,
        writer: RuleWriter,
        hint: str,
        moves: list[dict[int, Ranges]],
        accepting: list[bool],
        alive: list[bool],
        end: Expr,
    ) -> None:
        self.writer = writer
        self.hint = hint
        self.moves = moves  # per state, the characters leading to each target
        self.accepting = accepting  # per state, whether a string of the tag ends there
        self.alive = alive
        self.end = end  # what closes a string: the quote of a key, nothing for a word
        self.names: dict[int, RuleRef] = {}

    def ways_on(self, state: int) -> list[tuple[Ranges, int]]:
        return [
            (ranges, target) for target, ranges in self.moves[state].items() if self.alive[target]
        ]

    def from_state(self, state: int) -> Expr:
        """The rest of a key from ``state``: a straight run inline, then a rule."""
        parts: list[Expr] = []
        seen: set[int] = set()
        while state not in seen:
            seen.add(state)
            ways = self.ways_on(state)
            accepting = self.accepting[state]
            if accepting and not ways:
                parts.append(self.end)
                return Sequence(tuple(parts))
            if accepting or len(ways) != 1:
                break
            ranges, state = ways[0]
            parts.append(self.writer.char(ranges))
        parts.append(self.rule(state))
        return Sequence(tuple(parts))

    def rule(self, state: int) -> RuleRef:
        found = self.names.get(state)
        if found is not None:
            return found
        found = self.names[state] = RuleRef(self.writer.fresh(self.hint))
        options: list[Expr] = [
            Sequence((self.writer.char(ranges), self.from_state(target)))
            for ranges, target in self.ways_on(state)
        ]
        if self.accepting[state]:
            options.append(self.end)
        self.writer.define(found.name, options)
        return found


def _reachable_tags(dfa: Dfa, tags: list[Hashable]) -> list[int]:
    """Per state, a bitmask of the tags (by position in ``tags``) some string reaches from it."""
    bit = {tag: 1 << index for index, tag in enumerate(tags)}
    masks = [sum(bit[t] for t in state_tags) for state_tags in dfa.tags]
    reverse: list[list[int]] = [[] for _ in range(dfa.size)]
    for state, row in enumerate(dfa.transitions):
        for _, _, target in row:
            reverse[target].append(state)
    stack = [state for state, mask in enumerate(masks) if mask]
    while stack:
        state = stack.pop()
        for source in reverse[state]:
            if masks[state] & ~masks[source]:
                masks[source] |= masks[state]
                stack.append(source)
    return masks


def _by_target(row: tuple[tuple[int, int, int], ...]) -> dict[int, Ranges]:
    grouped: dict[int, list[tuple[int, int]]] = {}
    for low, high, target in row:
        grouped.setdefault(target, []).append((low, high))
    return {target: normalize(ranges) for target, ranges in grouped.items()}


def whitespace_rule(writer: RuleWriter, name: str, max_count: int) -> Expr:
    """A rule for up to ``max_count`` JSON white-space characters (0: none)."""
    if max_count <= 0:
        return writer.define(name, [EMPTY])
    rules, body, used = _whitespace_chain(name, max_count, writer.counter)
    writer.rules.update(rules)
    writer.counter += used
    return writer.define(name, [body])


@lru_cache(maxsize=64)
def _whitespace_chain(name: str, max_count: int, counter: int) -> tuple[dict[str, Expr], Expr, int]:
    """The rules of a white-space chain written from fresh-name ``counter`` on, its body and
    the fresh names it took. Every schema's translation starts with the same chains, so
    they are written once and shared (expressions are values; the caller copies the dict)."""
    writer = RuleWriter({})
    writer.counter = counter
    body = writer.chain(name, lambda _: _WHITESPACE_CLASS, 0, max_count)
    return writer.rules, body, writer.counter - counter
