"""The one interface every masking engine implements: the program FSM, Earley and the DPDA."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Matcher(Protocol):
    """Incremental acceptor over token ids.

    A decoder has the matcher fill its row of a packed bitmask
    (``fill_next_token_bitmask``, see :mod:`cad.grammar.bitmask`) with the tokens that keep
    the output inside the language, feeds the chosen token to ``accept_token`` and may undo
    the last ``k`` accepted tokens with ``rollback(k)`` (speculation, drafts).
    ``allowed_tokens()`` gives the same set as a bool tensor, for convenience.
    """

    vocab_size: int

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; returns False (and does not advance) if it is not allowed."""
        ...

    def allowed_tokens(self) -> torch.Tensor:
        """A ``torch.bool`` tensor of shape ``(vocab_size,)``: True where a token may follow."""
        ...

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed set into ``bitmask[row]`` (``int32`` words, 32 tokens each)."""
        ...

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens."""
        ...

    def is_accepting(self) -> bool:
        """Whether the tokens accepted so far form a complete sentence of the language."""
        ...
