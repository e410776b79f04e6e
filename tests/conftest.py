"""Shared fixtures: real tokenizers and edit corpora copied into tests/fixtures, and tiny
random models around those tokenizers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from cad.selector.draft_config import DraftConfig
from cad.training.datasets import HUMANEVALPACK

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
if not torch.cuda.is_available():
    # Triton's kernels then run in its interpreter; Triton reads this when it is first
    # imported (its library functions) and when a kernel is built, so it is set before both.
    os.environ.setdefault("TRITON_INTERPRET", "1")

FIXTURES = Path(__file__).parent / "fixtures"
TOKENIZERS = FIXTURES / "tokenizers"
SMALL_DRAFTS = DraftConfig(
    draft_length=24,
    budget=40,
    aligned=2,
    ngram=2,
    top_k=2,
    output=1,
    rates={
        "editing": {"aligned:0": [0.2, 0.9], "aligned:1": [0.3], "ngram:0": [0.4], "topk:0": [0.2]},
        "copying": {"aligned:0": [0.9, 0.95], "output:0": [0.1]},
    },
)
"""A small calibrated-looking draft configuration for decoding tests (40 nodes per forward)."""


def heval_pairs(language: str) -> list[tuple[str, str]]:
    """(buggy, fixed) documents of HumanEvalPack-Fix for ``python`` or ``js``."""
    path = Path(str(HUMANEVALPACK.joinpath(f"{language}.jsonl")))
    rows = [json.loads(line) for line in path.open()]
    return [
        (row["declaration"] + row["buggy_solution"], row["declaration"] + row["canonical_solution"])
        for row in rows
    ]


@pytest.fixture(scope="session", autouse=True)
def _private_table_cache(tmp_path_factory):
    """Tables cached per tokenizer (``cad.grammar.index_cache``) go to a folder of this test
    session, never to the user's cache."""
    os.environ["CAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("cad-cache"))


@pytest.fixture(scope="session")
def qwen2_tokenizer():
    """The real Qwen2 tokenizer (one token per digit)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZERS / "qwen2")


@pytest.fixture(scope="session")
def llama3_tokenizer():
    """The real Llama-3 tokenizer (up to three digits per token)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZERS / "llama3")


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    """A loaded 2-layer random Qwen2 model with the real Qwen2 tokenizer, on CPU, decoding
    through transformers' eager forward (the static runtime's tests build their own)."""
    from cad.selector import load_model
    from tests.tiny_model import make_tiny_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-qwen"), "qwen2")
    return load_model(str(folder), device="cpu", dtype="float32", graphs=False)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """A loaded 2-layer random Llama model with the real Llama-3 tokenizer, on CPU, decoding
    through transformers' eager forward (the static runtime's tests build their own)."""
    from cad.selector import load_model
    from tests.tiny_model import make_tiny_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-llama"), "llama3")
    return load_model(str(folder), device="cpu", dtype="float32", graphs=False)
