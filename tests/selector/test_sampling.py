"""Token choice: under packed bitmasks, sampled by inverse CDF from host uniforms, and the
speculative rule for drafted tokens, all keeping the model's distribution."""

from __future__ import annotations

import threading

import pytest
import torch

from cad.grammar import allocate_token_bitmask
from cad.grammar.bitmask import fill_from_allowed
from cad.selector.sampling import (
    Sampling,
    TokenChooser,
    distribution,
    exponential_noise,
    graphed_greedy,
    race,
    speculative_choices,
)

PROBS = torch.tensor([0.05, 0.4, 0.1, 0.25, 0.2])


@pytest.mark.parametrize("drafted", [[1, 3], [4], [0, 2, 3], [], [1, 3, 4, 0, 2]])
def test_speculative_choices_keep_the_distribution(drafted: list[int]) -> None:
    generator = torch.Generator().manual_seed(len(drafted))
    draws = 6000
    picks = speculative_choices(
        PROBS.log().expand(draws, 5), [drafted] * draws, Sampling(temperature=1.0), generator
    )
    counts = torch.bincount(torch.tensor(picks), minlength=5)
    torch.testing.assert_close(counts / draws, PROBS, atol=0.025, rtol=0)


def test_the_exponential_race_samples_the_distribution_and_never_a_token_without_mass() -> None:
    generator = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.0, 0.3, 0.0, 0.1, 0.6]) * 7
    draws = 20000
    picks = race(probs.expand(draws, 5), exponential_noise((draws, 5), generator))
    counts = torch.bincount(picks, minlength=5) / draws
    torch.testing.assert_close(counts, probs / probs.sum(), atol=0.015, rtol=0)
    assert counts[0] == counts[2] == 0


def test_nucleus_keeps_the_smallest_set_reaching_top_p() -> None:
    logits = PROBS.log()
    kept = distribution(logits, 1.0, 0.6)
    assert kept.nonzero().flatten().tolist() == [1, 3]
    torch.testing.assert_close(kept.sum(), torch.tensor(1.0))
    assert distribution(logits, 1.0, 0.01).nonzero().flatten().tolist() == [1]


def _bitmask(allowed: list[int], vocab: int) -> torch.Tensor:
    mask = torch.zeros(vocab, dtype=torch.bool)
    mask[allowed] = True
    bitmask = allocate_token_bitmask(1, vocab)
    fill_from_allowed(bitmask, 0, mask)
    return bitmask


class _FixedMatcher:
    """A matcher whose allowed set never changes."""

    def __init__(self, bitmask: torch.Tensor) -> None:
        self.bitmask = bitmask

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        bitmask[row] = self.bitmask[0]


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.5])
def test_chooser_never_leaves_the_mask(temperature: float) -> None:
    vocab = 1000
    allowed = [3, 64, 65, 511, 999]
    matcher = _FixedMatcher(_bitmask(allowed, vocab))
    chooser = TokenChooser(vocab, torch.device("cpu"), Sampling(temperature, 0.9, seed=3))
    seen = set()
    for step in range(200):
        logits = torch.randn(vocab + 7, generator=torch.Generator().manual_seed(step))
        best = max(allowed, key=lambda t: float(logits[t]))
        token = chooser.choose(logits, matcher)
        assert token in allowed
        if temperature == 0:
            assert token == best
        seen.add(token)
    assert temperature == 0 or len(seen) > 1


def test_chooser_bits_can_be_set_and_cleared() -> None:
    chooser = TokenChooser(100, torch.device("cpu"), Sampling())
    chooser.fill(_FixedMatcher(_bitmask([5], 100)))
    assert chooser.is_allowed(5) and not chooser.is_allowed(31)
    for token in (31, 63, 99):
        chooser.set_allowed(token, True)
        assert chooser.is_allowed(token)
    chooser.set_allowed(5, False)
    assert not chooser.is_allowed(5) and chooser.any_allowed()
    for token in (31, 63, 99):
        chooser.set_allowed(token, False)
    assert not chooser.any_allowed()
    logits = torch.zeros(100)
    chooser.set_allowed(63, True)
    assert chooser.choose(logits) == 63


def test_the_graphed_choice_is_shared_by_a_threads_decodes_and_not_across_threads() -> None:
    device = torch.device("cuda")
    first, again = graphed_greedy(device), graphed_greedy(device)
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(graphed_greedy(device)))
    thread.start()
    thread.join()
    assert first is again
    assert other[0] is not first
