"""The JSON syntax machines as they were built on the pure-Python engines: the oracles the
native machines are compared with.

:class:`ReferenceMachine` runs a grammar compiled with ``backend="python"``;
:class:`PaddedReference` allows white space around the text another machine accepts, token
split by token split, as a JSON Schema's file was once padded in Python."""

from __future__ import annotations

import numpy as np

from cad.grammar.cfg import ReferenceGrammar
from cad.grammar.syntax.machine import DEAD, SyntaxMachine

JSON_WHITESPACE = b" \t\n\r"


class ReferenceMachine:
    """A compiled grammar on the pure-Python engines as a syntax machine."""

    def __init__(self, compiled: ReferenceGrammar) -> None:
        self.language = "json"
        self.compiled = compiled
        vocabulary = compiled.tokens.vocabulary
        self.vocab_size = vocabulary.size
        self.eos_token_id = vocabulary.eos_token_id
        self.token_bytes = vocabulary.token_bytes
        self.initial = compiled.automaton.initial()

    def feed(self, state: int, data: bytes) -> int:
        following = self.compiled.masks.transitions.walk(state, data)
        return following if following >= 0 else DEAD

    def is_complete(self, state: int) -> bool:
        return self.compiled.automaton.is_accepting(state)

    def packed(self, state: int) -> np.ndarray:
        return self.compiled.masks.packed(state)


class PaddedReference:
    """``inner`` with any white space before and after its text.

    States: the inner state for the leading part and the value itself, and ``s + TRAILING``
    for "the inner text ended in ``s`` and only white space follows". A token is allowed
    when some split of its bytes into (leading white space | value | trailing white space)
    works; tokens that mix white space with other bytes are tried one by one."""

    TRAILING = 1 << 40

    def __init__(self, inner: SyntaxMachine) -> None:
        self.inner = inner
        self.language = inner.language
        self.vocab_size = inner.vocab_size
        self.eos_token_id = inner.eos_token_id
        self.token_bytes = inner.token_bytes
        self.initial = inner.initial
        self._whitespace = np.zeros(self.vocab_size, dtype=bool)
        self._mixed: list[int] = []
        for token, data in enumerate(self.token_bytes):
            stripped = data.strip(JSON_WHITESPACE) if data else None
            if data and not stripped:
                self._whitespace[token] = True
            elif data and stripped != data:
                self._mixed.append(token)

    def feed(self, state: int, data: bytes) -> int:
        if state >= self.TRAILING:
            return state if not data.strip(JSON_WHITESPACE) else DEAD
        following = self.inner.feed(state, data)
        if following != DEAD:
            return following
        if state == self.initial:
            body = data.lstrip(JSON_WHITESPACE)
            if body != data:
                return self.feed(state, body) if body else state
        body = data.rstrip(JSON_WHITESPACE)
        if body != data:
            inner = self.inner.feed(state, body) if body else state
            if inner != DEAD and self.inner.is_complete(inner):
                return inner + self.TRAILING
        return DEAD

    def is_complete(self, state: int) -> bool:
        return state >= self.TRAILING or self.inner.is_complete(state)

    def packed(self, state: int) -> np.ndarray:
        if state >= self.TRAILING:
            bits = self._whitespace.copy()
        else:
            bits = np.unpackbits(
                self.inner.packed(state), count=self.vocab_size, bitorder="little"
            ).astype(bool)
            if state == self.initial or self.inner.is_complete(state):
                bits |= self._whitespace
            for token in self._mixed:
                if self.feed(state, self.token_bytes[token]) != DEAD:  # type: ignore[arg-type]
                    bits[token] = True
        if self.eos_token_id is not None:
            bits[self.eos_token_id] = self.is_complete(state)
        return np.packbits(bits, bitorder="little")
