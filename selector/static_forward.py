"""One forward of a decoder-only transformer over a preallocated (static) KV cache, written
out step by step on top of the model's own modules.

The embeddings, norms, projections (LoRA adapters included), MLPs and rotary tables are the
loaded model's; the cache, the positions, the attention mask and the attention are ours. A
forward feeds ``B`` tokens after ``start`` cached positions into cache slots
``start .. start + B - 1``; it is handed the cache tensors, or a window of their first slots
that holds what it writes, and every shape depends only on ``B`` and that size, never on
``start``, so a compiled forward is reused at every position (and a CUDA graph replays).

The ``B`` tokens are a chain (an ordinary append: each follows the one before) or a tree
given by parent indices (a draft graph: each node follows its parent). For a tree the mask
and the position ids are built here, on the device, from the parents alone: a node sees the
whole cached prefix, its ancestors and itself, at position ``start + depth``.

A layer runs in three parts: :func:`before_attention` (norm, projections, rotary),
the cache write and attention, and :func:`after_attention` (output projection, MLP). The two
outer parts never see the cache, so their shapes depend on ``B`` alone: they are what a
compiler compiles once and reuses for every layer (regional compilation), while attention,
whose shapes follow the cache window, runs as written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3")
MAX_TREE = 512
"""The largest tree (and chain chunk) one forward takes; ancestors are found in
``log2(MAX_TREE)`` pointer-jumping rounds."""
_JUMPS = (MAX_TREE - 1).bit_length()


class UnsupportedModel(ValueError):
    """The static-cache forward does not know this architecture."""


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def before_attention(
    layer: Any, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoder layer up to attention: the input norm, the query/key/value projections
    (with the query and key norms of Qwen3) and the rotary embedding. ``hidden`` is ``(1, B,
    hidden)``, ``cos``/``sin`` ``(1, 1, B, D)``; returns query ``(1, heads, B, D)``, key and
    value ``(1, kv_heads, B, D)``."""
    attention = layer.self_attn
    x = layer.input_layernorm(hidden)
    shape = (1, hidden.shape[1], -1, head_dim)
    query = attention.q_proj(x).view(shape)
    key = attention.k_proj(x).view(shape)
    if hasattr(attention, "q_norm"):
        query, key = attention.q_norm(query), attention.k_norm(key)
    query, key = query.transpose(1, 2), key.transpose(1, 2)
    query = query * cos + _rotate_half(query) * sin
    key = key * cos + _rotate_half(key) * sin
    value = attention.v_proj(x).view(shape).transpose(1, 2)
    return query, key, value


def after_attention(layer: Any, hidden: torch.Tensor, mixed: torch.Tensor) -> torch.Tensor:
    """The rest of a decoder layer: the attention output projection added to ``hidden``,
    then the MLP on its norm added again."""
    hidden = hidden + layer.self_attn.o_proj(mixed)
    return hidden + layer.mlp(layer.post_attention_layernorm(hidden))


