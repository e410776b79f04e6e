"""Tiny randomly initialised causal LMs around the real tokenizers, for offline tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from tests.conftest import TOKENIZERS


def make_tiny_model(
    directory: Path, tokenizer: str = "qwen2", seed: int = 0, init_std: float = 0.02
) -> Path:
    """Save a 2-layer, 64-wide random model plus the real ``tokenizer`` files into
    ``directory`` so that ``from_pretrained(directory)`` works with no network.

    ``init_std`` is the weights' initialisation scale; training tests raise it so that the
    tied embeddings can produce logits sharp enough to learn from within a few steps."""
    from transformers import (
        AutoTokenizer,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    tok = AutoTokenizer.from_pretrained(TOKENIZERS / tokenizer)
    common = dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
        initializer_range=init_std,
    )
    torch.manual_seed(seed)
    if tokenizer == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    for item in (TOKENIZERS / tokenizer).iterdir():
        shutil.copy(item, directory / item.name)
    return directory


def tiny_qwen3(vocab_size: int) -> torch.nn.Module:
    """A 2-layer, 64-wide random Qwen3 (per-head query and key norms, head size 32) with
    ``vocab_size`` tokens and no tokenizer, in eval mode, the same weights every call."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=4096,
    )
    return Qwen3ForCausalLM(config).eval()
