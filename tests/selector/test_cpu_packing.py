"""oneDNN-packed weights on a CPU: the static runtime packs its fused layers' projections and
the output projection when the policy says so, and its forwards and caches equal those of
the same runtime without packing and of transformers' eager forward."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from cad.selector import cpu_packing, kv
from cad.selector.cpu_packing import PACKING_ENV, PackedHead, packing_wanted
from cad.selector.runtime import StaticRuntime, install, output_head, uninstall

CPU = torch.device("cpu")


def _tokens(seed: int, count: int) -> list[int]:
    return torch.randint(0, 5000, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_packed_forwards_equal_unpacked_and_eager(tiny_qwen, monkeypatch) -> None:
    monkeypatch.setenv(PACKING_ENV, "1")
    packed_model = copy.deepcopy(tiny_qwen.model)
    packed = StaticRuntime(packed_model, CPU, compile=False)
    assert isinstance(packed.parts.head, PackedHead)
    assert all(layer.packed is not None for layer in packed.parts.layers)
    monkeypatch.setenv(PACKING_ENV, "0")
    plain_model = copy.deepcopy(tiny_qwen.model)
    plain = StaticRuntime(plain_model, CPU, compile=False)
    assert not isinstance(plain.parts.head, PackedHead)
    assert all(layer.packed is None for layer in plain.parts.layers)
    caches = packed.new_cache(), plain.new_cache(), kv.new_cache(plain_model)
    for step, size in enumerate((45, 1, 7, 33, 2)):
        tokens = _tokens(step, size)
        with_packing = kv.append(packed_model, caches[0], tokens, CPU)
        torch.testing.assert_close(
            with_packing, kv.append(plain_model, caches[1], tokens, CPU), atol=1e-4, rtol=1e-4
        )
        torch.testing.assert_close(
            with_packing, kv.append(plain_model, caches[2], tokens, CPU), atol=1e-4, rtol=1e-4
        )
    length = kv.cache_length(caches[0])
    assert length == kv.cache_length(caches[1]) == 88
    for keys, other in zip(caches[0].keys, caches[1].keys, strict=True):
        torch.testing.assert_close(keys[:, :, :length], other[:, :, :length], atol=1e-5, rtol=1e-5)


def test_a_compiled_runtime_does_not_pack(tiny_qwen, monkeypatch) -> None:
    monkeypatch.setenv(PACKING_ENV, "1")
    runtime = StaticRuntime(copy.deepcopy(tiny_qwen.model), CPU, compile=True, backend="aot_eager")
    assert all(layer.packed is None for layer in runtime.parts.layers)
    assert not isinstance(runtime.parts.head, PackedHead)


@pytest.mark.parametrize(
    ("setting", "dtype", "available", "bfloat16_kernels", "wanted"),
    [
        ("", torch.float32, 10**12, True, True),
        ("", torch.float32, 100, True, False),
        ("1", torch.float32, 100, True, True),
        ("0", torch.float32, 10**12, True, False),
        ("", torch.float32, 10**12, False, True),
        ("", torch.bfloat16, 10**12, True, True),
        ("", torch.bfloat16, 100, True, False),
        ("0", torch.bfloat16, 10**12, True, False),
        ("", torch.bfloat16, 10**12, False, False),
        ("1", torch.bfloat16, 10**12, False, False),
        ("", torch.float16, 10**12, True, False),
        ("1", torch.float16, 10**12, True, False),
    ],
)
def test_packing_is_wanted_for_float32_and_bfloat16_weights_that_fit_in_memory(
    monkeypatch,
    setting: str,
    dtype: torch.dtype,
    available: int,
    bfloat16_kernels: bool,
    wanted: bool,
) -> None:
    """bfloat16 only where oneDNN's bfloat16 kernels run: on other CPUs it cannot reorder
    the weights at all."""
    monkeypatch.setenv(PACKING_ENV, setting)
    monkeypatch.setattr(cpu_packing, "bfloat16_kernels", lambda: bfloat16_kernels)
    monkeypatch.setattr(
        cpu_packing.psutil, "virtual_memory", lambda: SimpleNamespace(available=available)
    )
    weights = [torch.zeros(32, 16, dtype=dtype), torch.zeros(16, 32, dtype=dtype)]
    assert packing_wanted(weights) is wanted


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_packed_linear_equals_functional_linear(dtype: torch.dtype, tolerance: float) -> None:
    if not cpu_packing.packable(dtype):
        pytest.skip("oneDNN's bfloat16 kernels do not run on this CPU")
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(48, 32, generator=generator).to(dtype)
    bias = torch.randn(48, generator=generator).to(dtype)
    packed = cpu_packing.pack(weight)
    for rows in (1, 8, 97):
        x = torch.randn(1, rows, 32, generator=generator).to(dtype)
        for b in (bias, None):
            product = cpu_packing.linear(x, weight, b, packed)
            assert product.dtype == dtype
            torch.testing.assert_close(
                product,
                torch.nn.functional.linear(x, weight, b),
                atol=tolerance,
                rtol=tolerance,
            )


@pytest.mark.parametrize("kernels", [True, False])
def test_bfloat16_forwards_equal_the_eager_forward_packed_where_the_cpu_allows(
    tiny_qwen, monkeypatch, kernels: bool
) -> None:
    """Packed where oneDNN's bfloat16 kernels run, unpacked elsewhere (not a crash), and
    equal to transformers' float32 forward either way."""
    if kernels and not cpu_packing.bfloat16_kernels():
        pytest.skip("oneDNN's bfloat16 kernels do not run on this CPU")
    monkeypatch.setenv(PACKING_ENV, "")
    monkeypatch.setattr(cpu_packing, "bfloat16_kernels", lambda: kernels)
    model = copy.deepcopy(tiny_qwen.model).to(torch.bfloat16)
    runtime = StaticRuntime(model, CPU, compile=False)
    assert isinstance(runtime.parts.head, PackedHead) is kernels
    assert all((layer.packed is not None) is kernels for layer in runtime.parts.layers)
    reference = copy.deepcopy(tiny_qwen.model)
    caches = runtime.new_cache(), kv.new_cache(reference)
    for step, size in enumerate((45, 1, 7, 300, 33)):
        tokens = _tokens(step, size)
        logits = kv.append(model, caches[0], tokens, CPU)
        eager = kv.append(reference, caches[1], tokens, CPU)
        assert logits.dtype == torch.float32
        torch.testing.assert_close(logits, eager, atol=2e-2, rtol=0)


def test_node_logits_project_through_the_installed_runtimes_head(tiny_qwen, monkeypatch) -> None:
    monkeypatch.setenv(PACKING_ENV, "1")
    model = copy.deepcopy(tiny_qwen.model)
    assert output_head(model) is model.get_output_embeddings()
    runtime = install(model, CPU, compile=False, graphs=False)
    try:
        assert isinstance(runtime.parts.head, PackedHead)
        assert output_head(model) is runtime.parts.head
        hidden = torch.randn(5, model.config.hidden_size)
        torch.testing.assert_close(
            output_head(model)(hidden),
            model.get_output_embeddings()(hidden),
            atol=1e-5,
            rtol=1e-5,
        )
    finally:
        uninstall(model)
    assert output_head(model) is model.get_output_embeddings()
