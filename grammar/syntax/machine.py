"""One interface for every language: a *syntax machine* over interned int states, and the
:class:`SyntaxMatcher` that turns any machine into a :class:`cad.grammar.Matcher`.

A machine answers four questions about a state (the text read so far, interned): what
state follows some bytes (or :data:`DEAD` when no file of the language starts that way),
whether the text is a whole file, and which tokens may follow (packed bits, the
end-of-sequence token included exactly when the text is whole). Program mode, rewrite mode
and ranges all speak to a language through this interface.

A machine may drop its states between documents to bound its memory (Python does, see
:class:`cad.grammar.syntax.python_syntax.PythonSyntax`): whatever keeps states across calls
registers with :func:`hold_states` first, as the matchers and region constraints here do.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

DEAD = -1
"""The bytes cannot continue any file of the language."""


class SyntaxMachine(Protocol):
    """A language's incremental recogniser bound to one vocabulary."""

    language: str
    vocab_size: int
    eos_token_id: int | None
    token_bytes: tuple[bytes | None, ...]
    initial: int

    def feed(self, state: int, data: bytes) -> int:
        """The state after ``data``; :data:`DEAD` if no file of the language starts with the
        text so far followed by ``data``."""
        ...

    def is_complete(self, state: int) -> bool:
        """Whether the text so far is a whole file."""
        ...

    def packed(self, state: int) -> np.ndarray:
        """The allowed tokens after ``state`` as packed little-endian bits (``uint8``, one
        bit per token id); shared, do not modify."""
        ...


def hold_states(machine: SyntaxMachine, holder: object, *, fresh: bool) -> None:
    """Keep ``machine``'s states valid while ``holder`` lives. ``fresh``: the holder starts a
    new document and holds no state yet, so the machine may first drop the states nothing
    holds. Machines that never drop states (JSON) need nothing."""
    recogniser = getattr(machine, "syntax", None)
    hold = getattr(recogniser, "hold", None)
    if hold is not None:
        hold(holder, fresh=fresh)


def packed_to_bool(packed: np.ndarray, vocab_size: int) -> torch.Tensor:
    """A ``(vocab_size,)`` bool tensor from packed bits."""
    bits = np.unpackbits(packed, count=vocab_size, bitorder="little").view(np.bool_)
    return torch.from_numpy(bits.copy())


def write_bitmask_row(bitmask: torch.Tensor, row: int, packed: np.ndarray) -> None:
    """Copy packed bits into ``bitmask[row]`` (``int32`` words, 32 tokens each, token
    ``32 * i + j`` at bit ``j`` of word ``i``: the packed bytes read as little-endian
    words)."""
    width = bitmask.shape[-1]
    words = np.zeros(width * 4, dtype=np.uint8)
    count = min(len(packed), width * 4)
    words[:count] = packed[:count]
    bitmask[row].copy_(torch.from_numpy(words.view("<i4").astype(np.int32)))


class SyntaxMatcher:
    """A :class:`cad.grammar.Matcher` over a :class:`SyntaxMachine`: the history is a list of
    states, so rollback is a slice and a state met again costs a lookup."""

    def __init__(self, machine: SyntaxMachine, state: int | None = None) -> None:
        hold_states(machine, self, fresh=state is None or state == machine.initial)
        self.machine = machine
        self.vocab_size = machine.vocab_size
        self._history = [machine.initial if state is None else state]
        self._finished = False
        self._token_steps: dict[tuple[int, int], int] = {}

    @property
    def state(self) -> int:
        """The current machine state."""
        return self._history[-1]

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if it would leave the language."""
        if self._finished or not 0 <= token_id < self.vocab_size:
            return False
        if token_id == self.machine.eos_token_id:
            if not self.machine.is_complete(self.state):
                return False
            self._finished = True
            self._history.append(self.state)
            return True
        key = (self.state, token_id)
        following = self._token_steps.get(key)
        if following is None:
            data = self.machine.token_bytes[token_id]
            following = self.machine.feed(self.state, data) if data else DEAD
            self._token_steps[key] = following
        if following == DEAD:
            return False
        self._history.append(following)
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (text that is not tied to token boundaries)."""
        if self._finished:
            return False
        following = self.machine.feed(self.state, data) if data else self.state
        if following == DEAD:
            return False
        self._history.append(following)
        return True

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (or byte runs)."""
        if k < 0 or k >= len(self._history):
            raise ValueError(f"cannot roll back {k} of {len(self._history) - 1} steps")
        if k:
            if self._finished:
                self._finished = False
            del self._history[-k:]

    def is_accepting(self) -> bool:
        """Whether the text so far is a whole file (or the end-of-sequence token is in)."""
        return self._finished or self.machine.is_complete(self.state)

    def is_finished(self) -> bool:
        """Whether the end-of-sequence token has been accepted."""
        return self._finished

    def packed(self) -> np.ndarray:
        """The allowed tokens as packed bits (see :meth:`SyntaxMachine.packed`)."""
        if self._finished:
            return np.zeros((self.vocab_size + 7) // 8, dtype=np.uint8)
        return self.machine.packed(self.state)

    def allowed_tokens(self) -> torch.Tensor:
        """A ``(vocab_size,)`` bool tensor: the tokens that keep the text a prefix of a file
        of the language (end-of-sequence once it is a whole file)."""
        return packed_to_bool(self.packed(), self.vocab_size)

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed tokens into ``bitmask[row]`` (see :mod:`cad.grammar.bitmask`)."""
        write_bitmask_row(bitmask, row, self.packed())
