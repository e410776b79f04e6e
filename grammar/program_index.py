"""Everything the program FSM precomputes once per tokenizer, in pure Python: the reference
for the native index (:class:`cad.grammar.ProgramTokenIndex`).

A token's fate in most states does not depend on the document: a gen body takes any valid
UTF-8 free of ``</gen>``, literals and op openers are fixed. Only bytes read inside a number
do. So for each state with its numbers erased (:func:`abstract_state`) the index keeps the
tokens that are allowed whatever the document (``static``) and the few that must be checked
against it (``dynamic``); tokens that are pure digit strings are checked in bulk, by length,
with tensor arithmetic.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from cad.grammar.program_states import (
    DIGITS,
    END,
    GEN_CLOSE,
    ProgramStructure,
    State,
    representative_state,
    utf8_step,
)
from cad.grammar.vocab import Vocabulary

_MAX_DIGIT_TOKEN = 18


class ShapeEntry(NamedTuple):
    """Masks for one abstract state: ``static`` tokens are allowed for every document,
    ``dynamic`` ones (token ids) read number bytes and must be walked per document."""

    static: torch.Tensor
    dynamic: tuple[int, ...]


class DigitGroup(NamedTuple):
    """The pure digit tokens of one length: ids, numeric values and leading-zero flags."""

    ids: torch.Tensor
    values: torch.Tensor
    leading_zero: torch.Tensor


@dataclass(eq=False)
class ReferenceProgramIndex:
    """Per-tokenizer tables shared by every program matcher: token bytes, tokens by first byte,
    the gen-body masks, digit tokens by length and (filled on first use) the masks of every
    abstract state."""

    vocabulary: Vocabulary
    by_first_byte: tuple[tuple[int, ...], ...]
    gen_masks: dict[tuple[int, int], torch.Tensor]
    digit_groups: dict[int, DigitGroup]
    digit_token_ids: frozenset[int]
    shapes: dict[tuple[tuple[bool, bool], State], ShapeEntry]

    @property
    def vocab_size(self) -> int:
        """Width of every mask."""
        return self.vocabulary.size

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> ReferenceProgramIndex:
        """The index for ``tokenizer`` padded to ``vocab_size``; built once, then cached."""
        per_tokenizer = _INDEXES.setdefault(tokenizer, {})
        if vocab_size not in per_tokenizer:
            per_tokenizer[vocab_size] = cls.build(Vocabulary.from_tokenizer(tokenizer, vocab_size))
        return per_tokenizer[vocab_size]

    @classmethod
    def build(cls, vocabulary: Vocabulary) -> ReferenceProgramIndex:
        """Group tokens by first byte, collect digit tokens and compute the gen-body masks."""
        by_first: list[list[int]] = [[] for _ in range(256)]
        for token, data in enumerate(vocabulary.token_bytes):
            if data:
                by_first[data[0]].append(token)
        digit_ids = [
            token
            for token, data in enumerate(vocabulary.token_bytes)
            if data and len(data) <= _MAX_DIGIT_TOKEN and all(byte in DIGITS for byte in data)
        ]
        index = cls(
            vocabulary,
            tuple(tuple(tokens) for tokens in by_first),
            {},
            _digit_groups(vocabulary, digit_ids),
            frozenset(digit_ids),
            {},
        )
        index.gen_masks.update(_gen_masks(vocabulary))
        return index

    def shape(self, structure: ProgramStructure, abstract: State) -> ShapeEntry:
        """The :class:`ShapeEntry` of ``abstract`` (a state from :func:`abstract_state`) under
        ``structure``'s openers; computed on first use, then shared by all matchers."""
        key = (structure.shape_key, abstract)
        entry = self.shapes.get(key)
        if entry is None:
            entry = self._compute_shape(ProgramStructure.shape(*structure.shape_key), abstract)
            self.shapes[key] = entry
        return entry

    def _compute_shape(self, shape: ProgramStructure, abstract: State) -> ShapeEntry:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        if abstract == END:
            eos = self.vocabulary.eos_token_id
            if eos is not None and 0 <= eos < self.vocab_size:
                mask[eos] = True
            return ShapeEntry(mask, ())
        state = representative_state(abstract)
        skip_digits = state[0] == "num"
        token_bytes = self.vocabulary.token_bytes
        static: list[int] = []
        dynamic: list[int] = []
        for byte in shape.next_bytes(state):
            for token in self.by_first_byte[byte]:
                if skip_digits and token in self.digit_token_ids:
                    continue
                end, touched = shape.walk_touching_numbers(state, token_bytes[token])  # type: ignore[arg-type]
                if end is not None:
                    (dynamic if touched else static).append(token)
        mask[static] = True
        return ShapeEntry(mask, tuple(dynamic))

    def add_digit_tokens(self, mask: torch.Tensor, digits: bytes, low: int, high: int) -> None:
        """Set ``mask`` at every pure digit token that keeps ``digits`` a prefix of a number in
        ``[low, high]`` (no leading zeros)."""
        width = len(str(high))
        base = int(digits) if digits else 0
        for length, group in self.digit_groups.items():
            total = len(digits) + length
            if total > width or low > high:
                continue
            grown = group.values + base * 10**length
            ok = torch.zeros_like(group.leading_zero)
            for extra in range(width - total + 1):
                scale = 10**extra
                ok |= (grown * scale <= high) & ((grown + 1) * scale - 1 >= low)
            if not digits:
                ok &= ~group.leading_zero
            mask[group.ids[ok]] = True


