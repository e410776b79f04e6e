"""Choosing the next token from masked logits: greedy, or temperature with nucleus (top-p)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    """``temperature == 0`` is greedy; otherwise softmax sampling restricted to ``top_p``."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


def choose_token(
    logits: torch.Tensor, allowed: torch.Tensor, sampling: Sampling, generator: torch.Generator
) -> int:
    """The next token among ``allowed`` (a vocab-sized bool mask); never a masked-out id."""
    width = min(logits.shape[-1], allowed.shape[-1])
    scores = torch.full_like(logits, float("-inf"))
    visible = allowed[:width].to(logits.device)
    scores[:width] = torch.where(visible, logits[:width], scores[:width])
    if sampling.temperature <= 0:
        return int(torch.argmax(scores))
    probs = torch.softmax(scores / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < sampling.top_p
        keep[0] = True
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
