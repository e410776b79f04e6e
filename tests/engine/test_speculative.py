"""Rewrite mode on an engine with vLLM's speculative decoding (``ngram``: drafts looked up in
the prompt, which holds the document): the tokens are exactly those of the engine without
speculation, drafts are accepted, and program mode is refused with the reason."""

from __future__ import annotations

import json

import pytest

from tests.conftest import heval_pairs
from tests.engine.conftest import start_engine, stop_engine

pytestmark = [pytest.mark.engine, pytest.mark.slow]
NGRAM = '{"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'


@pytest.fixture(scope="module")
def speculative_engine(engine_model, tmp_path_factory):
    running = start_engine(
        engine_model,
        tmp_path_factory.mktemp("speculative") / "engine.log",
        "--speculative-config",
        NGRAM,
    )
    yield running
    stop_engine(running)


def completion(engine, prompt: str) -> str:
    body = {"model": str(engine.model), "prompt": prompt, "max_tokens": 64, "temperature": 0}
    status, answer = engine.post("/v1/completions", body)
    assert status == 200, answer
    return answer["choices"][0]["text"]


def test_speculation_is_lossless_and_accepts_drafts(engine, speculative_engine) -> None:
    # The model answers "return None" after a newline; the prompt holds that line, so the
    # lookup drafts " None" after "\nreturn" and the engine accepts it.
    prompts = [before for before, _ in heval_pairs("python")[:4]] + ["x = 1\nreturn None\n"]
    speculated = [completion(speculative_engine, p) for p in prompts]
    assert speculated == [completion(engine, p) for p in prompts]
    assert speculated[-1] == "return None"
    assert speculative_engine.metric("vllm:spec_decode_num_accepted_tokens_total") > 0


def test_rewrite_mode_on_the_speculative_engine(engine, speculative_engine) -> None:
    body = {"document": "a\nfix me\nc\n", "instruction": "x", "mode": "rewrite", "range": [2, 2]}
    status, speculated = speculative_engine.post("/v1/cad/edit", body)
    assert status == 200 and speculated["text"] == engine.post("/v1/cad/edit", body)[1]["text"]
    info = json.loads(speculative_engine.get("/v1/cad/info"))
    assert info["modes"] == ["rewrite"] and info["speculative"] == "ngram"
    status, answer = speculative_engine.post("/v1/cad/edit", {**body, "mode": "program"})
    assert (status, answer["error"]["code"]) == (400, "mode_unavailable")
    assert "speculative decoding" in answer["error"]["message"]