@dataclass(frozen=True)
class ModelParts:
    """The modules one forward runs through, the attention shape, and the functions that run
    a layer's parts around attention (compiled versions replace them under ``--compile``)."""

    embed: Any
    layers: Any
    norm: Any
    rotary: Any
    head: Any
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float
    before: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = before_attention
    after: Callable[..., torch.Tensor] = after_attention

    @classmethod
    def of(cls, model: Any) -> ModelParts:
        """The parts of a causal LM (a PEFT wrapper is looked through); raises
        :class:`UnsupportedModel` for architectures whose layers this forward does not
        reproduce (sliding windows, dynamic rotary scaling, other block layouts)."""
        network = model.get_base_model() if hasattr(model, "get_base_model") else model
        config = network.config
        kind = getattr(config, "model_type", "?")
        if kind not in ARCHITECTURES:
            raise UnsupportedModel(
                f"the static-cache runtime supports {', '.join(ARCHITECTURES)} models, not {kind}"
            )
        if any(layer != "full_attention" for layer in getattr(config, "layer_types", None) or []):
            raise UnsupportedModel(f"{kind} with sliding-window layers is not supported")
        rope = getattr(config, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") in ("dynamic", "longrope"):
            raise UnsupportedModel(f"rotary scaling {rope['rope_type']!r} is not supported")
        body = network.model
        attention = body.layers[0].self_attn
        heads = config.num_attention_heads
        return cls(
            embed=body.embed_tokens,
            layers=body.layers,
            norm=body.norm,
            rotary=body.rotary_emb,
            head=network.lm_head,
            num_heads=heads,
            num_kv_heads=config.num_key_value_heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            scale=float(attention.scaling),
        )


def chain_layout(
    start: torch.Tensor, size: int, capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``(1, size)`` and visibility ``(size, capacity)`` of ``size`` tokens appended
    in order after ``start`` cached ones: causal over the cache."""
    positions = start + torch.arange(size, device=start.device)
    slots = torch.arange(capacity, device=start.device)
    return positions[None], slots[None, :] <= positions[:, None]


def tree_layout(
    parents: torch.Tensor, start: torch.Tensor, capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``(1, B)`` and visibility ``(B, capacity)`` of a tree of ``B`` nodes in
    topological order fed after ``start`` cached tokens (``parents[i] < i``, ``-1`` for a
    root). Ancestor sets are found by pointer jumping: after round ``r`` every node knows its
    ancestors up to ``2**r`` steps up."""
    size = parents.shape[0]
    nodes = torch.arange(size, device=parents.device)
    up = torch.where(parents < 0, nodes, parents)
    ancestors = (nodes[None, :] == nodes[:, None]) | (nodes[None, :] == up[:, None])
    for _ in range(_JUMPS):
        ancestors = ancestors | ancestors[up]
        up = up[up]
    depth = ancestors.sum(dim=1) - 1
    slots = torch.arange(capacity, device=parents.device)
    offset = slots - start
    inside = (offset >= 0) & (offset < size)
    tree = ancestors[:, offset.clamp(0, size - 1)] & inside[None, :]
    return (start + depth)[None], tree | (slots < start)[None, :]


def attend(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    visible: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of ``query`` ``(1, heads, B, D)`` over the cache (or its window) ``(1,
    kv_heads, S, D)`` where ``visible`` ``(B, S)`` allows; grouped-query heads share their
    key/value head without copying it. Returns ``(1, B, heads * D)``.

    One query (the decode step) is written out as matrix products and a softmax, a few
    kernels reading the window once; wider inputs use PyTorch's fused attention."""
    _, heads, size, dim = query.shape
    if size == 1:
        kv_heads = keys.shape[1]
        grouped = query.reshape(1, kv_heads, heads // kv_heads, dim)
        scores = torch.matmul(grouped, keys.transpose(-1, -2)).float() * scale
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        out = torch.matmul(weights.to(values.dtype), values)
        return out.reshape(1, 1, heads * dim)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, keys, values, attn_mask=visible[None, None], scale=scale, enable_gqa=True
    )
    return out.transpose(1, 2).reshape(1, size, heads * dim)


def forward(
    parts: ModelParts,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    tokens: torch.Tensor,
    start: torch.Tensor,
    parents: torch.Tensor | None = None,
) -> torch.Tensor:
    """Feed ``tokens`` ``(1, B)`` after ``start`` (a 0-d tensor) cached positions, writing
    their keys and values into slots ``start .. start + B - 1`` of every layer's ``keys`` /
    ``values`` ``(1, kv_heads, capacity, D)``; a chain when ``parents`` is ``None``, else the
    tree it describes. Returns the final-norm hidden states ``(B, hidden)``."""
    size = tokens.shape[1]
    capacity = keys[0].shape[2]
    if parents is None:
        positions, visible = chain_layout(start, size, capacity)
    else:
        positions, visible = tree_layout(parents, start, capacity)
    slots = start + torch.arange(size, device=tokens.device)
    hidden = parts.embed(tokens)
    cos, sin = parts.rotary(hidden, positions)
    cos, sin = cos[:, None], sin[:, None]
    for index, layer in enumerate(parts.layers):
        query, key, value = parts.before(layer, hidden, cos, sin, parts.head_dim)
        keys[index].index_copy_(2, slots, key)
        values[index].index_copy_(2, slots, value)
        mixed = attend(query, keys[index], values[index], visible, parts.scale)
        hidden = parts.after(layer, hidden, mixed)
    return parts.norm(hidden)[0]


def forward_last(
    parts: ModelParts,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    tokens: torch.Tensor,
    start: torch.Tensor,
    last: torch.Tensor,
) -> torch.Tensor:
    """A chain forward that returns only the next-token logits ``(vocab,)`` after position
    ``last`` (a 1-element index: the chain's real end when it is padded)."""
    hidden = forward(parts, keys, values, tokens, start)
    return parts.head(hidden.index_select(0, last))[0].float()


def compact(
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    source: torch.Tensor,
    target: torch.Tensor,
) -> None:
    """Move every layer's cache slots ``source`` to slots ``target`` (equal lengths),
    reading all of them before writing any: the kept path of a draft tree, in place."""
    for layer in (*keys, *values):
        layer.index_copy_(2, target, layer.index_select(2, source))
