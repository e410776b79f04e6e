"""The ``Matcher`` over a compiled context-free grammar (either engine)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cad.grammar.bitmask import fill_from_allowed

if TYPE_CHECKING:
    from cad.grammar.cfg.compiled import CompiledGrammar

_FINISHED = -10
"""History entry after the end-of-sequence token."""


class CfgMatcher:
    """Incremental acceptor for one output: a history of configuration ids, so rollback is
    a slice and equal situations share every cache."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.vocab_size = compiled.tokens.vocab_size
        self._masks = compiled.masks
        self._token_bytes = compiled.tokens.vocabulary.token_bytes
        self._history = [compiled.automaton.initial()]

    @property
    def config(self) -> int:
        """The current configuration id (negative once the end-of-sequence token is in)."""
        return self._history[-1]

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the grammar does not allow it."""
        config = self._history[-1]
        if config == _FINISHED or not 0 <= token_id < self.vocab_size:
            return False
        if token_id == self.compiled.tokens.eos_token_id:
            if not self.compiled.automaton.is_accepting(config):
                return False
            self._history.append(_FINISHED)
            return True
        data = self._token_bytes[token_id]
        if not data:
            return False
        following = self._masks.transitions.walk(config, data)
        if following < 0:
            return False
        self._history.append(following)
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (not tied to token boundaries); False leaves no change."""
        config = self._history[-1]
        if config == _FINISHED:
            return False
        following = self._masks.transitions.walk(config, data)
        if following < 0:
            return False
        self._history.append(following)
        return True

    def allowed_tokens(self) -> torch.Tensor:
        """Bool mask of shape (vocab_size,): the tokens that keep the output in the language."""
        config = self._history[-1]
        if config == _FINISHED:
            return torch.zeros(self.vocab_size, dtype=torch.bool)
        return self._masks.mask(config)

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write :meth:`allowed_tokens` into ``bitmask[row]`` (packed, see
        :mod:`cad.grammar.bitmask`)."""
        fill_from_allowed(bitmask, row, self.allowed_tokens())

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (or byte runs)."""
        if k < 0 or k >= len(self._history):
            raise ValueError(f"cannot roll back {k} of {len(self._history) - 1} accepted tokens")
        if k:
            del self._history[-k:]

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete sentence (or has ended with EOS)."""
        config = self._history[-1]
        return config == _FINISHED or self.compiled.automaton.is_accepting(config)

    def is_finished(self) -> bool:
        """Whether the end-of-sequence token has been accepted."""
        return self._history[-1] == _FINISHED
