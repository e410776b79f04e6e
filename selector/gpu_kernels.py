"""Fused kernels (Triton) for the static-cache forward of up to
:data:`~cad.selector.static_forward.GROUPED_MATMUL_MAX` tokens on a GPU.

At batch one a GPU layer's time is set by how many kernels it launches, not by the bytes
they read: the 1.5B step ran about twenty kernels a layer, some 70 µs a layer beyond reading
its weights, on an H100 and an H200 alike. These kernels take three groups of them down:

- :func:`rotary_into_cache`: the rotary embedding of every query and key head of the fused
  query/key/value product (after Qwen3's per-head norms, where the model has them), the
  rotated keys and the values written into their cache slots and the queries into a buffer;
  one kernel where the roll, two products and two cache copies took five (and the norms
  three more);
- :func:`masked_attention`: attention of the fed tokens over the cache window under the
  additive mask, split over the window's slots and then combined (flash-decoding); two
  kernels where the grouped products, the mask, the softmax, the casts and the copies
  around them took six or seven;
- :func:`silu_mul`: the SwiGLU activation of the gate and up product in one kernel, not two.

Every kernel computes in float32 and rounds once when it stores, where the PyTorch forward
rounds after each operation; the results differ from it by that rounding alone. Attention's
two products take the cache's dtype on the device (bfloat16 tensor-core products with
float32 sums); the interpreter multiplies bfloat16 wrongly, so there they take float32.

The kernels are built at first use (Triton is imported then): compiled for the device, or,
when ``TRITON_INTERPRET=1`` was set before Triton was first imported, run by Triton's
interpreter on a CPU, which is how the tests check them against the PyTorch forward they
replace on a machine without a GPU."""

from __future__ import annotations

import functools
import importlib.util
import os
from types import SimpleNamespace

import torch

BLOCK_ROWS = 16
"""Query rows (fed token × head sharing a key/value head) one attention program holds: the
smallest a Triton matrix product takes, so a step's 6 or 7 grouped heads fit one block."""
BLOCK_SLOTS = 64
"""Cache slots one attention program reads per iteration."""
TARGET_PROGRAMS = 128
"""How many attention programs a forward aims at, splitting the window's slots among them
until each holds a block of slots: a one-token step over two key/value heads has two row
blocks and would leave most of a GPU's multiprocessors idle without the split."""


