"""The decoder on a CUDA device: byte-exact programs in bfloat16 through the default CUDA
graphs; every mode decoding the same tokens and programs through transformers' eager
forward, CUDA graphs (with and without the fused Triton kernels) and compiled layers;
caches equal after kept paths and rollbacks; a graph captured again, safely, when the cache
grows; the greedy choice replayed as a CUDA graph choosing what the eager one chooses."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
import torch

from cad.grammar.bitmask import fill_from_allowed
from cad.resolver import oracle
from cad.selector import Decoder, kv, load_model
from cad.selector.graphs import Captured
from cad.selector.loading import LoadedModel
from cad.selector.runtime import StaticRuntime, installed
from cad.selector.sampling import Sampling, TokenChooser
from tests.conftest import heval_pairs
from tests.selector.test_runtime import MODES, running
from tests.tiny_model import make_tiny_model

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny-cuda"), "qwen2")


@pytest.fixture(scope="module")
def tiny_cuda(folder) -> LoadedModel:
    """bfloat16, decoding as ``cad edit`` does on a GPU (CUDA graphs)."""
    return load_model(str(folder), device="cuda", dtype="bfloat16")


@pytest.fixture(scope="module")
def eager_cuda(folder) -> LoadedModel:
    """float32, transformers' eager forward and dynamic cache (``graphs=False``)."""
    return load_model(str(folder), device="cuda", dtype="float32", graphs=False)


def _own_copy(loaded: LoadedModel) -> LoadedModel:
    return replace(loaded, model=copy.deepcopy(loaded.model))


def _tokens(seed: int, count: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 5000, (count,), generator=generator).tolist()


def test_cuda_graphs_are_the_default_on_a_gpu(tiny_cuda, eager_cuda) -> None:
    assert tiny_cuda.graphs and not tiny_cuda.compiled
    assert not eager_cuda.graphs and installed(eager_cuda.model) is None


def test_forced_programs_are_byte_exact_on_cuda(tiny_cuda) -> None:
    decoder = Decoder(tiny_cuda, max_new_tokens=4096)
    for before, after in heval_pairs("python")[:40]:
        result = decoder.edit(before, "Fix the bug.", program=oracle(before, after))
        assert result.text == after
        assert result.stats.decode_s > 0 and result.stats.host_s > 0


def test_parallel_copy_matches_serial_within_bf16_tolerance(folder) -> None:
    loaded = load_model(str(folder), device="cuda", dtype="bfloat16", graphs=False)
    tokens = list(range(1000, 1100))
    parallel = kv.new_cache(loaded.model)
    kv.prefill(loaded.model, parallel, tokens[:40], loaded.device)
    fast = kv.append(loaded.model, parallel, tokens[40:], loaded.device)
    serial = kv.new_cache(loaded.model)
    kv.prefill(loaded.model, serial, tokens[:40], loaded.device)
    for token in tokens[40:]:
        slow = kv.decode_one(loaded.model, serial, token, loaded.device)
    for a, b in zip(parallel.layers, serial.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(fast, slow, atol=5e-2, rtol=5e-2)


@pytest.fixture(scope="module")
def eager_outcomes(eager_cuda) -> dict[str, list[Any]]:
    return {name: run(eager_cuda) for name, run in MODES.items()}


@pytest.fixture(scope="module")
def graphs_cuda(eager_cuda) -> LoadedModel:
    """The float32 weights in a model object of their own, for runtimes to be installed on."""
    return _own_copy(eager_cuda)


@pytest.fixture(scope="module")
def runtimes(graphs_cuda) -> dict[str, StaticRuntime]:
    """CUDA graphs alone, with the fused Triton kernels, and compiled layers replayed as
    CUDA graphs (compiled once for the module)."""
    model, device = graphs_cuda.model, graphs_cuda.device
    return {
        "graphs": StaticRuntime(model, device, compile=False),
        "graphs with kernels": StaticRuntime(model, device, compile=False, triton=True),
        "compiled": StaticRuntime(model, device, compile=True),
    }


@pytest.mark.parametrize("runtime", ["graphs", "graphs with kernels", "compiled"])
@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_decodes_as_eager_through_graphs(
    graphs_cuda, eager_outcomes, runtimes, runtime: str, mode: str
) -> None:
    chosen = runtimes[runtime]
    assert chosen.graphs is not None
    assert chosen.parts.triton == (runtime == "graphs with kernels")
    with running(chosen, graphs_cuda):
        assert MODES[mode](graphs_cuda) == eager_outcomes[mode]
    assert chosen.capture_s > 0


def _assert_same_cache(a: Any, b: Any) -> None:
    assert a.length == b.length
    for x, y in zip((*a.keys, *a.values), (*b.keys, *b.values), strict=True):
        torch.testing.assert_close(x[:, :, : a.length], y[:, :, : b.length], atol=1e-5, rtol=1e-5)


def test_caches_are_equal_after_keep_and_rollback_and_graphs_recaptured_on_growth(
    graphs_cuda,
) -> None:
    model, device = graphs_cuda.model, graphs_cuda.device
    graphs = StaticRuntime(model, device, compile=False)
    eager = StaticRuntime(model, device, compile=False, graphs=False)
    caches = [eager.new_cache(), graphs.new_cache()]
    parents = [-1, 0, 1, 2, 1, 4, 0, 6]
    first = None
    grew_at = None
    step = 0
    while grew_at is None or step < grew_at + 10:
        assert step < 400, "the cache never grew"
        past = caches[0].length + 1 + step % 9
        path = [[0, 1, 2, 3], [0, 1, 4, 5], [0, 6, 7], [0]][step % 4]
        logits = []
        for cache in caches:
            if step == 0:
                kv.prefill(model, cache, _tokens(0, 150), device)
            logits.append(kv.append(model, cache, _tokens(step, 1 + step % 9), device))
            cache.runtime.verify_tree(cache, _tokens(100 + step, len(parents)), parents)
            cache.runtime.keep(cache, past, path)
            if step % 5 == 4:
                kv.truncate(cache, cache.length - 2)
        _assert_same_cache(*caches)
        torch.testing.assert_close(logits[0], logits[1], atol=1e-4, rtol=1e-4)
        first = first or caches[1].tensors
        if grew_at is None and caches[1].tensors is not first:
            grew_at = step
        step += 1
    grown = caches[1].tensors
    assert grown is not first and grown.capacity > first.capacity
    assert all(isinstance(entry, Captured) for entry in grown.graphs.values())
    assert {key[0] for key in grown.graphs} == {"append", "tree", "keep"}
    again = graphs.new_cache()
    reference = eager.new_cache()
    for cache in (again, reference):
        kv.prefill(model, cache, _tokens(0, 150), device)
    assert again.tensors is first
    torch.testing.assert_close(
        kv.append(model, again, [7], device), kv.append(model, reference, [7], device)
    )


def test_graphed_greedy_choice_equals_the_eager_one() -> None:
    generator = torch.Generator().manual_seed(3)
    vocab = 5000
    graphed = TokenChooser(vocab, torch.device("cuda"), Sampling(), graphs=True)
    eager = TokenChooser(vocab, torch.device("cuda"), Sampling())
    assert graphed._graphed is not None
    for trial in range(30):
        allowed = torch.rand(vocab, generator=generator) < (0.5 if trial % 3 else 0.01)
        allowed[trial] = True
        logits = torch.randn(vocab + trial % 2 * 7, generator=generator).cuda()
        for chooser in (graphed, eager):
            fill_from_allowed(chooser.bitmask, 0, allowed)
        got = graphed.choose(logits.clone())
        assert got == eager.choose(logits.clone())
        assert allowed[got]
