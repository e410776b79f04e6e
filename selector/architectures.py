"""Real architectures at random initialisation, for timing without downloading weights.

Decoding cost depends on shapes, not on weight values, so a model built from an
architecture's config measures the same wall-clock per forward as the trained model.
``tiny`` is the shape of the test suite's model (2 layers, 64 wide): its steps are almost all
per-step overhead, the regime of a GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from cad.selector.loading import LoadedModel, pick_device, pick_dtype

ARCHITECTURES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-0.5b": dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        tie_word_embeddings=False,
    ),
}  # fmt: skip


def random_init(
    name: str, tokenizer_dir: Path, *, device: str = "auto", dtype: str = "auto", seed: int = 0
) -> LoadedModel:
    """A Qwen2.5-shaped model with random weights plus a real tokenizer (labelled ``random init``)."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}")
    target = pick_device(device)
    torch_dtype = pick_dtype(dtype, target)
    config = Qwen2Config(
        **ARCHITECTURES[name],
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(seed)
    with torch.device(target):
        model = Qwen2ForCausalLM(config).to(torch_dtype)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    return LoadedModel(model, tokenizer, target, torch_dtype, f"{name} (random init)")
