"""Python as an incremental recogniser over bytes: UTF-8 validation, the lexer with its
f-string modes, the layout layer and the GLR parser, composed into one interned state.

A state is ``(lexer context, UTF-8 state, layout-parser state)``, interned as one int, so
matchers hold a history of ints and everything else is shared by every matcher of the same
Python version.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import sys
import unicodedata
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from cad.grammar.index_cache import read_cached, write_cached
from cad.grammar.program_states import utf8_step
from cad.grammar.syntax.glr import DEAD, GlrParser
from cad.grammar.syntax.grammar_text import read_grammar
from cad.grammar.syntax.lalr import ACCEPT, END, Tables, build_tables
from cad.grammar.syntax.python_layout import MAX_DEPTH, MAX_INDENT, TAB_SIZE, LayoutParser
from cad.grammar.syntax.python_lexer import MAX_RUN, PythonLexer, TokenGroups

SUPPORTED_VERSIONS = ((3, 10), (3, 11), (3, 12), (3, 13))
LATEST = SUPPORTED_VERSIONS[-1]
CACHE_KIND = "python-syntax"

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


class PythonSyntax:
    """The compiled recogniser for one Python version; states are ints."""

    def __init__(self, version: tuple[int, int] = LATEST, *, native: bool | None = None) -> None:
        if version not in SUPPORTED_VERSIONS:
            supported = ", ".join(f"{a}.{b}" for a, b in SUPPORTED_VERSIONS)
            raise ValueError(f"Python {version[0]}.{version[1]} is not supported ({supported})")
        self.version = version
        self.tables, self.groups, self.lexer = built_parts(version)
        self.native = _native_core(self.tables, self.groups) if native is not False else None
        if native and self.native is None:
            raise RuntimeError("the native core (cad.grammar._native) is not built")
        if self.native is not None:
            self.layout = _NativeLayout(self.native)
        else:
            self.parser = GlrParser(self.tables)
            self.layout = LayoutParser(self.groups, self.parser)
        self.states: list[tuple[int, int, int]] = []
        self._ids: dict[tuple[int, int, int], int] = {}
        self._viable: dict[int, bool] = {}
        self.initial = self.state(self.lexer.initial, 0, self.layout.initial)

    def state(self, context: int, utf8: int, layout: int) -> int:
        """The id of a composed state."""
        key = (context, utf8, layout)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.states)
            self.states.append(key)
        return found

    def feed(self, state: int, data: bytes) -> int:
        """The state after ``data``, or :data:`DEAD` if no Python file starts with the
        text so far followed by ``data``."""
        context, utf8, layout = self.states[state]
        for byte in data:
            utf8 = UTF8[utf8][byte]
            if utf8 < 0:
                return DEAD
        lexed = self.lexer.lex(context, data)
        if lexed is None:
            return DEAD
        events, context = lexed
        step = self.layout.step
        for event in events:
            layout = step(layout, event)
            if layout == DEAD:
                return DEAD
        return self.state(context, utf8, layout)

    def is_viable(self, state: int) -> bool:
        """Whether some continuation of the text so far is a whole Python file: the lexeme in
        progress can still become a token the parser takes here."""
        found = self._viable.get(state)
        if found is None:
            context, _, layout = self.states[state]
            found = any(
                self.apply(layout, events) != DEAD for events in self.lexer.completions(context)
            )
            self._viable[state] = found
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
        context, utf8, layout = self.states[state]
        if utf8:
            return False
        events = self.lexer.finish(context)
        if events is None:
            return False
        for event in events:
            layout = self.layout.step(layout, event)
            if layout == DEAD:
                return False
        return self.layout.is_complete(layout)

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a whole Python file."""
        state = self.feed(self.initial, data)
        return state != DEAD and self.is_complete(state)


def built_parts(version: tuple[int, int]) -> tuple[Tables, TokenGroups, PythonLexer]:
    """The parser tables, token groups and lexer of Python ``version``: read from the on-disk
    cache (:mod:`cad.grammar.index_cache`) when an earlier process built them from the same
    grammar, sources and Unicode tables, else built (the lexer's automata take most of a
    second) and stored for the next process."""
    key = _fingerprint(version)
    data = read_cached(CACHE_KIND, key)
    if data is not None:
        try:
            parts = pickle.loads(data)
        except Exception as error:  # a truncated or foreign file is rebuilt, never fatal
            logger.debug("ignoring the cached Python syntax tables: %s", error)
        else:
            if isinstance(parts, tuple) and len(parts) == 3:
                return parts
    text = resources.files("cad.grammar.syntax").joinpath("python.cfg").read_text()
    tables = build_tables(read_grammar(text, version))
    groups = TokenGroups(tables)
    parts = (tables, groups, PythonLexer(groups, version))
    write_cached(CACHE_KIND, key, pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL))
    return parts


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


def _native_core(tables: Tables, groups: TokenGroups) -> Any:
    """The compiled layout-parser core for these tables, or None where it is not built (or
    ``CAD_SYNTAX_REFERENCE`` asks for the Python reference)."""
    if os.environ.get("CAD_SYNTAX_REFERENCE"):
        return None
    try:
        from cad.grammar._native import SyntaxCore
    except ImportError:
        return None
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
    return SyntaxCore(
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
