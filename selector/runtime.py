"""The static-cache runtime: preallocated KV caches, forwards padded to a few bucket sizes,
attention over the filled part of the cache only, replayed as CUDA graphs on a GPU and
optionally compiled (regionally) with ``torch.compile``.

Installed on a loaded model (``install``, ``load_model(...)`` on a GPU, or
``load_model(..., compile=True)``), it takes over every function of
:mod:`cad.selector.kv` and :mod:`cad.selector.tree_verify` for the caches it creates:
``kv.new_cache(model)`` returns a :class:`StaticCache`, and appends, verifications, kept
paths and truncations of that cache run here. Code written against those functions gets the
static path without changing.

Shapes are what keeps graphs and compiled code to a handful: a forward of ``n`` tokens is
padded to the next of :data:`BUCKETS` (longer appends go in chunks of the largest), it
attends over a power-of-two window of the cache (:func:`window_size`), the cache capacity is
a power of two grown by doubling, and the cache position is a tensor input, so nothing is
captured or compiled again as decoding advances. Without graphs or compiling (the packed
CPU runtime) shapes need not repeat: a forward runs at its own width over exactly the filled
slots. Every input crosses to the device in one asynchronous copy; nothing is read back.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch

from cad.selector import compile_cache
from cad.selector.compiling import Compiled, compiled_graphs
from cad.selector.errors import ContextTooLongError
from cad.selector.graphs import CudaGraphs, GraphRunner
from cad.selector.sampling import to_device
from cad.selector.static_forward import (
    MAX_TREE,
    ModelParts,
    UnsupportedModel,
    compact,
    forward,
    forward_last,
)

BUCKETS = (1, 8, 16, 32, 64, 128, MAX_TREE)
"""Token counts a forward is padded to: the one-token step, draft trees of 8 to 128 nodes
(and the chains between), long appends in chunks of the largest."""
MIN_CAPACITY = 256
"""The smallest cache, and the smallest window of a cache a forward attends over."""

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "BUCKETS",
    "StaticCache",
    "StaticRuntime",
    "UnsupportedModel",
    "install",
    "installed",
    "output_head",
    "uninstall",
]


def in_place(nodes: Sequence[int]) -> int:
    """How many leading nodes of a kept path are already where the path puts them (node
    ``i`` at position ``i``: the chain before a tree, and first children below it)."""
    start = 0
    while start < len(nodes) and nodes[start] == start:
        start += 1
    return start


def bucket(size: int) -> int:
    """The smallest bucket holding ``size`` tokens (``1 <= size <= MAX_TREE``)."""
    if not 1 <= size <= MAX_TREE:
        raise ValueError(f"a forward takes 1 to {MAX_TREE} tokens, not {size}")
    return BUCKETS[bisect.bisect_left(BUCKETS, size)]


def chunks(size: int, *, pad_freely: bool = False) -> list[int]:
    """How an append of ``size`` tokens is split into forwards: whole largest buckets, then
    the rest in one padded forward when ``pad_freely`` (a GPU, where a forward's cost hardly
    depends on its width at these sizes), else in pieces padded by at most half their bucket
    or by a few tokens, so padding never more than doubles the work."""
    pieces: list[int] = []
    while size > 0:
        if size >= MAX_TREE:
            piece = MAX_TREE
        elif pad_freely or bucket(size) <= 2 * size or bucket(size) - size <= BUCKETS[1]:
            piece = size
        else:
            piece = BUCKETS[bisect.bisect_right(BUCKETS, size) - 1]
        pieces.append(piece)
        size -= piece
    return pieces


def window_size(end: int, capacity: int) -> int:
    """The cache slots a forward writing below slot ``end`` attends over: the smallest power
    of two holding them (at least :data:`MIN_CAPACITY`), at most the whole ``capacity``.
    Attention then reads at most twice the filled part of the cache, never its empty rest,
    and a handful of sizes serves a whole decode."""
    if not 1 <= end <= capacity:
        raise ValueError(f"a forward ends within the cache's {capacity} slots, not at {end}")
    return min(capacity, max(MIN_CAPACITY, 1 << (end - 1).bit_length()))


@dataclass(eq=False)
class CacheTensors:
    """One preallocated set of cache tensors ``(1, kv_heads, capacity, head_dim)`` per
    layer, with the window views and the CUDA graphs made on them (graphs write to these
    very tensors, so they live and die with them)."""

    capacity: int
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    windows: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = field(default_factory=dict)
    graphs: dict[Hashable, Any] = field(default_factory=dict)

    def window(self, size: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's keys and values over the first ``size`` slots (views, made once
        per size: the few sizes :func:`window_size` gives)."""
        if size == self.capacity:
            return self.keys, self.values
        if size not in self.windows:
            self.windows[size] = self.first(size)
        return self.windows[size]

    def first(self, size: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's keys and values over the first ``size`` slots, as new views."""
        return [t[:, :, :size] for t in self.keys], [t[:, :, :size] for t in self.values]


def _empty() -> CacheTensors:
    return CacheTensors(0, [], [])


class StaticCache:
    """The keys and values of every layer in preallocated tensors; slots ``0 .. length - 1``
    hold the sequence so far. Created by :meth:`StaticRuntime.new_cache`; its tensors go
    back to the runtime when it is dropped."""

    def __init__(self, runtime: StaticRuntime) -> None:
        self.runtime = runtime
        self.length = 0
        self._held = [_empty()]
        weakref.finalize(self, runtime.release, self._held)

    @property
    def tensors(self) -> CacheTensors:
        """The tensor set the cache currently lives in."""
        return self._held[0]

    @property
    def capacity(self) -> int:
        """Positions the tensors hold (0 before the first forward)."""
        return self.tensors.capacity

    @property
    def keys(self) -> list[torch.Tensor]:
        """One key tensor per layer."""
        return self.tensors.keys

    @property
    def values(self) -> list[torch.Tensor]:
        """One value tensor per layer."""
        return self.tensors.values

    def get_seq_length(self) -> int:
        """Positions held (the name transformers' caches use)."""
        return self.length


class StaticRuntime:
    """Static caches and padded forwards for one model on one device.

    ``graphs`` (default: on a GPU) replays every forward as a CUDA graph captured at its
    first use; ``compile`` compiles the parts of a decoder layer around attention with
    ``backend`` once for all layers, with a persistent artifact cache
    (:mod:`cad.selector.compile_cache`). With neither, the same padded forwards run
    eagerly: the reference the others are tested against. ``triton`` (not with
    ``compile``) runs the forwards of up to 128 tokens through the fused kernels of
    :mod:`cad.selector.gpu_kernels` where they can run the model."""

    def __init__(
        self,
        model: Any,
        device: torch.device,
        *,
        compile: bool = True,
        backend: Any = "inductor",
        graphs: bool | None = None,
        triton: bool = False,
    ) -> None:
        self.model = weakref.ref(model)
        self.device = torch.device(device)
        parts = ModelParts.of(model, pack=not compile, triton=triton and not compile)
        self.dtype = parts.embed.weight.dtype
        self.compiled = compile
        self.backend = backend if compile else None
        self.cache_key = compile_cache.cache_key(model, self.device, backend) if compile else None
        if self.cache_key is not None:
            compile_cache.load(self.cache_key)
            table = 1 if parts.fused else 2
            before_dims = {1: 1, 2: table, 3: table}
            parts = dataclasses.replace(
                parts,
                before=Compiled(parts.before, backend, dynamic_args=before_dims),
                after=Compiled(parts.after, backend, dynamic_args={1: 1, 2: 1}),
            )
        self.parts = parts
        on_gpu = self.device.type == "cuda"
        self.graphs: GraphRunner | None = (
            CudaGraphs(self.device) if on_gpu and (graphs is None or graphs) else None
        )
        self.capture_s = 0.0
        """Seconds spent capturing graphs and compiling, at the first use of each shape."""
        config = model.config
        context = int(getattr(config, "max_position_embeddings", None) or 32768)
        self.context_length = context
        self.max_capacity = 1 << (context + MAX_TREE - 1).bit_length()
        self._free: dict[int, CacheTensors] = {}
        self._lock = threading.Lock()
        self._saved_at = 0
        self._forward = forward
        self._forward_last = forward_last
        self._compact = compact

    def install(self) -> StaticRuntime:
        """Make this the runtime of its model again (after :func:`uninstall`)."""
        model = self.model()
        if model is not None:
            _RUNTIMES[model] = self
        return self

    # -- caches ------------------------------------------------------------------------------

    def new_cache(self) -> StaticCache:
        """An empty cache; its tensors are allocated (or reused) at the first forward, sized
        to what that forward suggests."""
        return StaticCache(self)

    def release(self, held: list[CacheTensors]) -> None:
        """Take back a cache's tensors (and their graphs) for the next cache of the same
        capacity; one set is kept per capacity."""
        tensors = held[0]
        if tensors.capacity:
            with self._lock:
                self._free.setdefault(tensors.capacity, tensors)
        held[0] = _empty()

    def _take(self, capacity: int) -> CacheTensors:
        with self._lock:
            free = self._free.pop(capacity, None)
        if free is not None:
            return free
        parts = self.parts
        shape = (1, parts.num_kv_heads, capacity, parts.head_dim)
        layers = len(parts.layers)
        with torch.inference_mode():
            keys = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(layers)]
            values = [torch.zeros_like(k) for k in keys]
        return CacheTensors(capacity, keys, values)

    def reserve(self, cache: StaticCache, positions: int) -> None:
        """Make room for ``positions`` more slots after the cached ones, moving the cache to
        a tensor twice as long when it is full (the first forward sizes it for twice what it
        feeds: a prompt is followed by about as many tokens again)."""
        need = cache.length + positions
        if need <= cache.capacity:
            return
        if need > self.max_capacity:
            raise ContextTooLongError(
                f"the edit needs {need} positions but the model's context is "
                f"{self.context_length}; edit a smaller range or use a longer-context model"
            )
        wanted = max(MIN_CAPACITY, 2 * need)
        tensors = self._take(min(1 << (wanted - 1).bit_length(), self.max_capacity))
        old = cache.tensors
        if cache.length:
            with torch.inference_mode():
                for new, before in zip(
                    (*tensors.keys, *tensors.values), (*old.keys, *old.values), strict=True
                ):
                    new[:, :, : cache.length].copy_(before[:, :, : cache.length])
        held = [old]
        cache._held[0] = tensors
        self.release(held)

    # -- forwards ----------------------------------------------------------------------------

    def _launch(
        self,
        tensors: CacheTensors,
        key: Hashable,
        ints: list[int] | np.ndarray,
        body: Callable[[torch.Tensor], T],
    ) -> T:
        """Run ``body`` on ``ints`` as a device tensor: replayed from the graph of ``key``
        on these tensors, or eagerly. Time spent capturing or compiling is added to
        :attr:`capture_s`; after a call that compiled something the artifacts are saved."""
        host = torch.as_tensor(ints, dtype=torch.long)
        compiled = compiled_graphs() if self.compiled else 0
        if self.graphs is not None:
            result, captured = self.graphs.run(tensors.graphs, key, host, body)
            self.capture_s += captured
        else:
            began = time.perf_counter()
            result = body(to_device(host, self.device))
            if self.compiled and compiled_graphs() != compiled:
                self.capture_s += time.perf_counter() - began
        self.persist()
        return result

    @property
    def padded(self) -> bool:
        """Whether forwards are padded to :data:`BUCKETS` (for shapes a compiled graph or a
        CUDA graph serves again); uncompiled forwards without graphs run at their own size."""
        return self.compiled or self.graphs is not None

    def _window(
        self, cache: StaticCache, end: int
    ) -> tuple[int, tuple[list[torch.Tensor], list[torch.Tensor]]]:
        """The cache slots a forward writing below slot ``end`` attends over, and every
        layer's keys and values over them: a power-of-two window (:func:`window_size`) when
        forwards are :attr:`padded`, so that shapes repeat, else exactly the first ``end``
        slots (attention then reads no empty slot: up to half its work on a long document)."""
        if self.padded:
            size = window_size(end, cache.capacity)
            return size, cache.tensors.window(size)
        return end, cache.tensors.first(end)

    def _size(self, size: int) -> int:
        """The width a forward of ``size`` tokens runs at: its bucket when forwards are
        :attr:`padded`, else ``size`` itself."""
        padded = bucket(size)
        return padded if self.padded else size

    def _owned(self, tensor: torch.Tensor) -> torch.Tensor:
        """A graph's output is overwritten by its next replay: keep a copy."""
        return tensor.clone() if self.graphs is not None else tensor

    @torch.inference_mode()
    def append(self, cache: StaticCache, token_ids: list[int]) -> torch.Tensor:
        """Feed ``token_ids`` after the cache (in :func:`chunks`); the next-token logits after
        the last one, float32 ``(vocab,)``."""
        if not token_ids:
            raise ValueError("append needs at least one token")
        pad_freely = self.device.type == "cuda" or not self.padded
        pieces = chunks(len(token_ids), pad_freely=pad_freely)
        self.reserve(cache, len(token_ids) - pieces[-1] + self._size(pieces[-1]))
        logits = None
        first = 0
        for size in pieces:
            chunk, padded = token_ids[first : first + size], self._size(size)
            first += size
            window, (keys, values) = self._window(cache, cache.length + padded)

            def body(packed: torch.Tensor, keys=keys, values=values, padded=padded) -> Any:
                tokens, start, last = packed[:padded][None], packed[padded], packed[padded + 1 :]
                return self._forward_last(self.parts, keys, values, tokens, start, last)

            ints = [*chunk, *[0] * (padded - size), cache.length, size - 1]
            logits = self._owned(
                self._launch(cache.tensors, ("append", padded, window), ints, body)
            )
            cache.length += size
        assert logits is not None
        return logits

    @torch.inference_mode()
    def verify_tree(
        self, cache: StaticCache, tokens: Sequence[int], parents: Sequence[int]
    ) -> torch.Tensor:
        """Feed a tree of tokens (``parents[i] < i``, ``-1`` for a root) after the cache in
        one forward; returns the final hidden states ``(n, hidden)``. The cache then holds
        every node after the prefix, in order (see :meth:`keep`). ``tokens`` and ``parents``
        may be lists or int64 arrays (a draft tree's layout)."""
        size = len(tokens)
        padded = self._size(size)
        self.reserve(cache, padded)
        window, (keys, values) = self._window(cache, cache.length + padded)

        def body(packed: torch.Tensor) -> Any:
            nodes, links, start = packed[:padded][None], packed[padded:-1], packed[-1]
            return self._forward(self.parts, keys, values, nodes, start, links)

        ints = np.zeros(2 * padded + 1, dtype=np.int64)
        ints[:size] = tokens
        ints[padded : padded + size] = parents
        ints[padded + size : 2 * padded] = -1
        ints[-1] = cache.length
        hidden = self._launch(cache.tensors, ("tree", padded, window), ints, body)
        cache.length += size
        return self._owned(hidden[:size])

    def verify(self, cache: StaticCache, token_ids: list[int]) -> torch.Tensor:
        """Feed ``token_ids`` in one forward; logits of every position, float32 ``(n, vocab)``."""
        hidden = self.verify_tree(cache, token_ids, list(range(-1, len(token_ids) - 1)))
        return self.parts.head(hidden).float()

    @torch.inference_mode()
    def keep(self, cache: StaticCache, past: int, nodes: list[int]) -> None:
        """Leave ``past`` cached positions followed by the tree nodes ``nodes`` (a path of the
        tree fed last, root first): their keys and values move down in place. The path's
        leading nodes already in place (a chain fed before the tree) stay where they are."""
        size = len(nodes)
        start = in_place(nodes)
        if start < size:
            moving = nodes[start:]
            padded = self._size(len(moving))
            base = past + start
            rest = range(past + size, base + padded)
            window, (keys, values) = self._window(cache, max(base + padded, past + max(moving) + 1))

            def body(packed: torch.Tensor) -> None:
                self._compact(keys, values, packed[:padded], packed[padded:])

            ints = [*(past + n for n in moving), *rest, *range(base, base + padded)]
            self._launch(cache.tensors, ("keep", padded, window), ints, body)
        cache.length = past + size

    @staticmethod
    def truncate(cache: StaticCache, length: int) -> None:
        """Drop cached positions beyond ``length``."""
        cache.length = min(cache.length, length)

    def persist(self) -> None:
        """Save the compile artifacts of this process (with ``compile``; see
        :mod:`cad.selector.compile_cache`) when something was compiled since the last save."""
        if self.cache_key is not None and compiled_graphs() != self._saved_at:
            self._saved_at = compiled_graphs()
            compile_cache.save(self.cache_key)

    def warm_up(self, capacity: int = 2048) -> None:
        """Run every kind of forward at a few sizes on a cache of ``capacity`` slots, so the
        common graphs are captured (and compiled) before the first edit (``cad serve
        --preload``); the cache's tensors, and their graphs, stay in the pool for the next
        cache of that capacity."""
        cache = self.new_cache()
        self.reserve(cache, capacity // 2)
        for size in (1, BUCKETS[1], BUCKETS[3]):
            self.append(cache, [0] * size)
        for size in BUCKETS[1:-1]:
            past = cache.length
            self.verify_tree(cache, [0] * size, [-1, *range(size - 1)])
            self.keep(cache, past, list(range(0, size // 2 + 2, 2)))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.persist()


_RUNTIMES: weakref.WeakKeyDictionary[Any, StaticRuntime] = weakref.WeakKeyDictionary()


def install(
    model: Any,
    device: torch.device | str,
    *,
    compile: bool = True,
    backend: str = "inductor",
    graphs: bool | None = None,
    triton: bool = False,
) -> StaticRuntime:
    """Give ``model`` a static-cache runtime (regionally compiled by ``backend`` unless
    ``compile=False``; CUDA graphs on a GPU unless ``graphs=False``; the fused kernels with
    ``triton``): from now on ``kv.new_cache(model)`` returns its caches. Raises
    :class:`UnsupportedModel` for architectures it does not know."""
    runtime = StaticRuntime(
        model, torch.device(device), compile=compile, backend=backend, graphs=graphs, triton=triton
    )
    return runtime.install()


def installed(model: Any) -> StaticRuntime | None:
    """The runtime installed on ``model``, if any."""
    return _RUNTIMES.get(model)


def output_head(model: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """The output projection that turns ``model``'s hidden states into logits: its installed
    runtime's (with a packed weight on a CPU) or, without one, the model's own."""
    runtime = _RUNTIMES.get(model)
    return model.get_output_embeddings() if runtime is None else runtime.parts.head


def uninstall(model: Any) -> None:
    """Back to transformers' dynamic cache and eager forwards for new caches."""
    _RUNTIMES.pop(model, None)
