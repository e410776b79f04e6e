"""A real engine for the ``engine`` tests: ``cad-engine`` (vLLM on the CPU) serving a tiny
model, started once per session. Skipped cleanly where vLLM is not installed; README gives
the command that installs it and runs these tests."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
import torch

from tests.conftest import TOKENIZERS

START_LIMIT_S = 600
CHAIN = ("\n", "return", " None")  # then end-of-sequence: the model's reply to any rewrite


def make_engine_model(directory: Path) -> Path:
    """A 2-layer random Qwen2 (head size 32, which vLLM's CPU attention needs) with the real
    Qwen2 tokenizer and untied output weights that make one reply certain: after the
    newline that ends every chat prompt it writes ``return None`` and stops. Everything else
    is random, so any other choice depends on the whole context (and the KV cache)."""
    import shutil

    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "qwen2")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    chain = [tokenizer.encode(piece, add_special_tokens=False)[0] for piece in CHAIN]
    chain.append(tokenizer.eos_token_id)
    with torch.no_grad():
        embeddings, output = model.model.embed_tokens.weight, model.lm_head.weight
        for step, (token, following) in enumerate(pairwise(chain)):
            embeddings[token] = 0.0
            embeddings[token, step] = 10.0
            output[following, step] = 10.0
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    for item in (TOKENIZERS / "qwen2").iterdir():
        shutil.copy(item, directory / item.name)
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Engine:
    """A running ``cad-engine``: its URL, model folder and log."""

    url: str
    model: Path
    log: Path
    process: subprocess.Popen

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return response.read().decode()

    def post(self, path: str, body: dict, timeout: float = 600) -> tuple[int, dict]:
        """POST ``body``; the status and the JSON answer (errors included)."""
        return self.post_bytes(path, json.dumps(body).encode(), timeout=timeout)

    def post_bytes(
        self, path: str, data: bytes | Iterable[bytes], headers: dict | None = None, timeout=600
    ) -> tuple[int, dict]:
        """POST ``data`` as it is (an iterable of chunks goes chunked); the status and the JSON
        answer: the last line of a streamed one."""
        headers = {"Content-Type": "application/json", **(headers or {})}
        request = urllib.request.Request(self.url + path, data, headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read().splitlines()[-1])
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def metric(self, name: str) -> float:
        """A counter from vLLM's own ``/metrics`` (summed over its labels)."""
        total = 0.0
        for line in self.get("/metrics").splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total


def start_engine(model: Path, log: Path, *extra: str) -> Engine:
    """``cad-engine`` on a free port; waits until ``/v1/cad/info`` answers."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(
            "vLLM is not installed; README ('The shared engine') gives the command that "
            "installs it and runs these tests"
        )
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    command = [
        sys.executable, "-m", "cad.engine", "--model", str(model), "--dtype", "float32",
        "--max-model-len", "4096", "--max-num-batched-tokens", "8192", "--enforce-eager",
        "--host", "127.0.0.1", "--port", str(port), *extra,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    engine = Engine(f"http://127.0.0.1:{port}", model, log, process)
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"cad-engine exited with {process.returncode}:\n{tail}")
        try:
            engine.get("/v1/cad/info")
            return engine
        except OSError:
            time.sleep(1)
    stop_engine(engine)
    pytest.fail(f"cad-engine did not answer within {START_LIMIT_S} s (log: {log})")


def stop_engine(engine: Engine) -> None:
    """Stop the engine and the processes it started (its own process group)."""
    if engine.process.poll() is None:
        os.killpg(engine.process.pid, signal.SIGTERM)
        try:
            engine.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(engine.process.pid, signal.SIGKILL)
            engine.process.wait(60)


@pytest.fixture(scope="session")
def engine_model(tmp_path_factory) -> Path:
    return make_engine_model(tmp_path_factory.mktemp("engine-model"))


@pytest.fixture(scope="session")
def engine(engine_model, tmp_path_factory):
    """The program-mode engine every ``engine`` test shares."""
    running = start_engine(
        engine_model, tmp_path_factory.mktemp("engine") / "engine.log", "--max-edits", "64"
    )
    yield running
    stop_engine(running)


@pytest.fixture(scope="session")
def loaded_engine_model(engine_model):
    """The same model in process (transformers), for side-by-side comparisons."""
    from cad.selector import load_model

    return load_model(str(engine_model), device="cpu", dtype="float32")
