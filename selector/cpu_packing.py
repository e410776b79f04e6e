"""Weights packed for oneDNN: the matrix products of a CPU forward in float32 or bfloat16.

On a CPU, PyTorch multiplies float32 matrices with its BLAS (MKL in the official builds),
which on some processors runs far below what oneDNN, PyTorch's other CPU kernel library,
gets from a weight reordered once into its blocked layout (on a 2-core AMD EPYC, one
projection of a 0.5B model: 2.4x faster for 8 to 97 rows, 1.2x for one row; see
docs/compile.md). The static runtime's fused layers and output projection therefore keep a
packed copy of each weight on CPUs where oneDNN runs and multiply with it.

A packed copy is a second copy: the model's own weights stay as they are, because its own
forward (and anything else holding them) still reads them. So packing is automatic only
when the copies fit in half the memory the system has available; ``CAD_CPU_PACKING=0``
turns it off, ``=1`` on regardless of memory. The copies are made when a layer is fused:
weights changed in place after that are not seen by them (nothing in cad does so; a new
runtime packs anew).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import psutil
import torch
from torch.nn import functional

PACKING_ENV = "CAD_CPU_PACKING"
"""``0``: never pack; ``1``: pack whenever oneDNN runs, whatever the memory."""
PACKED_DTYPES = (torch.float32, torch.bfloat16)
"""Weight types oneDNN's packed products serve (bfloat16: about half float32's time packed,
where the CPU multiplies bfloat16 in hardware; see :func:`packable`)."""
MEMORY_SHARE = 0.5
"""Packed copies are made automatically only if they take at most this share of the memory
available."""


def bfloat16_kernels() -> bool:
    """Whether oneDNN's bfloat16 kernels run on this CPU (AVX-512 BW, VL and DQ, or
    AVX-NE-CONVERT); elsewhere it refuses to reorder bfloat16 weights."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def packable(dtype: torch.dtype) -> bool:
    """Whether oneDNN packs weights of ``dtype`` on this CPU: float32 wherever it runs,
    bfloat16 only where :func:`bfloat16_kernels`. Elsewhere (an AVX2-only laptop, say)
    bfloat16 weights stay unpacked and multiply through PyTorch's own kernels."""
    if dtype == torch.bfloat16:
        return bfloat16_kernels()
    return dtype in PACKED_DTYPES


def packing_wanted(weights: Iterable[torch.Tensor]) -> bool:
    """Whether the static runtime should pack ``weights`` (the projections it would pack):
    float32 or bfloat16 on a CPU where oneDNN runs, and their copies fit in memory (see the
    module docstring for ``CAD_CPU_PACKING``)."""
    weights = list(weights)
    setting = os.environ.get(PACKING_ENV, "").strip()
    if setting == "0" or not weights or not torch.backends.mkldnn.is_available():
        return False
    if any(w.device.type != "cpu" or not packable(w.dtype) for w in weights):
        return False
    if setting == "1":
        return True
    needed = sum(w.numel() * w.element_size() for w in weights)
    return needed <= MEMORY_SHARE * psutil.virtual_memory().available


def pack(weight: torch.Tensor) -> torch.Tensor:
    """oneDNN's blocked copy of a ``(out, in)`` linear weight, for :func:`linear`."""
    with torch.no_grad():
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)


def linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, packed: torch.Tensor | None
) -> torch.Tensor:
    """``functional.linear(x, weight, bias)``, through the packed copy when there is one."""
    if packed is None:
        return functional.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedHead:
    """A model's output projection (a plain linear layer) with a packed copy of its weight:
    called like the module."""

    def __init__(self, module: torch.nn.Linear) -> None:
        self.module = module
        self.packed = pack(module.weight)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        return linear(hidden, self.module.weight, self.module.bias, self.packed)

    @property
    def weight(self) -> torch.Tensor:
        """The module's own weight."""
        return self.module.weight

    @property
    def bias(self) -> torch.Tensor | None:
        """The module's own bias."""
        return self.module.bias
