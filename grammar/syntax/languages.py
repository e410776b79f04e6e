"""The languages that ship — Python, JSON, JSON typed by a JSON Schema — as syntax machines
for a tokenizer, and how a file's language is chosen.

``syntax_machine("python", tokenizer)`` is built once per tokenizer and language (the
grammar tables, the lexer automata and the token tables are shared by every matcher);
``language_for_path`` picks a language by file extension for ``--syntax auto``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from pathlib import PurePath
from typing import Any

import numpy as np

from cad.grammar.cfg import GrammarError, ReferenceGrammar, compile
from cad.grammar.cfg.builtin_grammars import JSON as BUILTIN_JSON
from cad.grammar.cfg.token_table import TokenTable
from cad.grammar.syntax.machine import DEAD, SyntaxMachine, SyntaxMatcher
from cad.grammar.syntax.python_masks import PythonMasks
from cad.grammar.syntax.python_syntax import LATEST, PythonSyntax, python_syntax
from cad.grammar.vocab import Vocabulary

LANGUAGES = ("python", "json")
EXTENSIONS = {".py": "python", ".pyi": "python", ".pyw": "python", ".json": "json"}

JSON_FILE = BUILTIN_JSON.replace("root ::= value", "root ::= ws value ws", 1)
"""A JSON text as RFC 8259 defines it: one value with whitespace around it."""

_JSON_WHITESPACE = b" \t\n\r"

MAX_JSON_DEPTH = 1_000
"""The deepest nesting of arrays and objects the JSON machines follow. Every level is a
new stack of the parser and a new row of its transition table (about 20 kB), so a file of
a few hundred kilobytes of brackets would otherwise take gigabytes; 1,000 levels take
about 20 MB."""
_JSON_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*+"?')
"""A string, or what there is of one up to the end of its line: possessive, so every byte
is read once even when strings are left open."""
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1


def json_depth(text: str) -> int:
    """How deeply ``text`` nests JSON arrays and objects (brackets inside strings do not
    count), in linear time; for text that is not JSON, about as deep as its brackets go."""
    data = _JSON_STRING.sub(b"", text.encode("utf-8"))
    if not data:
        return 0
    steps = _BRACKET_STEP[np.frombuffer(data, dtype=np.uint8)].astype(np.int32)
    return max(int(np.cumsum(steps).max()), 0)


def language_for_path(path: str | PurePath) -> str | None:
    """The language of a file by its extension (None when no grammar ships for it)."""
    return EXTENSIONS.get(PurePath(path).suffix.lower())


class PythonMachine:
    """Python (one version) over one vocabulary."""

    def __init__(self, syntax: PythonSyntax, vocabulary: Vocabulary) -> None:
        self.language = "python"
        self.syntax = syntax
        self.vocab_size = vocabulary.size
        self.eos_token_id = vocabulary.eos_token_id
        self.token_bytes = vocabulary.token_bytes
        self.masks = PythonMasks(syntax, TokenTable.for_vocabulary(vocabulary))
        self.initial = syntax.initial

    def feed(self, state: int, data: bytes) -> int:
        """See :meth:`SyntaxMachine.feed`."""
        following = self.syntax.feed(state, data)
        if following == DEAD or not self.syntax.is_viable(following):
            return DEAD
        return following

    def is_complete(self, state: int) -> bool:
        """See :meth:`SyntaxMachine.is_complete`."""
        return self.syntax.is_complete(state)

    def packed(self, state: int) -> np.ndarray:
        """See :meth:`SyntaxMachine.packed`."""
        return self.masks.packed(state)


class GrammarMachine:
    """A compiled byte-level grammar (JSON, a JSON Schema) as a syntax machine; states are
    the grammar's interned configurations."""

    def __init__(self, compiled: ReferenceGrammar, language: str) -> None:
        self.language = language
        self.compiled = compiled
        vocabulary = compiled.tokens.vocabulary
        self.vocab_size = vocabulary.size
        self.eos_token_id = vocabulary.eos_token_id
        self.token_bytes = vocabulary.token_bytes
        self.initial = compiled.automaton.initial()

    def feed(self, state: int, data: bytes) -> int:
        """See :meth:`SyntaxMachine.feed`."""
        following = self.compiled.masks.transitions.walk(state, data)
        return following if following >= 0 else DEAD

    def is_complete(self, state: int) -> bool:
        """See :meth:`SyntaxMachine.is_complete`."""
        return self.compiled.automaton.is_accepting(state)

    def packed(self, state: int) -> np.ndarray:
        """See :meth:`SyntaxMachine.packed`."""
        return self.compiled.masks.packed(state)


