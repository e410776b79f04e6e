"""The one interface every masking engine implements: the program FSM, Earley and the DPDA."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Matcher(Protocol):
    """Incremental acceptor over token ids.

    A decoder asks ``allowed_tokens()`` for the vocabulary-sized mask of tokens that keep
    the output inside the language, feeds the chosen token to ``accept_token`` and may undo
    the last ``k`` accepted tokens with ``rollback(k)`` (speculation, drafts).
    """

    vocab_size: int

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; returns False (and does not advance) if it is not allowed."""
        ...

    def allowed_tokens(self) -> torch.Tensor:
        """A ``torch.bool`` tensor of shape ``(vocab_size,)``: True where a token may follow."""
        ...

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens."""
        ...

    def is_accepting(self) -> bool:
        """Whether the tokens accepted so far form a complete sentence of the language."""
        ...