def _digit_groups(vocabulary: Vocabulary, digit_ids: list[int]) -> dict[int, DigitGroup]:
    by_length: dict[int, list[int]] = {}
    for token in digit_ids:
        by_length.setdefault(len(vocabulary.token_bytes[token]), []).append(token)  # type: ignore[arg-type]
    groups: dict[int, DigitGroup] = {}
    for length, tokens in sorted(by_length.items()):
        texts = [vocabulary.token_bytes[token] for token in tokens]
        groups[length] = DigitGroup(
            torch.tensor(tokens, dtype=torch.long),
            torch.tensor([int(text) for text in texts], dtype=torch.long),  # type: ignore[arg-type]
            torch.tensor([text[:1] == b"0" for text in texts], dtype=torch.bool),
        )
    return groups


def _gen_masks(vocabulary: Vocabulary) -> dict[tuple[int, int], torch.Tensor]:
    """Masks for every gen-body state (pending UTF-8 state, matched part of ``</gen>``).

    A token is allowed when its bytes continue valid UTF-8 and do not complete ``</gen>`` before
    the token's last bytes, which may be ``</gen>`` and the op's newline."""
    keys = [(0, matched) for matched in range(len(GEN_CLOSE))]
    keys += [(pending, 0) for pending in range(1, 8)]
    structure = ProgramStructure.shape(copies=False, subline=False)
    plain: list[int] = []
    other: list[int] = []
    for token, data in enumerate(vocabulary.token_bytes):
        if not data:
            continue
        if b"<" in data or _utf8_state(data) != 0:
            other.append(token)
        else:
            plain.append(token)
    masks: dict[tuple[int, int], torch.Tensor] = {}
    for pending, matched in keys:
        mask = torch.zeros(vocabulary.size, dtype=torch.bool)
        if pending == 0:
            mask[plain] = True
            suspects = list(other)
            if matched:
                closing = [t for t in plain if vocabulary.token_bytes[t][0] == GEN_CLOSE[matched]]  # type: ignore[index]
                mask[closing] = False
                suspects += closing
        else:
            suspects = [
                token
                for token in other
                if 0x80 <= vocabulary.token_bytes[token][0] < 0xC0  # type: ignore[index]
            ]
        state = ("gen", pending, matched)
        allowed = [
            token
            for token in suspects
            if structure.walk(state, vocabulary.token_bytes[token], cross_ops=False) is not None  # type: ignore[arg-type]
        ]
        mask[allowed] = True
        masks[(pending, matched)] = mask
    return masks


def _utf8_state(data: bytes) -> int | None:
    """The UTF-8 validator's state after ``data`` from a character start (None: invalid)."""
    pending: int | None = 0
    for byte in data:
        pending = utf8_step(pending, byte)  # type: ignore[arg-type]
        if pending is None:
            return None
    return pending


_INDEXES: weakref.WeakKeyDictionary[Any, dict[int | None, ReferenceProgramIndex]] = (
    weakref.WeakKeyDictionary()
)