class PaddedMachine:
    """A machine whose files may also have whitespace before and after the text the inner
    machine accepts (a JSON Schema's value in a file that ends with a newline).

    States: the inner state for the leading part and the value itself, and ``s + TRAILING``
    for "the inner text ended in ``s`` and only whitespace follows". A token is allowed when
    some split of its bytes into (leading whitespace | value | trailing whitespace) works;
    tokens that mix whitespace with other bytes are checked one by one from a precomputed
    list."""

    def __init__(self, inner: SyntaxMachine) -> None:
        self.inner = inner
        self.language = inner.language
        self.schema = True
        self.vocab_size = inner.vocab_size
        self.eos_token_id = inner.eos_token_id
        self.token_bytes = inner.token_bytes
        self.initial = inner.initial
        whitespace: list[int] = []
        mixed: list[int] = []
        for token, data in enumerate(self.token_bytes):
            if not data:
                continue
            stripped = data.strip(_JSON_WHITESPACE)
            if not stripped:
                whitespace.append(token)
            elif stripped != data:
                mixed.append(token)
        self._whitespace = _pack(whitespace, self.vocab_size)
        self._mixed = mixed
        self._cache: dict[int, np.ndarray] = {}

    TRAILING = 1 << 40

    def feed(self, state: int, data: bytes) -> int:
        """See :meth:`SyntaxMachine.feed`."""
        if state >= self.TRAILING:
            return state if not data.strip(_JSON_WHITESPACE) else DEAD
        following = self.inner.feed(state, data)
        if following != DEAD:
            return following
        if state == self.initial:
            body = data.lstrip(_JSON_WHITESPACE)
            if body != data:
                return self.feed(state, body) if body else state
        body = data.rstrip(_JSON_WHITESPACE)
        if body != data:
            inner = self.inner.feed(state, body) if body else state
            if inner != DEAD and self.inner.is_complete(inner):
                return inner + self.TRAILING
        return DEAD

    def is_complete(self, state: int) -> bool:
        """See :meth:`SyntaxMachine.is_complete`."""
        return state >= self.TRAILING or self.inner.is_complete(state)

    def packed(self, state: int) -> np.ndarray:
        """See :meth:`SyntaxMachine.packed`."""
        cached = self._cache.get(state)
        if cached is not None:
            return cached
        eos = self.eos_token_id
        if state >= self.TRAILING:
            bits = self._whitespace.copy()
        else:
            bits = self.inner.packed(state).copy()
            if state == self.initial or self.inner.is_complete(state):
                bits |= self._whitespace
            allowed = [t for t in self._mixed if self.feed(state, self.token_bytes[t]) != DEAD]  # type: ignore[arg-type]
            for token in allowed:
                bits[token >> 3] |= 1 << (token & 7)
        if eos is not None and self.is_complete(state):
            bits[eos >> 3] |= 1 << (eos & 7)
        if len(self._cache) < 4096:
            self._cache[state] = bits
        return bits


def _pack(tokens: list[int], vocab_size: int) -> np.ndarray:
    bits = np.zeros(vocab_size, dtype=bool)
    bits[tokens] = True
    return np.packbits(bits, bitorder="little")


_MACHINES: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], SyntaxMachine]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def syntax_machine(
    language: str,
    tokenizer: Any,
    *,
    vocab_size: int | None = None,
    schema: Any = None,
    python_version: tuple[int, int] = LATEST,
) -> SyntaxMachine:
    """The machine of ``language`` (``python`` or ``json``; ``schema`` types a JSON file)
    for a Hugging Face tokenizer or a :class:`Vocabulary`; built once and cached.

    Raises ``GrammarError`` for a schema the JSON Schema front end cannot compile and
    ``ValueError`` for an unknown language."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown syntax {language!r}; choose one of {', '.join(LANGUAGES)}")
    if schema is not None and language != "json":
        raise ValueError("a JSON Schema types JSON files only")
    schema_key = None
    if schema is not None:
        text = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)
        schema_key = hashlib.sha256(text.encode()).hexdigest()
    key = (language, vocab_size, schema_key, python_version if language == "python" else None)
    with _LOCK:
        per_tokenizer = _MACHINES.setdefault(tokenizer, {})
        machine = per_tokenizer.get(key)
        if machine is None:
            machine = _build(language, tokenizer, vocab_size, schema, python_version)
            per_tokenizer[key] = machine
    return machine


def _build(
    language: str, tokenizer: Any, vocab_size: int | None, schema: Any, version: tuple[int, int]
) -> SyntaxMachine:
    vocabulary = (
        tokenizer
        if isinstance(tokenizer, Vocabulary)
        else Vocabulary.for_tokenizer(tokenizer, vocab_size)
    )
    if language == "python":
        return PythonMachine(python_syntax(version), vocabulary)
    if schema is None:
        return GrammarMachine(compile(JSON_FILE, vocabulary, backend="python"), "json")
    compiled = compile(schema, vocabulary, format="json-schema", backend="python")
    return PaddedMachine(GrammarMachine(compiled, "json"))


def syntax_matcher(machine: SyntaxMachine) -> SyntaxMatcher:
    """A fresh matcher at the start of a file."""
    return SyntaxMatcher(machine)


__all__ = [
    "EXTENSIONS",
    "JSON_FILE",
    "LANGUAGES",
    "MAX_JSON_DEPTH",
    "GrammarError",
    "GrammarMachine",
    "PaddedMachine",
    "PythonMachine",
    "json_depth",
    "language_for_path",
    "syntax_machine",
    "syntax_matcher",
]
