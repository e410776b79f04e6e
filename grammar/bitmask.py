"""Packed token bitmasks, owned by the caller and filled in place by matchers.

A bitmask row holds one bit per vocabulary id in ``int32`` words: bit ``j`` of word ``i`` is
token ``32 * i + j``, set where the token is allowed (the layout XGrammar and llguidance use,
so a logits processor can take masks from any of them). The caller allocates once per batch,
each matcher fills its row (``Matcher.fill_next_token_bitmask``), and
:func:`apply_token_bitmask_inplace` masks the logits on their own device with tensor
operations only: no host synchronisation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from cad.grammar import _native

_BITS = 32
_MAX_FILL_THREADS = 8


def bitmask_width(vocab_size: int) -> int:
    """Number of ``int32`` words that hold one bit per token of ``vocab_size``."""
    return (vocab_size + _BITS - 1) // _BITS


def allocate_token_bitmask(
    batch: int, vocab_size: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """A ``(batch, bitmask_width(vocab_size))`` ``int32`` bitmask with every token allowed."""
    if batch < 1 or vocab_size < 1:
        raise ValueError(
            f"a bitmask needs batch >= 1 and vocab_size >= 1, not {batch}, {vocab_size}"
        )
    return torch.full((batch, bitmask_width(vocab_size)), -1, dtype=torch.int32, device=device)


def _bit_positions(device: torch.device) -> torch.Tensor:
    return torch.arange(_BITS, dtype=torch.int32, device=device)


def pack_allowed(allowed: torch.Tensor) -> torch.Tensor:
    """The bitmask row (``int32``, one word per 32 tokens) of a ``(vocab,)`` bool mask."""
    vocab_size = allowed.shape[-1]
    padded = torch.zeros(
        bitmask_width(vocab_size) * _BITS, dtype=torch.int64, device=allowed.device
    )
    padded[:vocab_size] = allowed.to(torch.int64)
    words = (padded.view(-1, _BITS) << _bit_positions(allowed.device).to(torch.int64)).sum(dim=1)
    return _to_int32(words)


def _to_int32(words: torch.Tensor) -> torch.Tensor:
    """Reinterpret unsigned 32-bit values held in int64 as two's-complement ``int32``."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The bool mask ``(..., vocab_size)`` of a bitmask ``(..., width)``."""
    bits = (bitmask.unsqueeze(-1) >> _bit_positions(bitmask.device)) & 1
    return bits.flatten(-2)[..., :vocab_size].bool()


def fill_from_allowed(bitmask: torch.Tensor, row: int, allowed: torch.Tensor) -> None:
    """Write a ``(vocab,)`` bool mask into ``bitmask[row]`` (the reference fill every Python
    matcher uses; native matchers write their rows directly)."""
    packed = pack_allowed(allowed)
    bitmask[row].zero_()
    bitmask[row, : packed.shape[0]] = packed.to(bitmask.device)


def row_address(bitmask: torch.Tensor, row: int) -> tuple[int, int]:
    """The address and word count of ``bitmask[row]`` for a native fill, after checking that
    it is a CPU ``int32`` bitmask (``(batch, width)``, or ``(width,)`` with row 0) whose rows
    are contiguous."""
    if bitmask.dtype is not torch.int32 or not bitmask.is_cpu:
        raise TypeError(
            f"a token bitmask is a CPU int32 tensor, not {bitmask.dtype} on {bitmask.device}"
        )
    shape = bitmask.shape
    strides = bitmask.stride()
    if len(shape) == 2:
        rows, width = shape
        stride, step = strides
    elif len(shape) == 1:
        rows, width, stride, step = 1, shape[0], 0, strides[0]
    else:
        raise ValueError(f"a token bitmask has 1 or 2 dimensions, not {len(shape)}")
    if not 0 <= row < rows:
        raise IndexError(f"bitmask row {row} is outside its {rows} rows")
    if step != 1 and width > 1:
        raise ValueError("the rows of a token bitmask must be contiguous")
    return bitmask.data_ptr() + 4 * row * stride, width


def fill_next_token_bitmasks(
    matchers: Sequence[Any], bitmask: torch.Tensor, *, threads: int | None = None
) -> None:
    """Fill ``bitmask[i]`` with the allowed tokens of ``matchers[i]``, for every i.

    Native matchers (the program FSM and compiled grammars) are filled together in native
    code on up to ``threads`` threads (default: the machine's cores, at most 8) with the GIL
    released; a matcher listed twice is filled once and its row copied. Any other matcher
    fills its own row with its ``fill_next_token_bitmask``."""
    native: list[Any] = []
    addresses: list[int] = []
    first_row: dict[int, int] = {}
    copies: list[tuple[int, int]] = []
    width = 0
    for row, matcher in enumerate(matchers):
        address, width = row_address(bitmask, row)
        if not isinstance(matcher, _native.NativeMatcher):
            matcher.fill_next_token_bitmask(bitmask, row)
        elif id(matcher) in first_row:
            copies.append((row, first_row[id(matcher)]))
        else:
            first_row[id(matcher)] = row
            native.append(matcher)
            addresses.append(address)
    if native:
        threads = threads or min(os.cpu_count() or 1, _MAX_FILL_THREADS)
        _native.fill_rows(native, addresses, width, threads)
    for row, source in copies:
        bitmask[row] = bitmask[source]


