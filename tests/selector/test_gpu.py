"""The decoder on a CUDA device in bfloat16: same exactness, same cache equivalence."""

from __future__ import annotations

import pytest
import torch

from cad.resolver import oracle
from cad.selector import Decoder, kv, load_model
from tests.conftest import heval_pairs
from tests.tiny_model import make_tiny_model

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def tiny_cuda(tmp_path_factory):
    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-cuda"), "qwen2")
    return load_model(str(folder), device="cuda", dtype="bfloat16")


def test_forced_programs_are_byte_exact_on_cuda(tiny_cuda) -> None:
    decoder = Decoder(tiny_cuda, max_new_tokens=4096)
    for before, after in heval_pairs("python")[:40]:
        assert decoder.edit(before, "Fix the bug.", program=oracle(before, after)).text == after


def test_parallel_copy_matches_serial_within_bf16_tolerance(tiny_cuda) -> None:
    tokens = list(range(1000, 1100))
    parallel = kv.new_cache(tiny_cuda.model)
    kv.prefill(tiny_cuda.model, parallel, tokens[:40], tiny_cuda.device)
    fast = kv.append(tiny_cuda.model, parallel, tokens[40:], tiny_cuda.device)
    serial = kv.new_cache(tiny_cuda.model)
    kv.prefill(tiny_cuda.model, serial, tokens[:40], tiny_cuda.device)
    for token in tokens[40:]:
        slow = kv.decode_one(tiny_cuda.model, serial, token, tiny_cuda.device)
    for a, b in zip(parallel.layers, serial.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(fast, slow, atol=5e-2, rtol=5e-2)
