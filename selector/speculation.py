"""The model's choice at a node of a verified draft tree, shared by rewrite and program mode.

Greedy decoding takes the (masked) argmax: a drafted child is accepted exactly when it is
that token. Sampling applies the standard speculative rule for deterministic drafts, so
every token is distributed exactly as one sampled from the same logits without drafts.
"""

from __future__ import annotations

import torch

from cad.selector.sampling import Sampling


def masked_logits(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``logits`` with every token outside ``allowed`` (a vocab-sized bool mask) at -inf."""
    width = min(logits.shape[-1], allowed.shape[-1])
    scores = torch.full_like(logits, float("-inf"))
    visible = allowed[:width].to(logits.device)
    scores[:width] = torch.where(visible, logits[:width], scores[:width])
    return scores


def token_distribution(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The sampling distribution over the vocabulary: softmax at the temperature,
    restricted to the top-p nucleus and renormalised."""
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < sampling.top_p
        keep[0] = True
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
        probs = probs / probs.sum()
    return probs.cpu()


def speculative_choice(probs: torch.Tensor, drafted: list[int], generator: torch.Generator) -> int:
    """The standard acceptance rule for deterministic drafts: accept drafted token ``t``
    with probability ``p(t)``; on rejection zero it, renormalise, try the next draft; if all
    are rejected, sample from the residual. The result is distributed exactly as ``probs``."""
    residual = probs.clone()
    for token in drafted:
        if float(torch.rand((), generator=generator)) < float(residual[token]):
            return token
        residual[token] = 0.0
        residual = residual / residual.sum()
    return int(torch.multinomial(residual, 1, generator=generator))
