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
    allowed_argmax,
    apply_token_bitmask_inplace,
    bit_values,
    bitmask_width,
    compile,
    masked_argmax,
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


LOGIT_VALUES = st.sampled_from([0.0, 0.5, -1.0, 2.0, float("-inf"), float("inf"), float("nan")])
"""Few distinct values, so that ties are common; infinities and NaN among them."""
WORDS = st.sampled_from([0, -1, 1, 5, -(2**31), 2**31 - 1]) | st.integers(-(2**31), 2**31 - 1)
"""Bitmask words: none allowed, all allowed (-1), single bits and any pattern."""


@settings(max_examples=300)
@given(
    st.lists(WORDS, min_size=1, max_size=6),
    st.lists(LOGIT_VALUES, min_size=1, max_size=200),
)
def test_masked_argmax_is_the_first_best_allowed_logit(words: list[int], values: list[float]):
    """Whole words (all allowed, none) and single bits, rows wider and narrower than the
    bitmask: the lowest allowed id of the highest logit other than NaN, None if there is
    none, and equal to masking and ``argmax`` whenever an allowed logit is finite."""
    bitmask = torch.tensor(words, dtype=torch.int32)
    logits = torch.tensor(values, dtype=torch.float32)
    allowed = [
        token
        for token in range(min(len(values), 32 * len(words)))
        if (words[token // 32] >> (token % 32)) & 1 and values[token] == values[token]
    ]
    best = max((values[token] for token in allowed), default=None)
    expected = next((token for token in allowed if values[token] == best), None)
    assert masked_argmax(logits, bitmask) == expected
    if expected is not None and abs(best) != float("inf") and not any(v != v for v in values):
        masked = logits.clone()
        apply_token_bitmask_inplace(masked, bitmask)
        assert int(masked.argmax()) == expected
    assert [repr(value) for value in logits.tolist()] == [repr(value) for value in values]


@settings(max_examples=300)
@given(
    st.lists(WORDS, min_size=1, max_size=6),
    st.lists(LOGIT_VALUES, min_size=1, max_size=200),
    st.sampled_from([torch.float32, torch.bfloat16]),
)
def test_allowed_argmax_chooses_what_masking_in_place_then_argmax_chooses(
    words: list[int], values: list[float], dtype: torch.dtype
):
    """Rows wider and narrower than the bitmask, ties, infinities and NaN, in both logit
    dtypes a model gives: the same token as the in-place masking it replaces, and the
    logits untouched."""
    bitmask = torch.tensor(words, dtype=torch.int32)
    logits = torch.tensor(values, dtype=dtype)
    masked = logits.clone()
    apply_token_bitmask_inplace(masked, bitmask)
    before = logits.clone()
    chosen = allowed_argmax(logits, bitmask, bit_values())
    assert chosen.dim() == 0 and int(chosen) == int(masked.argmax())
    assert torch.equal(logits.isnan(), before.isnan())
    assert torch.equal(logits.nan_to_num(), before.nan_to_num())


def test_masked_argmax_takes_one_float32_cpu_row() -> None:
    bitmask = allocate_token_bitmask(1, 64)
    with pytest.raises(TypeError, match="float32"):
        masked_argmax(torch.zeros(64, dtype=torch.float64), bitmask[0])
    with pytest.raises(TypeError, match="one float32 row"):
        masked_argmax(torch.zeros(2, 64), bitmask[0])
    with pytest.raises(TypeError, match="int32"):
        masked_argmax(torch.zeros(64), bitmask[0].to(torch.int64))
    assert masked_argmax(torch.arange(128.0)[::2], bitmask[0]) == 63  # strided: copied


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


def test_allowed_ids_lists_the_set_bits_below_the_width_and_stops_past_the_limit() -> None:
    from cad.grammar import allowed_ids

    bitmask = allocate_token_bitmask(1, 200)
    bitmask.zero_()
    ids = [0, 5, 31, 32, 63, 64, 150, 199]
    for token in ids:
        word, bit = divmod(token, 32)
        value = (int(bitmask[0, word]) & 0xFFFFFFFF) | (1 << bit)
        bitmask[0, word] = value - (1 << 32) if value >= 1 << 31 else value
    assert allowed_ids(bitmask[0], 200, 8).tolist() == ids
    assert allowed_ids(bitmask[0], 200, 7) is None
    assert allowed_ids(bitmask[0], 64, 8).tolist() == [0, 5, 31, 32, 63]
    bitmask.zero_()
    assert allowed_ids(bitmask[0], 200, 4).tolist() == []