def available() -> bool:
    """Whether Triton is installed (the kernels need it; nothing else does)."""
    return importlib.util.find_spec("triton") is not None


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@functools.cache
def _kernels() -> SimpleNamespace:
    """The kernels, decorated at first use (see the module docstring)."""
    import triton
    import triton.language as tl

    @triton.jit
    def rotary_kernel(
        packed,
        cos,
        sin,
        query,
        keys,
        values,
        start,
        query_norm,
        key_norm,
        eps,
        row_stride,
        table_stride,
        key_head_stride,
        key_slot_stride,
        value_head_stride,
        value_slot_stride,
        HEADS: tl.constexpr,
        KV_HEADS: tl.constexpr,
        HALF: tl.constexpr,
        NORMS: tl.constexpr,
    ):
        token = tl.program_id(0)
        head = tl.program_id(1)
        offsets = tl.arange(0, HALF)
        row = packed + token * row_stride + head * (2 * HALF)
        first = tl.load(row + offsets).to(tl.float32)
        second = tl.load(row + HALF + offsets).to(tl.float32)
        slot = tl.load(start) + token
        if NORMS and head < HEADS + KV_HEADS:
            on_query = head < HEADS
            first_weight = tl.where(
                on_query, tl.load(query_norm + offsets), tl.load(key_norm + offsets)
            )
            second_weight = tl.where(
                on_query, tl.load(query_norm + HALF + offsets), tl.load(key_norm + HALF + offsets)
            )
            squares = tl.sum(first * first, 0) + tl.sum(second * second, 0)
            factor = 1.0 / tl.sqrt(squares / (2 * HALF) + eps)
            first = first * factor * first_weight.to(tl.float32)
            second = second * factor * second_weight.to(tl.float32)
        if head < HEADS + KV_HEADS:
            cos_row = cos + token * table_stride
            sin_row = sin + token * table_stride
            cos_first = tl.load(cos_row + offsets).to(tl.float32)
            cos_second = tl.load(cos_row + HALF + offsets).to(tl.float32)
            sin_first = tl.load(sin_row + offsets).to(tl.float32)
            sin_second = tl.load(sin_row + HALF + offsets).to(tl.float32)
            rotated_first = first * cos_first - second * sin_first
            rotated_second = second * cos_second + first * sin_second
            if head < HEADS:
                target = query + (token * HEADS + head) * (2 * HALF)
            else:
                target = keys + (head - HEADS) * key_head_stride + slot * key_slot_stride
            tl.store(target + offsets, rotated_first.to(target.dtype.element_ty))
            tl.store(target + HALF + offsets, rotated_second.to(target.dtype.element_ty))
        else:
            target = values + (head - HEADS - KV_HEADS) * value_head_stride
            target += slot * value_slot_stride
            tl.store(target + offsets, first.to(target.dtype.element_ty))
            tl.store(target + HALF + offsets, second.to(target.dtype.element_ty))

    @triton.jit
    def attention_kernel(
        query,
        keys,
        values,
        mask,
        part_max,
        part_sum,
        part_acc,
        scale,
        rows,
        slots,
        split_size,
        key_head_stride,
        key_slot_stride,
        value_head_stride,
        value_slot_stride,
        mask_stride,
        GROUPS: tl.constexpr,
        HEADS: tl.constexpr,
        DIM: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        PRECISION: tl.constexpr,
        UPCAST: tl.constexpr,
    ):
        kv_head = tl.program_id(0)
        block = tl.program_id(1)
        split = tl.program_id(2)
        splits = tl.num_programs(2)
        row = block * BLOCK_M + tl.arange(0, BLOCK_M)
        live = row < rows
        token = row // GROUPS
        head = kv_head * GROUPS + row % GROUPS
        dims = tl.arange(0, DIM)
        q = tl.load(
            query + (token * HEADS + head)[:, None] * DIM + dims[None, :],
            mask=live[:, None],
            other=0.0,
        )
        if UPCAST:
            q = q.to(tl.float32)
        best = tl.full([BLOCK_M], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, DIM], tl.float32)
        low = split * split_size
        high = tl.minimum(low + split_size, slots)
        key_base = keys + kv_head * key_head_stride
        value_base = values + kv_head * value_head_stride
        for begin in range(low, high, BLOCK_N):
            slot = begin + tl.arange(0, BLOCK_N)
            inside = slot < high
            k = tl.load(
                key_base + slot[:, None] * key_slot_stride + dims[None, :],
                mask=inside[:, None],
                other=0.0,
            )
            if UPCAST:
                k = k.to(tl.float32)
            scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
            scores += tl.load(
                mask + token[:, None] * mask_stride + slot[None, :],
                mask=live[:, None] & inside[None, :],
                other=float("-inf"),
            )
            top = tl.maximum(best, tl.max(scores, 1))
            shift = tl.where(top == float("-inf"), 0.0, top)
            weights = tl.exp(scores - shift[:, None])
            kept = tl.exp(best - shift)
            total = total * kept + tl.sum(weights, 1)
            v = tl.load(
                value_base + slot[:, None] * value_slot_stride + dims[None, :],
                mask=inside[:, None],
                other=0.0,
            )
            if UPCAST:
                v = v.to(tl.float32)
            acc = acc * kept[:, None] + tl.dot(weights.to(v.dtype), v, input_precision=PRECISION)
            best = top
        part = (kv_head * rows + row) * splits + split
        tl.store(part_max + part, best, mask=live)
        tl.store(part_sum + part, total, mask=live)
        tl.store(part_acc + part[:, None] * DIM + dims[None, :], acc, mask=live[:, None])

    @triton.jit
    def combine_kernel(
        part_max,
        part_sum,
        part_acc,
        out,
        rows,
        splits,
        GROUPS: tl.constexpr,
        HEADS: tl.constexpr,
        DIM: tl.constexpr,
        SPLITS: tl.constexpr,
    ):
        kv_head = tl.program_id(0)
        row = tl.program_id(1)
        split = tl.arange(0, SPLITS)
        live = split < splits
        part = (kv_head * rows + row) * splits + split
        best = tl.load(part_max + part, mask=live, other=float("-inf"))
        total = tl.load(part_sum + part, mask=live, other=0.0)
        top = tl.max(best, 0)
        weights = tl.where(best == float("-inf"), 0.0, tl.exp(best - top))
        dims = tl.arange(0, DIM)
        acc = tl.load(part_acc + part[:, None] * DIM + dims[None, :], mask=live[:, None], other=0.0)
        mixed = tl.sum(acc * weights[:, None], 0) / tl.sum(total * weights, 0)
        head = kv_head * GROUPS + row % GROUPS
        target = out + ((row // GROUPS) * HEADS + head) * DIM + dims
        tl.store(target, mixed.to(out.dtype.element_ty))

    @triton.jit
    def silu_mul_kernel(gate_up, out, width, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        column = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        live = column < width
        source = gate_up + row * 2 * width + column
        gate = tl.load(source, mask=live, other=0.0).to(tl.float32)
        up = tl.load(source + width, mask=live, other=0.0).to(tl.float32)
        activated = gate * tl.sigmoid(gate) * up
        tl.store(out + row * width + column, activated.to(out.dtype.element_ty), mask=live)

    return SimpleNamespace(
        next_power_of_2=triton.next_power_of_2,
        cdiv=triton.cdiv,
        rotary=rotary_kernel,
        attention=attention_kernel,
        combine=combine_kernel,
        silu_mul=silu_mul_kernel,
    )


def rotary_into_cache(
    packed: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    start: torch.Tensor,
    heads: int,
    kv_heads: int,
    norms: tuple[torch.Tensor, torch.Tensor, float] | None = None,
) -> torch.Tensor:
    """The fused query/key/value product ``packed`` ``(1, B, (heads + 2 * kv_heads) * D)``
    of ``B`` tokens fed after ``start`` (a 0-d device tensor) cached ones: with ``norms``
    (the query norm's and the key norm's weights ``(D,)`` and their epsilon: Qwen3's) each
    query and key head RMS-normalised first; then the rotary embedding (``cos``, ``sin``:
    ``(1, B, D)``, the model's rotary tables) applied to every query and key head, keys and
    values written into cache slots ``start .. start + B - 1`` of ``keys`` / ``values`` ``(1,
    kv_heads, S, D)``. Returns the rotated queries ``(B, heads, D)``."""
    size, dim = packed.shape[1], cos.shape[-1]
    packed = packed.contiguous()
    cos, sin = cos.contiguous(), sin.contiguous()
    query = packed.new_empty((size, heads, dim))
    query_norm, key_norm, eps = norms if norms is not None else (packed, packed, 0.0)
    kernels = _kernels()
    kernels.rotary[(size, heads + 2 * kv_heads)](
        packed,
        cos,
        sin,
        query,
        keys,
        values,
        start,
        query_norm,
        key_norm,
        eps,
        packed.stride(1),
        cos.stride(1),
        keys.stride(1),
        keys.stride(2),
        values.stride(1),
        values.stride(2),
        HEADS=heads,
        KV_HEADS=kv_heads,
        HALF=dim // 2,
        NORMS=norms is not None,
    )
    return query


def masked_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of ``query`` ``(B, heads, D)`` over the cache window ``keys`` / ``values``
    ``(1, kv_heads, S, D)`` under the additive float32 ``mask`` ``(B, S)`` (0 where a token
    sees a slot, ``-inf`` elsewhere; every token sees at least one slot); heads sharing a
    key/value head read it together. Returns ``(1, B, heads * D)``."""
    size, heads, dim = query.shape
    kv_heads, slots = keys.shape[1], keys.shape[2]
    groups = heads // kv_heads
    rows = size * groups
    kernels = _kernels()
    blocks = kernels.cdiv(rows, BLOCK_ROWS)
    most = kernels.cdiv(slots, BLOCK_SLOTS)
    splits = max(1, min(most, kernels.cdiv(TARGET_PROGRAMS, kv_heads * blocks)))
    split_size = kernels.cdiv(kernels.cdiv(slots, splits), BLOCK_SLOTS) * BLOCK_SLOTS
    splits = kernels.cdiv(slots, split_size)
    part_max = torch.empty((kv_heads, rows, splits), dtype=torch.float32, device=query.device)
    part_sum = torch.empty_like(part_max)
    part_acc = torch.empty((kv_heads, rows, splits, dim), dtype=torch.float32, device=query.device)
    mask = mask.contiguous()
    precision = "ieee" if query.dtype == torch.float32 else "tf32"
    kernels.attention[(kv_heads, blocks, splits)](
        query,
        keys,
        values,
        mask,
        part_max,
        part_sum,
        part_acc,
        scale,
        rows,
        slots,
        split_size,
        keys.stride(1),
        keys.stride(2),
        values.stride(1),
        values.stride(2),
        mask.stride(0),
        GROUPS=groups,
        HEADS=heads,
        DIM=dim,
        BLOCK_M=BLOCK_ROWS,
        BLOCK_N=BLOCK_SLOTS,
        PRECISION=precision,
        UPCAST=_interpreting(),
    )
    out = query.new_empty((size, heads, dim))
    kernels.combine[(kv_heads, rows)](
        part_max,
        part_sum,
        part_acc,
        out,
        rows,
        splits,
        GROUPS=groups,
        HEADS=heads,
        DIM=dim,
        SPLITS=kernels.next_power_of_2(splits),
    )
    return out.view(1, size, heads * dim)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for the gate and up halves of ``gate_up`` ``(..., 2 * F)``."""
    width = gate_up.shape[-1] // 2
    flat = gate_up.contiguous().view(-1, 2 * width)
    out = gate_up.new_empty((flat.shape[0], width))
    block = 1024
    kernels = _kernels()
    kernels.silu_mul[(flat.shape[0], kernels.cdiv(width, block))](flat, out, width, BLOCK=block)
    return out.view(*gate_up.shape[:-1], width)


def usable(head_dim: int) -> bool:
    """Whether these kernels can run a model's layers: Triton installed and a head size that
    is a power of two of at least 16 (the kernels' block shapes)."""
    return available() and head_dim >= 16 and head_dim & (head_dim - 1) == 0
