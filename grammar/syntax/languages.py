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

from cad.grammar.cfg import CompiledGrammar, GrammarError, compile, compile_grammar, front_end
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

MAX_JSON_DEPTH = 1_000
"""The deepest nesting of arrays and objects the JSON machines follow. A state is the
parser's whole stack: every level adds about a dozen stack nodes that the states share
(under a kilobyte; 1,000 levels take well under a megabyte), and every mask copies its
state's stack (40 µs at 1,000 levels), so a file of a few hundred kilobytes of brackets
would cost time quadratic in its depth."""
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
    """A compiled byte-level grammar (JSON, a JSON Schema) as a syntax machine, run by the
    native core: states are the grammar's shared parse states (a DPDA's whole stack or an
    Earley state, interned), which stay valid while the grammar lives."""

    def __init__(self, compiled: CompiledGrammar, language: str) -> None:
        self.language = language
        self.compiled = compiled
        vocabulary = compiled.vocabulary
        self.vocab_size = vocabulary.size
        self.eos_token_id = vocabulary.eos_token_id
        self.token_bytes = vocabulary.token_bytes
        self.initial = compiled.native.initial_state()
        self._native = compiled.native

    def feed(self, state: int, data: bytes) -> int:
        """See :meth:`SyntaxMachine.feed`."""
        return self._native.feed_state(state, data)

    def is_complete(self, state: int) -> bool:
        """See :meth:`SyntaxMachine.is_complete`."""
        return self._native.state_accepting(state)

    def packed(self, state: int) -> np.ndarray:
        """See :meth:`SyntaxMachine.packed`."""
        return self._native.packed_state(state)


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
        return GrammarMachine(compile(JSON_FILE, vocabulary), "json")
    grammar, _ = front_end(schema, format="json-schema", file=True)
    return GrammarMachine(compile_grammar(grammar, vocabulary), "json")


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
    "PythonMachine",
    "json_depth",
    "language_for_path",
    "syntax_machine",
    "syntax_matcher",
]