def apply_token_bitmask_inplace(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Set ``logits`` to ``-inf`` wherever ``bitmask`` disallows the token, in place.

    ``logits`` is ``(vocab,)`` or ``(batch, vocab)`` and ``bitmask`` the matching ``(width,)``
    or ``(batch, width)``; logits columns beyond the bitmask (a model's padded vocabulary) are
    disallowed. Runs on the logits' device without reading anything back to the host."""
    mask = bitmask.to(logits.device, non_blocking=True)
    vocab = logits.shape[-1]
    covered = min(vocab, mask.shape[-1] * _BITS)
    allowed = unpack_bitmask(mask, covered)
    logits[..., :covered].masked_fill_(~allowed, float("-inf"))
    if covered < vocab:
        logits[..., covered:] = float("-inf")


def bit_values(device: torch.device | str | None = None) -> torch.Tensor:
    """The 32 single-bit ``int32`` words (bit ``j`` set in word ``j``) that
    :func:`allowed_argmax` tests a bitmask's words against."""
    return torch.tensor([1 << j for j in range(_BITS)], dtype=torch.int64, device=device).to(
        torch.int32
    )


def allowed_argmax(logits: torch.Tensor, bitmask: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """The allowed token with the highest logit, as a 0-d tensor on the logits' device:
    ``logits`` ``(vocab,)`` and the ``bitmask`` row ``(width,)`` on one device, ``bits``
    :func:`bit_values` there. Columns beyond the bitmask are disallowed and ``logits`` are
    left as they are; the same token as :func:`apply_token_bitmask_inplace` then ``argmax``
    (the lowest id among equal logits, a NaN first), in four kernels (test, compare, select,
    argmax) where masking in place takes six: what a GPU's replayed choice runs."""
    covered = min(logits.shape[-1], bitmask.shape[-1] * _BITS)
    allowed = (bitmask.unsqueeze(-1) & bits).flatten()[:covered].ne(0)
    return torch.where(allowed, logits[:covered], float("-inf")).argmax()


def masked_argmax(logits: torch.Tensor, bitmask: torch.Tensor) -> int | None:
    """The allowed token with the highest logit, read on the host in one native pass:
    ``logits`` one float32 row ``(vocab,)`` on the CPU, ``bitmask`` its ``(width,)`` row
    (columns beyond it are disallowed, as :func:`apply_token_bitmask_inplace` does). The
    lowest id among equal logits, as masking and ``argmax`` give, never a NaN and never a
    disallowed id; None when no allowed token has a logit other than NaN. Nothing
    vocabulary-sized is allocated: about 0.1 ms for 152k allowed tokens, far less for a
    small set. ``logits`` is left as it is."""
    if logits.dtype is not torch.float32 or not logits.is_cpu or logits.dim() != 1:
        raise TypeError(
            f"masked_argmax takes one float32 row of logits on the CPU, not {logits.dtype} "
            f"{tuple(logits.shape)} on {logits.device}"
        )
    address, width = row_address(bitmask, 0)
    row = logits.contiguous()
    token = _native.masked_argmax(row.data_ptr(), row.shape[0], address, width)
    return None if token < 0 else token


def allowed_ids(bitmask: torch.Tensor, width: int, limit: int) -> torch.Tensor | None:
    """The ids below ``width`` that the packed ``bitmask`` row ``(words,)`` allows, in
    increasing order (int64), or None when there are more than ``limit``: one native pass
    that stops at the ``limit + 1``-th. What choosing among a few allowed tokens needs
    without the logits of the whole vocabulary."""
    address, words = row_address(bitmask, 0)
    out = torch.empty(limit, dtype=torch.int32)
    count = _native.allowed_ids(address, words, width, out.data_ptr(), limit)
    return None if count < 0 else out[:count].long()


class NativeMaskFill:
    """The mask side of a :class:`cad.grammar.Matcher` whose native base class writes the
    rows itself (``fill_next_token_bitmask``, ``fill_bools`` and ``vocab_size`` come from that
    base; the first fill into a row checks it with :func:`row_address`)."""

    def allowed_tokens(self) -> torch.Tensor:
        """A fresh ``(vocab_size,)`` bool tensor of the tokens allowed next (derived from the
        bitmask; decoders should prefer ``fill_next_token_bitmask``)."""
        allowed = torch.empty(self.vocab_size, dtype=torch.bool)  # type: ignore[attr-defined]
        self.fill_bools(allowed.data_ptr())  # type: ignore[attr-defined]
        return allowed
