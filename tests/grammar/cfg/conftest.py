"""Shared fixtures for the context-free masking tests."""

from __future__ import annotations

import pytest

from cad.grammar.vocab import Vocabulary


@pytest.fixture(scope="session")
def qwen2_vocab(qwen2_tokenizer) -> Vocabulary:
    """Token bytes of the real Qwen2 tokenizer."""
    return Vocabulary.from_tokenizer(qwen2_tokenizer)
