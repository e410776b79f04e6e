"""Tiny random models shared by the selector tests (built once per session)."""

from __future__ import annotations

import pytest

from tests.tiny_model import make_tiny_model


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    """A loaded 2-layer random Qwen2 model with the real Qwen2 tokenizer, on CPU."""
    from selector import load_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-qwen"), "qwen2")
    return load_model(str(folder), device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """A loaded 2-layer random Llama model with the real Llama-3 tokenizer, on CPU."""
    from selector import load_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-llama"), "llama3")
    return load_model(str(folder), device="cpu", dtype="float32")
