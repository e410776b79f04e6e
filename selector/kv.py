"""The three forwards of the decoder, each one step of the algorithm.

``prefill`` runs the prompt, ``decode_one`` feeds one chosen token, and ``append`` feeds many
known tokens at once — a copy's forced closing literal and the copied text — in ONE parallel
forward, keeping logits only for the last position; ``feed`` feeds known tokens whose logits
nobody reads.

A model with a static-cache runtime installed (:mod:`cad.selector.runtime`, ``--compile``)
gets static caches from ``new_cache``, and every function here runs such a cache through
that runtime's padded, compiled forwards; otherwise transformers' dynamic cache and eager
forward are used.
"""

from __future__ import annotations

from typing import Any

import torch

from cad.selector.runtime import StaticCache, installed
from cad.selector.static_forward import MAX_TREE


def new_cache(model: Any) -> Any:
    """An empty KV cache for ``model``: static when a runtime is installed on it, else
    transformers' dynamic cache."""
    runtime = installed(model)
    if runtime is not None:
        return runtime.new_cache()
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


@torch.inference_mode()
def append(model: Any, cache: Any, token_ids: list[int], device: torch.device) -> torch.Tensor:
    """Feed ``token_ids`` after the cached sequence in one forward; returns the next-token
    logits (float32, shape ``(vocab,)``). This is where a copy is prefilled."""
    if isinstance(cache, StaticCache):
        return cache.runtime.append(cache, token_ids)
    ids = torch.tensor([token_ids], dtype=torch.long, device=device)
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    return out.logits[0, -1].float()


@torch.inference_mode()
def feed(model: Any, cache: Any, token_ids: list[int], device: torch.device) -> None:
    """Feed ``token_ids`` after the cached sequence without projecting any logits: a chain
    whose next-token logits nobody reads (the known tokens before a draft tree's root)."""
    if isinstance(cache, StaticCache):
        for first in range(0, len(token_ids), MAX_TREE):
            piece = token_ids[first : first + MAX_TREE]
            cache.runtime.verify_tree(cache, piece, list(range(-1, len(piece) - 1)))
        return
    ids = torch.tensor([token_ids], dtype=torch.long, device=device)
    model.get_decoder()(input_ids=ids, past_key_values=cache, use_cache=True)


def prefill(model: Any, cache: Any, prompt_ids: list[int], device: torch.device) -> torch.Tensor:
    """Run the prompt into an empty cache; returns the first next-token logits."""
    return append(model, cache, prompt_ids, device)


def decode_one(model: Any, cache: Any, token_id: int, device: torch.device) -> torch.Tensor:
    """One autoregressive step: feed a single token, get the next logits."""
    return append(model, cache, [token_id], device)


@torch.inference_mode()
def verify(model: Any, cache: Any, token_ids: list[int], device: torch.device) -> torch.Tensor:
    """Feed ``token_ids`` in one forward and return logits for every position, ``(n, vocab)``:
    the verification step of draft-based decoding."""
    if isinstance(cache, StaticCache):
        return cache.runtime.verify(cache, token_ids)
    ids = torch.tensor([token_ids], dtype=torch.long, device=device)
    out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    return out.logits[0].float()


def cache_length(cache: Any) -> int:
    """Number of positions held in the cache."""
    return int(cache.get_seq_length())


def truncate(cache: Any, length: int) -> None:
    """Drop cached positions beyond ``length`` (rejected draft tokens)."""
    if isinstance(cache, StaticCache):
        cache.runtime.truncate(cache, length)
        return
    extra = cache_length(cache) - length
    if extra > 0:
        cache.crop(-extra)
