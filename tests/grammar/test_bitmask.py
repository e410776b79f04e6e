"""Packed token bitmasks: layout, in-place application, and agreement with ``allowed_tokens``."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cad.grammar import (
    ProgramMatcher,
    ProgramTokenIndex,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_width,
    compile,
    unpack_bitmask,
)
from cad.grammar.bitmask import fill_from_allowed, pack_allowed
from cad.resolver import Document


@given(st.lists(st.booleans(), min_size=1, max_size=200))
def test_pack_and_unpack_round_trip_with_the_shared_layout(bits: list[bool]) -> None:
    allowed = torch.tensor(bits)
    packed = pack_allowed(allowed)
    assert packed.dtype == torch.int32 and packed.shape == (bitmask_width(len(bits)),)
    for token, bit in enumerate(bits):
        word = int(packed[token // 32]) & 0xFFFFFFFF
        assert bool(word >> (token % 32) & 1) == bit
    assert torch.equal(unpack_bitmask(packed, len(bits)), allowed)


@given(st.integers(1, 100), st.integers(0, 40), st.integers(0, 2**31))
def test_apply_masks_exactly_the_disallowed_and_padded_columns(vocab: int, pad: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    allowed = torch.rand(vocab, generator=generator) < 0.5
    bitmask = allocate_token_bitmask(1, vocab)
    fill_from_allowed(bitmask, 0, allowed)
    logits = torch.randn(1, vocab + pad, generator=generator)
    expected = logits.clone()
    expected[0, :vocab][~allowed] = float("-inf")
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.equal(logits[0, :vocab], expected[0, :vocab])
    assert bool(torch.isinf(logits[0, vocab:]).all())


def test_fresh_bitmask_allows_everything() -> None:
    bitmask = allocate_token_bitmask(3, 70)
    assert bool(unpack_bitmask(bitmask, 70).all())


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31))
def test_program_matcher_bitmask_agrees_with_allowed_tokens(qwen2_tokenizer, seed: int) -> None:
    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer)
    document = Document("a = 1\nb = 2\nprint(a + b)\n")
    matcher = ProgramMatcher(index, [len(line) for line in document.lines], subline=True)
    rng = random.Random(seed)
    bitmask = allocate_token_bitmask(2, index.vocab_size)
    for _ in range(12):
        if matcher.is_accepting():
            break
        allowed = matcher.allowed_tokens()
        matcher.fill_next_token_bitmask(bitmask, row=1)
        assert torch.equal(unpack_bitmask(bitmask[1], index.vocab_size), allowed)
        choices = allowed.nonzero().flatten()
        assert matcher.accept_token(int(choices[rng.randrange(len(choices))]))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31))
def test_cfg_matcher_bitmask_agrees_with_allowed_tokens(qwen2_tokenizer, seed: int) -> None:
    compiled = compile('root ::= "[" [0-9]+ ("," [0-9]+)* "]"', qwen2_tokenizer)
    matcher = compiled.matcher()
    rng = random.Random(seed)
    bitmask = allocate_token_bitmask(1, matcher.vocab_size)
    for _ in range(8):
        allowed = matcher.allowed_tokens()
        matcher.fill_next_token_bitmask(bitmask)
        assert torch.equal(unpack_bitmask(bitmask[0], matcher.vocab_size), allowed)
        choices = allowed.nonzero().flatten()
        if len(choices) == 0:
            break
        assert matcher.accept_token(int(choices[rng.randrange(len(choices))]))


def _digits_matcher(tokenizer):
    return compile('root ::= "[" [0-9]+ ("," [0-9]+)* "]"', tokenizer).matcher()


def test_refilling_a_remembered_row_follows_the_matcher_and_the_row(qwen2_tokenizer) -> None:
    matcher = _digits_matcher(qwen2_tokenizer)
    vocab = matcher.vocab_size
    bitmask = allocate_token_bitmask(2, vocab)
    matcher.fill_next_token_bitmask(bitmask)
    opening = unpack_bitmask(bitmask[0], vocab).clone()
    assert torch.equal(opening, matcher.allowed_tokens())
    assert matcher.accept_token(qwen2_tokenizer.convert_tokens_to_ids("["))
    matcher.fill_next_token_bitmask(bitmask)  # the same tensor and row: written again
    assert torch.equal(unpack_bitmask(bitmask[0], vocab), matcher.allowed_tokens())
    assert not torch.equal(unpack_bitmask(bitmask[0], vocab), opening)
    matcher.fill_next_token_bitmask(bitmask, 1)  # another row of it
    assert torch.equal(bitmask[1], bitmask[0])


def test_a_row_whose_storage_changed_is_found_again(qwen2_tokenizer) -> None:
    matcher = _digits_matcher(qwen2_tokenizer)
    vocab = matcher.vocab_size
    bitmask = allocate_token_bitmask(1, vocab)
    matcher.fill_next_token_bitmask(bitmask)
    bitmask.set_(allocate_token_bitmask(1, vocab).untyped_storage())
    bitmask.resize_(1, bitmask_width(vocab))
    matcher.fill_next_token_bitmask(bitmask)
    assert torch.equal(unpack_bitmask(bitmask[0], vocab), matcher.allowed_tokens())


def test_wrong_bitmasks_are_refused_with_a_reason(qwen2_tokenizer) -> None:
    matcher = _digits_matcher(qwen2_tokenizer)
    vocab = matcher.vocab_size
    bitmask = allocate_token_bitmask(1, vocab)
    matcher.fill_next_token_bitmask(bitmask)
    with pytest.raises(TypeError, match="CPU int32 tensor"):
        matcher.fill_next_token_bitmask(bitmask.to(torch.int64))
    with pytest.raises(IndexError, match="outside its 1 rows"):
        matcher.fill_next_token_bitmask(bitmask, 1)
    with pytest.raises(ValueError, match="contiguous"):
        matcher.fill_next_token_bitmask(torch.zeros(bitmask_width(vocab), 2, dtype=torch.int32).T)
    with pytest.raises(ValueError, match="words but the vocabulary needs"):
        matcher.fill_next_token_bitmask(allocate_token_bitmask(1, vocab // 2))
