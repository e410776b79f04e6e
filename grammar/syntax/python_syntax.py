"""Python as an incremental recogniser over bytes: UTF-8 validation, the lexer with its
f-string modes, the layout layer and the GLR parser, composed into one interned state.

A state is ``(lexer context, UTF-8 state, layout-parser state, digits)``, interned as one
int, so matchers hold a history of ints and everything else is shared by every matcher of the
same Python version; ``digits`` counts the digits of a decimal integer in progress, which the
compiler refuses beyond :data:`~cad.grammar.syntax.python_lexer.MAX_INT_DIGITS`.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
import unicodedata
import weakref
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from cad.grammar import _native
from cad.grammar.index_cache import read_cached, write_cached
from cad.grammar.program_states import utf8_step
from cad.grammar.syntax import table_store
from cad.grammar.syntax.glr import DEAD, GlrParser
from cad.grammar.syntax.grammar_text import read_grammar
from cad.grammar.syntax.lalr import ACCEPT, END, Tables, build_tables
from cad.grammar.syntax.python_layout import MAX_DEPTH, MAX_INDENT, TAB_SIZE, LayoutParser
from cad.grammar.syntax.python_lexer import MAX_RUN, PythonLexer, TokenGroups, automaton_names

SUPPORTED_VERSIONS = ((3, 10), (3, 11), (3, 12), (3, 13))
LATEST = SUPPORTED_VERSIONS[-1]
CACHE_KIND = "python-syntax"
MAX_CACHE_BYTES = 16 << 20
"""Largest cached table file read (the tables take about 1.5 MB)."""
MAX_ENTRIES = 1 << 20
"""States, stacks, configurations and memo rows past which a recogniser drops its states at
the start of the next document when none is held (about 80 MB with the native core)."""
MAX_CONTEXTS = 1 << 14
"""Lexer contexts past which they are dropped too (with the masks' tables keyed by them)."""
_INDEX_BITS = 32
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_GENERATION_MASK = (1 << 30) - 1

logger = logging.getLogger(__name__)


def _utf8_table() -> list[list[int]]:
    table = []
    for pending in range(8):
        row = []
        for byte in range(256):
            following = utf8_step(pending, byte)
            row.append(-1 if following is None or byte == 0 else following)
        table.append(row)
    return table


UTF8 = _utf8_table()
"""``UTF8[pending][byte]``: the UTF-8 validator's next state, -1 for invalid (NUL too)."""


class StaleState(ValueError):
    """A state id from before the recogniser dropped its states (see
    :meth:`PythonSyntax.hold`)."""


class _Lease:
    """A holder for the length of one self-contained call (:meth:`PythonSyntax.accepts`)."""


class ResetListener(Protocol):
    """Tables keyed by the recogniser's states (the masks of a vocabulary), told when the
    states are dropped and asked to shed what they hold beyond their own bound."""

    def on_reset(self, contexts: bool) -> None:
        """Forget everything keyed by a state id (and by a lexer context id when
        ``contexts``)."""
        ...

    def trim(self) -> None:
        """Drop what is held beyond the listener's bound; no state is held now."""
        ...


class PythonSyntax:
    """The compiled recogniser for one Python version; states are ints.

    States are interned as they are met and kept while anything may hold them. What holds
    states (a matcher, a region constraint) registers with :meth:`hold`; when a new document
    starts and nothing is held, the recogniser drops its states if they pass
    :data:`MAX_ENTRIES` (or the lexer contexts :data:`MAX_CONTEXTS`), so a long-lived
    process stays within a bound. The initial state is 0 in every generation; any other id
    carries its generation, and using one from before a reset raises :class:`StaleState`.
    """

    def __init__(self, version: tuple[int, int] = LATEST, *, native: bool = True) -> None:
        """The recogniser of Python ``version``; ``native=False`` runs the pure-Python layout
        parser instead of the native core, as the reference the tests compare it with."""
        if version not in SUPPORTED_VERSIONS:
            supported = ", ".join(f"{a}.{b}" for a, b in SUPPORTED_VERSIONS)
            raise ValueError(f"Python {version[0]}.{version[1]} is not supported ({supported})")
        self.version = version
        self.tables, self.groups, self.lexer = built_parts(version)
        self.native = _native_core(self.tables, self.groups) if native else None
        self.generation = 0
        self.resets = 0
        self._lock = threading.RLock()
        self._holders: dict[int, weakref.ref[object]] = {}
        self._listeners: weakref.WeakSet[ResetListener] = weakref.WeakSet()
        self._class_ids: dict[frozenset[tuple[int, ...]], int] = {}
        self._start_layout()

    def _start_layout(self) -> None:
        """Fresh state tables: the layout parser, the composed states and their memos."""
        if self.native is not None:
            self.layout: LayoutParser | _NativeLayout = _NativeLayout(self.native)
        else:
            self.parser = GlrParser(self.tables)
            self.layout = LayoutParser(self.groups, self.parser)
        self.states: list[tuple[int, int, int, int]] = []
        self._ids: dict[tuple[int, int, int, int], int] = {}
        self._viable: dict[int, bool] = {}
        self._complete: dict[int, bool] = {}
        self._context_classes: dict[int, int] = {}
        self.initial = self.state(self.lexer.initial, 0, self.layout.initial)

    def state(self, context: int, utf8: int, layout: int, digits: int = 0) -> int:
        """The id of a composed state."""
        key = (context, utf8, layout, digits)
        found = self._ids.get(key)
        if found is None:
            index = len(self.states)
            found = self._ids[key] = self.generation << _INDEX_BITS | index if index else 0
            self.states.append(key)
        return found

    def entry(self, state: int) -> tuple[int, int, int, int]:
        """``(lexer context, UTF-8 state, layout-parser state, digits)`` of a state id."""
        index = state & _INDEX_MASK
        if index and state >> _INDEX_BITS != self.generation:
            raise StaleState(f"state {state} is from before the recogniser was reset")
        return self.states[index]

    # -- bounds ---------------------------------------------------------------------------------

    def hold(self, holder: object, *, fresh: bool) -> None:
        """Keep this recogniser's states valid while ``holder`` lives (held weakly). A
        ``fresh`` holder starts a new document from the initial state and holds no other
        state yet: if nothing else is held, the recogniser first drops its states when they
        pass their bound (and the listeners shed their tables)."""
        with self._lock:
            if fresh and not self._holders:
                contexts = len(self.lexer.contexts) > MAX_CONTEXTS
                if contexts or self.entries() > MAX_ENTRIES:
                    self.reset(contexts=contexts)
                for listener in list(self._listeners):
                    listener.trim()
            key = id(holder)
            self._holders[key] = weakref.ref(holder, partial(self._forget, key))

    def _forget(self, key: int, ref: weakref.ref[object]) -> None:
        """A holder went away (called by its weak reference)."""
        if self._holders.get(key) is ref:
            self._holders.pop(key, None)

    def release(self, holder: object) -> None:
        """``holder`` holds no state any more (it need not say so: it may just go away)."""
        with self._lock:
            found = self._holders.get(id(holder))
            if found is not None and found() is holder:
                del self._holders[id(holder)]

    def listen(self, listener: ResetListener) -> None:
        """Tell ``listener`` (held weakly) when states are dropped."""
        with self._lock:
            self._listeners.add(listener)

    def entries(self) -> int:
        """How much the recogniser holds: composed states, parser stacks, configurations,
        layout states and memo rows."""
        held = len(self.states) + len(self._viable) + len(self._complete)
        if self.native is not None:
            return held + self.native.entries()
        parser, layout = self.parser, self.layout
        assert isinstance(layout, LayoutParser)
        return held + parser.entries() + layout.entries()

    def reset(self, *, contexts: bool = False) -> None:
        """Drop every state (and with ``contexts`` every lexer context); the grammar tables
        and the automata stay. Only safe while no state is held: :meth:`hold` calls it."""
        with self._lock:
            self.generation = (self.generation + 1) & _GENERATION_MASK
            self.resets += 1
            if self.native is not None:
                self.native.reset()
            if contexts:
                self.lexer.reset_contexts()
            self._start_layout()
            for listener in list(self._listeners):
                listener.on_reset(contexts)

    # -- stepping -------------------------------------------------------------------------------

    def feed(self, state: int, data: bytes) -> int:
        """The state after ``data``, or :data:`DEAD` if no Python file starts with the
        text so far followed by ``data``."""
        context, utf8, layout, digits = self.entry(state)
        for byte in data:
            utf8 = UTF8[utf8][byte]
            if utf8 < 0:
                return DEAD
        lexed = self.lexer.lex(context, data, digits)
        if lexed is None:
            return DEAD
        events, context, digits = lexed
        step = self.layout.step
        for event in events:
            layout = step(layout, event)
            if layout == DEAD:
                return DEAD
        return self.state(context, utf8, layout, digits)

    def is_viable(self, state: int) -> bool:
        """Whether some continuation of the text so far is a whole Python file: the lexeme in
        progress can still become a token the parser takes here."""
        found = self._viable.get(state)
        if found is None:
            context, _, layout, _ = self.entry(state)
            if self.native is not None:
                found = self.native.class_viable(layout, self._native_class(context))
            else:
                found = any(
                    self.apply(layout, events) != DEAD for events in self.lexer.completions(context)
                )
            self._viable[state] = found
        return found

    def _native_class(self, context: int) -> int:
        """The native completion class of the lexeme pending in ``context``."""
        found = self._context_classes.get(context)
        if found is None:
            readings = self.lexer.completions(context)
            found = self._class_ids.get(readings)
            if found is None:
                found = self._class_ids[readings] = self.native.add_class(
                    sorted(r[0] for r in readings if len(r) == 1),
                    [list(r) for r in readings if len(r) > 1],
                    () in readings,
                )
            self._context_classes[context] = found
        return found

    def apply(self, layout: int, events: tuple[int, ...]) -> int:
        """The layout-parser state after ``events``, or :data:`DEAD`."""
        if self.native is not None:
            return self.native.apply(layout, list(events))
        step = self.layout.step
        for event in events:
            layout = step(layout, event)
            if layout == DEAD:
                return DEAD
        return layout

    def is_complete(self, state: int) -> bool:
        """Whether the text so far is a whole Python file."""
        found = self._complete.get(state)
        if found is None:
            found = self._complete[state] = self._completes(state)
        return found

    def _completes(self, state: int) -> bool:
        context, utf8, layout, digits = self.entry(state)
        if utf8:
            return False
        events = self.lexer.finish(context, digits)
        if events is None:
            return False
        if self.native is not None:
            return self.native.completes_after(layout, events)
        for event in events:
            layout = self.layout.step(layout, event)
            if layout == DEAD:
                return False
        return self.layout.is_complete(layout)

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a whole Python file."""
        lease = _Lease()
        self.hold(lease, fresh=True)
        try:
            state = self.feed(self.initial, data)
            return state != DEAD and self.is_complete(state)
        finally:
            self.release(lease)


def built_parts(version: tuple[int, int]) -> tuple[Tables, TokenGroups, PythonLexer]:
    """The parser tables, token groups and lexer of Python ``version``: read from the on-disk
    cache (:mod:`cad.grammar.index_cache`) when an earlier process built them from the same
    grammar, sources and Unicode tables, else built (the lexer's automata take most of a
    second) and stored for the next process. The cache holds data only
    (:mod:`cad.grammar.syntax.table_store`); a file that does not decode is rebuilt."""
    key = _fingerprint(version)
    data = read_cached(CACHE_KIND, key, max_bytes=MAX_CACHE_BYTES)
    if data is not None:
        try:
            tables, automata = table_store.decode(data, automaton_names(version))
            groups = TokenGroups(tables)
            return tables, groups, PythonLexer(groups, version, automata)
        except (table_store.StoreError, KeyError, ValueError, IndexError) as error:
            logger.debug("rebuilding the cached Python syntax tables: %s", error)
    text = resources.files("cad.grammar.syntax").joinpath("python.cfg").read_text()
    tables = build_tables(read_grammar(text, version))
    groups = TokenGroups(tables)
    lexer = PythonLexer(groups, version)
    write_cached(CACHE_KIND, key, table_store.encode(tables, lexer.automata))
    return tables, groups, lexer


def _fingerprint(version: tuple[int, int]) -> str:
    """What the built tables depend on: the grammar, every source file of this package and
    the byte-range helpers it builds on, the interpreter's Unicode tables (identifiers) and
    the Python version modelled."""
    from cad.grammar import program_states
    from cad.grammar.cfg import utf8_ranges

    digest = hashlib.sha256(repr((version, unicodedata.unidata_version, sys.version)).encode())
    package = Path(__file__).parent
    helpers = [Path(module.__file__ or "") for module in (program_states, utf8_ranges)]
    for path in [*sorted([*package.glob("*.py"), package / "python.cfg"]), *helpers]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _NativeLayout:
    """The layout-parser states of the native core, under the reference's interface."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.initial = core.initial
        self.step = core.step
        self.is_complete = core.is_complete


def _native_core(tables: Tables, groups: TokenGroups) -> _native.SyntaxCore:
    """The compiled layout-parser core for these tables."""
    states, tokens = len(tables.actions), len(tables.tokens)
    nonterminals = len(tables.nonterminals)
    index = np.full(states * tokens, -1, dtype=np.int32)
    data: list[int] = []
    for state, row in enumerate(tables.actions):
        for token, actions in row.items():
            index[state * tokens + token] = len(data)
            data += [len(actions), *actions]
    gotos = np.full(states * nonterminals, -1, dtype=np.int32)
    for state, row in enumerate(tables.gotos):
        for nonterminal, target in row.items():
            gotos[state * nonterminals + nonterminal] = target
    ids = groups.token_ids
    return _native.SyntaxCore(
        index, np.array(data, dtype=np.int32), gotos, states, tokens, nonterminals,
        list(tables.production_lhs), list(tables.production_length), tables.token_id(END),
        ACCEPT, [list(g) for g in groups.groups], sorted(groups.openers), sorted(groups.closers),
        groups.layout_base, groups.run_base, MAX_RUN, ids["NEWLINE"], ids["INDENT"],
        ids["DEDENT"], ids["ENDMARKER"], MAX_DEPTH, MAX_INDENT, TAB_SIZE,
    )  # fmt: skip


@cache
def python_syntax(version: tuple[int, int] = LATEST) -> PythonSyntax:
    """The shared recogniser for Python ``version``."""
    return PythonSyntax(version)
