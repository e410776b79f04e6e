"""Allowed-token masks for the Python recogniser, exact and shared across matchers.

A token's fate depends on three things: the bytes it adds to the lexeme in progress, the
lexemes it completes (events for the layout and the parser), and whether the lexeme it
leaves unfinished can still become a token the parser takes. The first two depend only on
the lexer context, so they are precomputed per context, over the whole vocabulary at once
(numpy, in lockstep); only the third part and the parser's answers are looked up at run
time:

* **start tables** (lexer context with nothing pending): every token's events form a path
  in a trie; a node holds the tokens whose events end there, grouped by what their
  unfinished lexeme may become (a *completion class*). A mask walks the trie from the
  current layout-parser state, entering only children whose event the parser takes, and
  collects the groups whose completion class is viable there;
* **pending tables** (a lexeme in progress): tokens that stay inside the lexeme (grouped by
  completion class), tokens that end it at their first byte (the lexeme's events, then the
  start table of the following context, filtered to those tokens), and the few others
  (read one by one when the table is built, kept as a small trie).

Viability answers are memoised per (layout-parser state, event or class); packed masks per
full state (LRU). UTF-8 validity is a separate constraint with one precomputed mask per
pending-byte state, and'ed in.

Memory is bounded: the masks are LRU caches, everything keyed by a state is forgotten when
the recogniser drops its states, and the tables (built per lexer context on first use, tens
of milliseconds each with a 150k-token vocabulary) are kept for the :data:`MAX_TABLES` most
recently used when the next document starts. With the native core the tables live there
only, and are freed there when dropped or when the masks go away.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cad.grammar.cfg.token_table import TokenTable
from cad.grammar.syntax.glr import DEAD
from cad.grammar.syntax.lexer_dfa import DEAD as LEXER_DEAD
from cad.grammar.syntax.python_lexer import MAX_INT_DIGITS, Modes, _Automaton
from cad.grammar.syntax.python_syntax import UTF8, PythonSyntax

_NO_EVENT = -1
_ERROR = -2
_COMPLEX = -3
_MASK_CACHE = 2048
MAX_TABLES = 512
"""Start and pending tables kept when a document starts (the least recently used go); with
the native core and a 150k-token vocabulary a table takes about 60 kB."""


@dataclass
class _Node:
    """A trie node: children by event; leaves as (completion class, token ids)."""

    children: dict[int, _Node] = field(default_factory=dict)
    leaves: list[tuple[int, np.ndarray]] = field(default_factory=list)


@dataclass
class _Tries:
    """The same token groups twice: as read at the start of a line (every event) and as read
    inside a line, where spaces, tabs, form feeds and backslash continuations before the
    token's first newline change nothing and are left out (most tokens then share the
    root). With the native core only the ids of its copies are kept."""

    line_start: _Node | None
    in_line: _Node | None
    native: tuple[int, int] | None = None

    @property
    def native_ids(self) -> set[int]:
        """The native tries these are."""
        return set(self.native or ())


@dataclass
class _Pending:
    """Masks of a lexer context with a lexeme in progress (see the module docstring)."""

    stay: _Tries
    breakers: np.ndarray
    ending: tuple[tuple[int, ...], Modes] | None
    others: _Tries

    @property
    def native_ids(self) -> set[int]:
        """The native tries this table owns."""
        return self.stay.native_ids | self.others.native_ids


@dataclass(frozen=True)
class _DigitRuns:
    """Per token row: the length of its leading run of digits and underscores, the digits in
    it, the byte after it (-1: the token is all run), and the most digits of any run."""

    length: np.ndarray
    digits: np.ndarray
    following: np.ndarray
    longest: int


@dataclass(frozen=True)
class _Class:
    """A completion class split for quick checks: readings of one event (by that event),
    longer readings, and whether the empty reading (nothing pending) is in."""

    single: frozenset[int]
    longer: tuple[tuple[int, ...], ...]
    empty: bool


class PythonMasks:
    """Token masks for one recogniser and one vocabulary."""

    def __init__(self, syntax: PythonSyntax, tokens: TokenTable) -> None:
        self.syntax = syntax
        self.lexer = syntax.lexer
        self.tokens = tokens
        self.width = tokens.packed_width
        self._classes: list[_Class] = []
        self._class_ids: dict[frozenset[tuple[int, ...]], int] = {}
        self._context_class: dict[int, int] = {}
        self._viable: dict[tuple[int, int], bool] = {}
        self._tables: OrderedDict[tuple[Any, ...], _Tries | _Pending] = OrderedDict()
        self._line_events: dict[int, frozenset[int]] = {}
        groups = syntax.groups
        self._groups_of_token: dict[int, list[int]] = {}
        for group, tokens_of_group in enumerate(groups.groups):
            for token in tokens_of_group:
                self._groups_of_token.setdefault(token, []).append(group)
        self._newline = groups.token_ids["NEWLINE"]
        self._blank_events = frozenset(
            {groups.layout(name) for name in ("SP", "TAB", "FF", "CONT")}
        )
        self._nl = groups.layout("NL")
        self._comment = groups.layout("COMMENT")
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._starts: OrderedDict[tuple[Modes, int, int], np.ndarray] = OrderedDict()
        self._core = syntax.native
        self._native_classes: list[int] = []
        self._native_tries: set[int] = set()
        if self._core is not None:
            weakref.finalize(self, _release_tries, self._core, self._native_tries)
        self._utf8 = self._utf8_masks()
        self._runs: _DigitRuns | None = None
        self._run_base = syntax.groups.run_base
        self.always = self._class_id(frozenset({()}))
        syntax.listen(self)

    # -- public ------------------------------------------------------------------------------

    def packed(self, state: int) -> np.ndarray:
        """Packed (little-endian) bits of the tokens allowed after ``state``, the
        end-of-sequence token included when the text is a whole file. Cached: do not
        modify."""
        cached = self._cache.get(state)
        if cached is not None:
            self._cache.move_to_end(state)
            return cached
        context, utf8, layout, digits = self.syntax.entry(state)
        modes, lexer_state, run = self.lexer.contexts[context]
        if lexer_state == 0:
            bits = self._start_mask(modes, layout, run).copy()
        else:
            bits = self._pending_mask(context, layout)
            if digits:
                self._limit_digits(bits, lexer_state, digits)
        bits &= self._utf8[utf8]
        eos = self.tokens.eos_token_id
        if eos is not None and self.syntax.is_complete(state):
            bits[eos >> 3] |= 1 << (eos & 7)
        self._cache[state] = bits
        if len(self._cache) > _MASK_CACHE:
            self._cache.popitem(last=False)
        return bits

    def _limit_digits(self, bits: np.ndarray, lexer_state: int, digits: int) -> None:
        """Clear from ``bits`` the tokens that would end the decimal integer in progress
        (``digits`` long, in ``lexer_state``) with more than :data:`MAX_INT_DIGITS` digits:
        those whose leading digits and underscores, added to it, pass the limit and whose next
        byte ends the lexeme (rather than making it a float or an imaginary number)."""
        runs = self._digit_runs()
        if digits + runs.longest <= MAX_INT_DIGITS:
            return
        transitions = self.lexer.code.dfa.transitions
        after = np.where(runs.length == 0, lexer_state, self.lexer.int_digit_state)
        ending = (runs.following >= 0) & (
            transitions[after, np.maximum(runs.following, 0)] == LEXER_DEAD
        )
        refused = np.flatnonzero(ending & (digits + runs.digits > MAX_INT_DIGITS))
        if refused.size:
            bits &= ~self.tokens.pack(refused)

    def _digit_runs(self) -> _DigitRuns:
        """How every token begins: its leading run of digits and underscores (built once)."""
        if self._runs is None:
            tokens = self.tokens
            count = len(tokens.token_ids)
            length = np.zeros(count, dtype=np.int64)
            digits = np.zeros(count, dtype=np.int64)
            following = np.full(count, -1, dtype=np.int64)
            active = np.arange(count)
            position = 0
            while active.size:
                active = active[tokens.lengths[active] > position]
                byte = tokens.data[tokens.offsets[active] + position].astype(np.int64)
                in_run = (byte == ord("_")) | ((byte >= ord("0")) & (byte <= ord("9")))
                following[active[~in_run]] = byte[~in_run]
                active = active[in_run]
                length[active] += 1
                digits[active] += byte[in_run] != ord("_")
                position += 1
            self._runs = _DigitRuns(length, digits, following, int(digits.max(initial=0)))
        return self._runs

    def on_reset(self, contexts: bool) -> None:
        """The recogniser dropped its states (and its lexer contexts with ``contexts``):
        forget every answer keyed by them."""
        self._cache.clear()
        self._starts.clear()
        self._viable.clear()
        self._line_events.clear()
        if contexts:
            self._context_class.clear()

    def trim(self) -> None:
        """Keep the :data:`MAX_TABLES` most recently used tables (no state is held now)."""
        while len(self._tables) > MAX_TABLES:
            _, table = self._tables.popitem(last=False)
            if self._core is not None:
                owned = table.native_ids
                _release_tries(self._core, owned)
                self._native_tries.difference_update(owned)

    @property
    def tables(self) -> int:
        """How many start and pending tables are held."""
        return len(self._tables)

    # -- viability ---------------------------------------------------------------------------

    def _class_id(self, readings: frozenset[tuple[int, ...]]) -> int:
        found = self._class_ids.get(readings)
        if found is None:
            found = self._class_ids[readings] = len(self._classes)
            split = _Class(
                frozenset(r[0] for r in readings if len(r) == 1),
                tuple(r for r in readings if len(r) > 1),
                () in readings,
            )
            self._classes.append(split)
            if self._core is not None:
                self._native_classes.append(
                    self._core.add_class(
                        sorted(split.single), [list(r) for r in split.longer], split.empty
                    )
                )
        return found

    def _class_of(self, context: int) -> int:
        found = self._context_class.get(context)
        if found is None:
            found = self._context_class[context] = self._class_id(self.lexer.completions(context))
        return found

    def _is_viable(self, layout: int, class_id: int) -> bool:
        if class_id == self.always:
            return True
        if self._core is not None:
            return self._core.class_viable(layout, self._native_classes[class_id])
        key = (layout, class_id)
        found = self._viable.get(key)
        if found is None:
            readings = self._classes[class_id]
            apply = self.syntax.apply
            step = self.syntax.layout.step
            in_line = self._in_line(layout)
            if in_line is not None:
                single = not readings.single.isdisjoint(in_line)
            else:
                single = any(step(layout, event) != DEAD for event in readings.single)
            found = self._viable[key] = (
                readings.empty
                or single
                or any(apply(layout, events) != DEAD for events in readings.longer)
            )
        return found

    def _in_line(self, layout: int) -> frozenset[int] | None:
        """Inside a logical line, the events the layout-parser state takes (None at the
        start of a line, where the column decides and events are stepped one by one)."""
        found = self._line_events.get(layout)
        if found is not None:
            return found
        (depth, _, at_start, *_), config = self.syntax.layout.states[layout]
        if at_start:
            return None
        groups = self.syntax.groups
        viable = self.syntax.parser.viable_tokens(config)
        events: set[int] = set(self._blank_events)
        for token in viable:
            for group in self._groups_of_token.get(token, ()):
                events.add(group + groups.count)
                if depth == 0 and group in groups.closers:
                    continue
                events.add(group)
        if depth or self._newline in viable:
            events.update((self._nl, self._comment))
        found = self._line_events[layout] = frozenset(events)
        return found

    # -- run time ----------------------------------------------------------------------------

    def _walk(self, tries: _Tries, layout: int, into: np.ndarray) -> None:
        """Or into ``into`` the tokens of every trie group viable from ``layout``."""
        if tries.native is not None:
            self._core.walk(tries.native[0], tries.native[1], layout, into)
            return
        step = self.syntax.layout.step
        root = tries.line_start if self._in_line(layout) is None else tries.in_line
        assert root is not None
        agenda = [(root, layout)]
        found: list[np.ndarray] = []
        while agenda:
            node, current = agenda.pop()
            for class_id, ids in node.leaves:
                if self._is_viable(current, class_id):
                    found.append(ids)
            if not node.children:
                continue
            in_line = self._in_line(current)
            for event, child in node.children.items():
                if in_line is not None and event not in in_line and event < self._run_base:
                    continue
                following = step(current, event)
                if following != DEAD:
                    agenda.append((child, following))
        if found:
            np.bitwise_or(into, self._pack(np.concatenate(found)), out=into)

    def _pack(self, ids: np.ndarray) -> np.ndarray:
        bits = np.zeros(self.tokens.vocab_size, dtype=bool)
        bits[ids] = True
        return np.packbits(bits, bitorder="little")

    def _start_mask(self, modes: Modes, layout: int, run: int = 0) -> np.ndarray:
        key = (modes, layout, run)
        cached = self._starts.get(key)
        if cached is not None:
            self._starts.move_to_end(key)
            return cached
        table_key = ("start", modes, run)
        tries = self._tables.get(table_key)
        if tries is None:
            tries = self._tables[table_key] = self._build_start(modes, run)
        else:
            self._tables.move_to_end(table_key)
        assert isinstance(tries, _Tries)
        bits = np.zeros(self.width, dtype=np.uint8)
        self._walk(tries, layout, bits)
        self._starts[key] = bits
        if len(self._starts) > _MASK_CACHE:
            self._starts.popitem(last=False)
        return bits

    def _pending_mask(self, context: int, layout: int) -> np.ndarray:
        table_key = ("pending", *self.lexer.contexts[context])
        table = self._tables.get(table_key)
        if table is None:
            table = self._tables[table_key] = self._build_pending(context)
        else:
            self._tables.move_to_end(table_key)
        assert isinstance(table, _Pending)
        bits = np.zeros(self.width, dtype=np.uint8)
        self._walk(table.stay, layout, bits)
        if table.ending is not None:
            events, modes = table.ending
            following = self.syntax.apply(layout, events)
            if following != DEAD:
                run = self.lexer.contexts[context][2]
                bits |= self._start_mask(modes, following, run) & table.breakers
        self._walk(table.others, layout, bits)
        return bits

    # -- tables ------------------------------------------------------------------------------

    def _actions(self, modes: Modes, automaton: _Automaton) -> np.ndarray:
        """Per label: the one event its completion yields in ``modes`` (or none), or that
        it is an error, or that it changes the mode / yields several events (read such
        tokens one by one)."""
        actions = np.full(len(automaton.dfa.labels), _COMPLEX, dtype=np.int64)
        for label in range(len(automaton.dfa.labels)):
            events: list[int] = []
            after = self.lexer._emit(modes, automaton, label, events)
            if after is None:
                actions[label] = _ERROR
            elif after == modes and len(events) <= 1:
                actions[label] = events[0] if events else _NO_EVENT
        return actions

    def _holding(self, modes: Modes) -> np.ndarray:
        """Which tokens hold a byte that ``modes`` forbids (they are read one by one)."""
        banned = self.lexer.forbidden(modes)
        tokens = self.tokens
        if not banned:
            return np.zeros(len(tokens.token_ids), dtype=bool)
        hits = np.isin(tokens.data, np.array(sorted(banned), dtype=np.uint8)).astype(np.int64)
        return np.add.reduceat(hits, tokens.offsets) > 0

    def _overrides(self, modes: Modes) -> np.ndarray:
        """Bytes that start a lexeme differently in ``modes`` (':' opening a format spec)."""
        special = np.zeros(256, dtype=bool)
        if modes and modes[-1][0] == "x" and modes[-1][1] == 0:
            special[0x3A] = True
        return special

    def _build_start(self, modes: Modes, run: int) -> _Tries:
        """The start tables of ``modes`` with a quote ``run`` just read (see
        :meth:`PythonLexer.lex`): tokens without a byte that ``modes`` may refuse are read in
        lockstep (they end with no run), the others one by one."""
        automaton = self.lexer.automaton(modes)
        table = automaton.dfa.transitions
        accept = automaton.dfa.accept
        final = np.array(automaton.final, dtype=bool)
        actions = self._actions(modes, automaton)
        overrides = self._overrides(modes)
        tokens = self.tokens
        count = len(tokens.token_ids)
        rows = np.arange(count)
        state = np.zeros(count, dtype=np.int64)
        status = np.zeros(count, dtype=np.int8)  # 0 active, 1 complex, 2 dead
        status[self._holding(modes)] = 1
        event_rows: list[np.ndarray] = []
        event_keys: list[np.ndarray] = []
        event_values: list[np.ndarray] = []
        position = 0
        while True:
            active = rows[(status == 0) & (tokens.lengths > position)]
            if not active.size:
                break
            byte = tokens.data[tokens.offsets[active] + position].astype(np.int64)
            current = state[active]
            following = table[current, byte].astype(np.int64)
            at_start = current == 0
            status[active[at_start & overrides[byte]]] = 1
            broken = (following < 0) & ~at_start
            status[active[(following < 0) & at_start]] = 2
            if broken.any():
                labels = accept[current[broken]]
                acts = np.where(labels >= 0, actions[np.maximum(labels, 0)], _ERROR)
                hit = active[broken]
                status[hit[acts == _ERROR]] = 2
                status[hit[acts == _COMPLEX]] = 1
                emitted = acts >= 0
                event_rows.append(hit[emitted])
                event_keys.append(np.full(int(emitted.sum()), 2 * position))
                event_values.append(acts[emitted])
                restarted = table[0, byte[broken]].astype(np.int64)
                status[hit[restarted < 0]] = 2
                status[hit[overrides[byte[broken]]]] = 1
                following[broken] = restarted
            valid = following >= 0
            finals = valid & final[np.maximum(following, 0)]
            if finals.any():
                labels = accept[following[finals]]
                acts = actions[labels]
                hit = active[finals]
                status[hit[acts == _ERROR]] = 2
                status[hit[acts == _COMPLEX]] = 1
                emitted = acts >= 0
                event_rows.append(hit[emitted])
                event_keys.append(np.full(int(emitted.sum()), 2 * position + 1))
                event_values.append(acts[emitted])
                following[finals] = 0
            state[active] = np.where(valid, following, 0)
            position += 1
        context_of = self.lexer.context
        sequences: dict[tuple[int, ...], int] = {(): 0}
        sequence_of = np.zeros(count, dtype=np.int64)
        if event_rows:
            all_rows = np.concatenate(event_rows)
            keep = status[all_rows] == 0
            all_rows = all_rows[keep]
            all_keys = np.concatenate(event_keys)[keep]
            all_values = np.concatenate(event_values)[keep]
            order = np.lexsort((all_keys, all_rows))
            all_rows, all_values = all_rows[order], all_values[order]
            bounds = np.flatnonzero(np.diff(all_rows)) + 1
            starts = np.concatenate([[0], bounds]).astype(np.int64)
            ends = np.concatenate([bounds, [all_rows.size]]).astype(np.int64)
            values = all_values.tolist()
            firsts = all_rows[starts] if all_rows.size else starts
            for row, begin, end in zip(
                firsts.tolist(), starts.tolist(), ends.tolist(), strict=True
            ):
                events = tuple(values[begin:end])
                sequence_of[row] = sequences.setdefault(events, len(sequences))
        simple = rows[status == 0]
        groups: dict[tuple[tuple[int, ...], int], list[np.ndarray]] = {}
        by_id = list(sequences)
        for (sequence, final_state), members in _split_by(
            sequence_of[simple], state[simple], simple
        ):
            key = (by_id[sequence], context_of(modes, final_state))
            groups.setdefault(key, []).append(members)
        token_bytes = self.tokens.vocabulary.token_bytes
        start_context = context_of(modes, 0, run)
        for row in rows[status == 1].tolist():
            data = token_bytes[int(tokens.token_ids[row])]
            lexed = self.lexer.lex(start_context, data)  # type: ignore[arg-type]
            if lexed is not None:
                groups.setdefault((tuple(lexed[0]), lexed[1]), []).append(np.array([row]))
        return self._trie(groups)

    def _trie(self, groups: dict[tuple[tuple[int, ...], int], list[np.ndarray]]) -> _Tries:
        """The tries of token groups keyed by (events, final lexer context)."""
        line_start = self._trie_of(groups, self._line_start_events)
        in_line = self._trie_of(groups, self._in_line_events)
        if self._core is not None:
            return _Tries(None, None, (self._register(line_start), self._register(in_line)))
        return _Tries(line_start, in_line)

    def _register(self, root: _Node) -> int:
        """Hand a trie to the native core (nodes numbered breadth first, root 0)."""
        order = [root]
        index = 0
        while index < len(order):
            order.extend(order[index].children.values())
            index += 1
        number = {id(node): position for position, node in enumerate(order)}
        child_offsets, child_events, child_targets = [0], [], []
        leaf_offsets, leaf_classes, leaf_ids = [0], [], []
        for node in order:
            for event, child in node.children.items():
                child_events.append(event)
                child_targets.append(number[id(child)])
            child_offsets.append(len(child_events))
            for class_id, ids in node.leaves:
                leaf_classes.append(self._native_classes[class_id])
                leaf_ids.append(ids.astype(np.int32))
            leaf_offsets.append(len(leaf_classes))
        trie = self._core.add_trie(
            child_offsets,
            child_events,
            child_targets,
            leaf_offsets,
            leaf_classes,
            leaf_ids,
            self.width,
        )
        self._native_tries.add(trie)
        return trie

    def _trie_of(
        self, groups: dict[tuple[tuple[int, ...], int], list[np.ndarray]], rewrite
    ) -> _Node:
        root = _Node()
        by_class: dict[tuple[int, ...], dict[int, list[np.ndarray]]] = {}
        for (events, context), rows in groups.items():
            key = rewrite(events)
            by_class.setdefault(key, {}).setdefault(self._class_of(context), []).extend(rows)
        for events, classes in by_class.items():
            node = root
            for event in events:
                node = node.children.setdefault(event, _Node())
            for class_id, rows in classes.items():
                node.leaves.append((class_id, self.tokens.token_ids[np.concatenate(rows)]))
        return root

    def _line_start_events(self, events: tuple[int, ...]) -> tuple[int, ...]:
        """Runs of spaces or tabs become one run event each."""
        groups = self.syntax.groups
        space, tab = groups.layout("SP"), groups.layout("TAB")
        result: list[int] = []
        index = 0
        while index < len(events):
            event = events[index]
            if event in (space, tab):
                end = index
                while end < len(events) and events[end] == event and end - index < 1023:
                    end += 1
                result.append(groups.run("SP" if event == space else "TAB", end - index))
                index = end
            else:
                result.append(event)
                index += 1
        return tuple(result)

    def _in_line_events(self, events: tuple[int, ...]) -> tuple[int, ...]:
        """Inside a line: blanks before the first newline dropped, runs after it merged."""
        first_newline = events.index(self._nl) if self._nl in events else len(events)
        head = tuple(e for e in events[:first_newline] if e not in self._blank_events)
        return head + self._line_start_events(events[first_newline:])

    def _build_pending(self, context: int) -> _Pending:
        modes, start_state, _ = self.lexer.contexts[context]
        automaton = self.lexer.automaton(modes)
        table = automaton.dfa.transitions
        final = np.array(automaton.final, dtype=bool)
        tokens = self.tokens
        count = len(tokens.token_ids)
        rows = np.arange(count)
        first = tokens.data[tokens.offsets].astype(np.int64)
        breaks_first = table[start_state, first] < 0
        state = np.full(count, start_state, dtype=np.int64)
        status = np.zeros(count, dtype=np.int8)  # 0 inside, 1 other
        status[breaks_first] = 2  # 2: ends the lexeme at the first byte
        status[self._holding(modes)] = 1
        position = 0
        while True:
            active = rows[(status == 0) & (tokens.lengths > position)]
            if not active.size:
                break
            byte = tokens.data[tokens.offsets[active] + position].astype(np.int64)
            following = table[state[active], byte].astype(np.int64)
            leaves = (following < 0) | final[np.maximum(following, 0)]
            status[active[leaves]] = 1
            state[active] = np.where(following >= 0, following, 0)
            position += 1
        stay_groups: dict[int, list[np.ndarray]] = {}
        context_of = self.lexer.context
        staying = rows[status == 0]
        for (_, final_state), members in _split_by(
            np.zeros(staying.size, dtype=np.int64), state[staying], staying
        ):
            class_id = self._class_of(context_of(modes, final_state))
            stay_groups.setdefault(class_id, []).append(members)
        root = _Node(
            leaves=[
                (class_id, tokens.token_ids[np.concatenate(group)])
                for class_id, group in stay_groups.items()
            ]
        )
        if self._core is not None:
            stay = _Tries(None, None, (self._register(root),) * 2)
        else:
            stay = _Tries(root, root)
        events: list[int] = []
        label = automaton.accept[start_state]
        after = self.lexer._emit(modes, automaton, label, events) if label >= 0 else None
        ending = None if after is None else (tuple(events), after)
        groups: dict[tuple[tuple[int, ...], int], list[np.ndarray]] = {}
        token_bytes = tokens.vocabulary.token_bytes
        for row in rows[status == 1].tolist():
            data = token_bytes[int(tokens.token_ids[row])]
            lexed = self.lexer.lex(context, data)  # type: ignore[arg-type]
            if lexed is not None:
                groups.setdefault((tuple(lexed[0]), lexed[1]), []).append(np.array([row]))
        breakers = tokens.pack(rows[status == 2])
        return _Pending(stay, breakers, ending, self._trie(groups))

    def _utf8_masks(self) -> list[np.ndarray]:
        """For each UTF-8 validator state, the tokens whose bytes keep the text valid."""
        tokens = self.tokens
        table = np.array(UTF8, dtype=np.int64)
        count = len(tokens.token_ids)
        masks = []
        for pending in range(8):
            state = np.full(count, pending, dtype=np.int64)
            alive = np.ones(count, dtype=bool)
            for position in range(int(tokens.lengths.max())):
                active = np.flatnonzero(alive & (tokens.lengths > position))
                if not active.size:
                    break
                byte = tokens.data[tokens.offsets[active] + position].astype(np.int64)
                following = table[state[active], byte]
                alive[active[following < 0]] = False
                state[active] = np.maximum(following, 0)
            masks.append(tokens.pack(np.flatnonzero(alive)))
        return masks


def _split_by(first: np.ndarray, second: np.ndarray, rows: np.ndarray):
    """The rows grouped by equal ``(first, second)`` keys: ``((first, second), rows)``."""
    if not rows.size:
        return []
    order = np.lexsort((second, first))
    first, second, rows = first[order], second[order], rows[order]
    change = np.flatnonzero((np.diff(first) != 0) | (np.diff(second) != 0)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [rows.size]])
    return [
        ((int(first[begin]), int(second[begin])), rows[begin:end])
        for begin, end in zip(starts.tolist(), ends.tolist(), strict=True)
    ]


def _release_tries(core: Any, tries: set[int]) -> None:
    """Free native tries (a table dropped, or masks gone)."""
    for trie in tries:
        core.release_trie(trie)
