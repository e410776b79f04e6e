"""The pure-Python engines behind the ``Matcher`` interface: the reference implementation.

``compile(..., backend="python")`` builds a :class:`ReferenceGrammar` whose matchers run
the Python DPDA or Earley engine with the numpy mask kernel (:mod:`token_masks`). The native
core (:class:`cad.grammar.cfg.CfgMatcher`) is tested against it and against brute force."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from cad.grammar.bitmask import fill_from_allowed
from cad.grammar.cfg.automaton import ByteAutomaton
from cad.grammar.cfg.dpda import DpdaAutomaton
from cad.grammar.cfg.earley import EarleyAutomaton
from cad.grammar.cfg.grammar_ir import Grammar
from cad.grammar.cfg.lr1 import LrTables
from cad.grammar.cfg.token_masks import MaskComputer
from cad.grammar.cfg.token_table import TokenTable

_FINISHED = -10
"""History entry after the end-of-sequence token."""
_MAX_FORCED_BYTES = 4096


@dataclass
class ReferenceGrammar:
    """A grammar bound to a vocabulary with a Python engine and its shared caches.

    Every matcher made from it shares the interned configurations, the transition table
    and the mask caches, so a second request with the same grammar starts warm."""

    grammar: Grammar
    engine: str
    automaton: ByteAutomaton
    tokens: TokenTable
    masks: MaskComputer
    compile_seconds: float
    lr_note: str = ""
    lr_states: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls, grammar: Grammar, tokens: TokenTable, tables: LrTables | None, lr_note: str
    ) -> ReferenceGrammar:
        """The DPDA over ``tables`` when given, else Earley over ``grammar``."""
        automaton = DpdaAutomaton(tables) if tables is not None else EarleyAutomaton(grammar)
        return cls(
            grammar=grammar,
            engine="dpda" if tables is not None else "earley",
            automaton=automaton,
            tokens=tokens,
            masks=MaskComputer(automaton, tokens),
            compile_seconds=0.0,
            lr_note=lr_note,
            lr_states=len(tables.actions) if tables is not None else 0,
        )

    @property
    def vocab_size(self) -> int:
        """Width of every mask."""
        return self.tokens.vocab_size

    def matcher(self) -> ReferenceCfgMatcher:
        """A fresh matcher at the start of the language (implements ``cad.grammar.Matcher``)."""
        return ReferenceCfgMatcher(self)

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a complete sentence of the grammar (token-free check)."""
        config = self.masks.transitions.walk(self.automaton.initial(), data)
        return config >= 0 and self.automaton.is_accepting(config)


class ReferenceCfgMatcher:
    """Incremental acceptor for one output: a history of configuration ids, so rollback is
    a slice and equal situations share every cache."""

    def __init__(self, compiled: ReferenceGrammar) -> None:
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

    def forced_bytes(self) -> bytes:
        """The bytes every continuation must start with, while exactly one byte can follow and
        the output is not yet a sentence (jump-forward decoding)."""
        config = self._history[-1]
        forced = bytearray()
        while config >= 0 and not self.compiled.automaton.is_accepting(config):
            live = [byte for byte in range(256) if self._masks.transitions.next(config, byte) >= 0]
            if len(live) != 1 or len(forced) >= _MAX_FORCED_BYTES:
                break
            forced.append(live[0])
            config = self._masks.transitions.next(config, live[0])
        return bytes(forced)
