"""The fused Triton kernels against the PyTorch forward they replace: run by Triton's
interpreter on a CPU, and compiled on a CUDA device where there is one (there
tests/selector/test_gpu.py also decodes every mode through them)."""

from __future__ import annotations

import copy
import os
from dataclasses import replace

import pytest
import torch

from cad.selector import gpu_kernels, kv
from cad.selector import static_forward as forward_module
from cad.selector.runtime import StaticRuntime
from tests.tiny_model import tiny_qwen3

pytestmark = pytest.mark.skipif(not gpu_kernels.available(), reason="needs triton")


ON_GPU = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


INTERPRETED = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="Triton compiles for the GPU here (tests/conftest.py interprets only without one)",
)


@pytest.fixture(params=[pytest.param("cpu", marks=INTERPRETED), pytest.param("cuda", marks=ON_GPU)])
def device(request) -> str:
    """Where the kernels run: on a CPU through Triton's interpreter, on a GPU compiled."""
    return request.param


def _rotary(dim: int, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    frequencies = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    angles = positions[:, None].float() * frequencies[None]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos()[None].to(dtype), angles.sin()[None].to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


SHAPES = [
    # heads, kv heads, head size, fed tokens, window, first slot fed
    (12, 2, 32, 1, 256, 100),  # a 1.5B-like step: six heads to a key/value head
    (4, 2, 16, 8, 256, 37),
    (7, 1, 64, 5, 300, 0),  # a window that is no multiple of the slot block
    (6, 2, 32, 40, 512, 200),  # several row blocks
]
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("heads", "kv_heads", "dim", "size", "window", "first"), SHAPES)
def test_rotary_writes_the_cache_and_attention_equals_the_exact_product(
    device: str,
    dtype: torch.dtype,
    heads: int,
    kv_heads: int,
    dim: int,
    size: int,
    window: int,
    first: int,
) -> None:
    generator = torch.Generator().manual_seed(size + window)
    packed = torch.randn((1, size, (heads + 2 * kv_heads) * dim), generator=generator).to(dtype)
    cos, sin = _rotary(dim, torch.arange(first, first + size), dtype)
    capacity = window + 64  # the window is a view of the first slots of a longer cache
    keys_all = torch.randn((1, kv_heads, capacity, dim), generator=generator).to(dtype)
    values_all = torch.randn((1, kv_heads, capacity, dim), generator=generator).to(dtype)
    expected_keys, expected_values = keys_all.clone(), values_all.clone()

    on = [t.to(device) for t in (packed, cos, sin, keys_all, values_all, torch.tensor(first))]
    keys, values = on[3][:, :, :window], on[4][:, :, :window]
    query = gpu_kernels.rotary_into_cache(*on[:3], keys, values, on[5], heads, kv_heads).cpu()

    heads_of = packed.view(size, heads + 2 * kv_heads, dim).float()
    rotated = heads_of * cos[0, :, None].float() + _rotate_half(heads_of) * sin[0, :, None].float()
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(query.float(), rotated[:, :heads], atol=tolerance, rtol=tolerance)
    slots = slice(first, first + size)
    expected_keys[0, :, slots] = rotated[:, heads : heads + kv_heads].transpose(0, 1).to(dtype)
    expected_values[0, :, slots] = heads_of[:, heads + kv_heads :].transpose(0, 1).to(dtype)
    torch.testing.assert_close(on[3].cpu(), expected_keys, atol=tolerance, rtol=tolerance)
    assert torch.equal(on[4].cpu(), expected_values)

    allowed = torch.zeros((size, window), dtype=torch.bool)
    allowed[:, :first] = True
    for node in range(size):  # each fed token sees itself and a random set of earlier ones
        allowed[node, first + node] = True
        earlier = torch.rand(node, generator=generator) < 0.4
        allowed[node, first : first + node] = earlier
    mask = torch.zeros((size, window)).masked_fill_(~allowed, float("-inf"))
    scale = dim**-0.5

    mixed = gpu_kernels.masked_attention(
        query.to(device), keys, values, mask.to(device), scale
    ).cpu()

    groups = heads // kv_heads
    keys, values = keys.cpu(), values.cpu()
    shared_keys = keys[0].float().repeat_interleave(groups, 0)
    shared_values = values[0].float().repeat_interleave(groups, 0)
    scores = torch.einsum("bhd,hsd->hbs", query.float(), shared_keys) * scale + mask
    exact = torch.einsum("hbs,hsd->bhd", scores.softmax(-1), shared_values)
    assert mixed.shape == (1, size, heads * dim)
    torch.testing.assert_close(
        mixed.float(), exact.reshape(1, size, -1), atol=tolerance, rtol=tolerance
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_mul_is_the_swiglu_of_both_halves(device: str, dtype: torch.dtype) -> None:
    gate_up = torch.randn((2, 3, 2 * 1500), generator=torch.Generator().manual_seed(1)).to(dtype)
    activated = gpu_kernels.silu_mul(gate_up.to(device)).cpu()
    gate, up = gate_up.float().chunk(2, dim=-1)
    expected = torch.nn.functional.silu(gate) * up
    assert activated.shape == (2, 3, 1500)
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(activated.float(), expected, atol=tolerance, rtol=tolerance)


def test_kernels_serve_only_layers_they_can_run() -> None:
    assert gpu_kernels.usable(128) and gpu_kernels.usable(16)
    assert not gpu_kernels.usable(80)
    assert not gpu_kernels.usable(8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_normalises_qwen3_heads_first(device: str, dtype: torch.dtype) -> None:
    heads, kv_heads, dim, size, first = 4, 2, 32, 6, 20
    generator = torch.Generator().manual_seed(5)
    packed = torch.randn((1, size, (heads + 2 * kv_heads) * dim), generator=generator).to(dtype)
    cos, sin = _rotary(dim, torch.arange(first, first + size), dtype)
    weights = [(1 + torch.randn(dim, generator=generator)).to(dtype) for _ in "qk"]
    keys_all = torch.zeros((1, kv_heads, 64, dim), dtype=dtype)
    values_all = torch.zeros_like(keys_all)
    on = [t.to(device) for t in (packed, cos, sin, keys_all, values_all, torch.tensor(first))]
    norms = (weights[0].to(device), weights[1].to(device), 1e-6)
    query = gpu_kernels.rotary_into_cache(*on[:3], on[3], on[4], on[5], heads, kv_heads, norms)

    heads_of = packed.view(size, heads + 2 * kv_heads, dim).float()
    normal = heads_of * torch.rsqrt(heads_of.pow(2).mean(-1, keepdim=True) + 1e-6)
    scaled = torch.cat(
        (
            normal[:, :heads] * weights[0].float(),
            normal[:, heads : heads + kv_heads] * weights[1].float(),
        ),
        dim=1,
    )
    rotated = scaled * cos[0, :, None].float() + _rotate_half(scaled) * sin[0, :, None].float()
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(
        query.cpu().float(), rotated[:, :heads], atol=tolerance, rtol=tolerance
    )
    written = on[3].cpu()[0, :, first : first + size].transpose(0, 1).float()
    torch.testing.assert_close(written, rotated[:, heads:], atol=tolerance, rtol=tolerance)
    assert torch.equal(
        on[4].cpu()[0, :, first : first + size].transpose(0, 1),
        packed.view(size, -1, dim)[:, heads + kv_heads :],
    )


@INTERPRETED
@pytest.mark.parametrize("architecture", ["qwen2", "qwen3"])
def test_a_runtime_with_the_kernels_decodes_as_the_pytorch_forward(
    tiny_qwen, monkeypatch, architecture: str
) -> None:
    """Appends of every bucket, a draft tree and a kept path, with unpacked weights as on a
    GPU (the output and down projections then add into the residual in place), Qwen3's
    per-head norms included: logits and caches as the PyTorch forward's, the same greedy
    tokens."""
    monkeypatch.setattr(forward_module, "_packing_wanted", lambda network: False)
    model = copy.deepcopy(tiny_qwen.model) if architecture == "qwen2" else tiny_qwen3(5000)
    loaded = replace(tiny_qwen, model=model)
    plain = StaticRuntime(loaded.model, loaded.device, compile=False)
    fused = StaticRuntime(loaded.model, loaded.device, compile=False, triton=True)
    assert fused.parts.triton and not plain.parts.triton and not fused.parts.packed
    assert (fused.parts.layers[0].query_norm is not None) == (architecture == "qwen3")
    caches = [plain.new_cache(), fused.new_cache()]
    generator = torch.Generator().manual_seed(3)
    for size in (40, 1, 3, 9, 1):
        tokens = torch.randint(0, 5000, (size,), generator=generator).tolist()
        expected, got = (runtime.append(cache, tokens) for runtime, cache in zip(
            (plain, fused), caches, strict=True
        ))  # fmt: skip
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
        assert int(got.argmax()) == int(expected.argmax())
    tokens = torch.randint(0, 5000, (12,), generator=generator).tolist()
    parents = [-1, 0, 0, 1, 1, 2, 5, 5, 3, 8, 9, 6]
    past = caches[0].length
    hidden = [
        runtime.verify_tree(cache, tokens, parents)
        for runtime, cache in zip((plain, fused), caches, strict=True)
    ]
    torch.testing.assert_close(hidden[1], hidden[0], atol=1e-4, rtol=1e-4)
    for runtime, cache in zip((plain, fused), caches, strict=True):
        runtime.keep(cache, past, [0, 2, 5, 7])
    for layer in range(len(caches[0].keys)):
        length = caches[0].length
        for name in ("keys", "values"):
            expected = getattr(caches[0], name)[layer][:, :, :length]
            got = getattr(caches[1], name)[layer][:, :, :length]
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert kv.cache_length(caches[1]) == past + 4
