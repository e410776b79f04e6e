"""Shared fixtures: real tokenizers and edit corpora copied into tests/fixtures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FIXTURES = Path(__file__).parent / "fixtures"
TOKENIZERS = FIXTURES / "tokenizers"


def heval_pairs(language: str) -> list[tuple[str, str]]:
    """(buggy, fixed) documents of HumanEvalPack-Fix for ``python`` or ``js``."""
    rows = [json.loads(line) for line in (FIXTURES / "humanevalpack" / f"{language}.jsonl").open()]
    return [
        (row["declaration"] + row["buggy_solution"], row["declaration"] + row["canonical_solution"])
        for row in rows
    ]


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
