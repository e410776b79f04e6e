"""The static-cache runtime: preallocated KV caches, forwards padded to a few bucket sizes,
compiled once each with ``torch.compile`` (CUDA graphs on a GPU).

Installed on a loaded model (``install``, or ``load_model(..., compile=True)``), it takes
over every function of :mod:`cad.selector.kv` and :mod:`cad.selector.tree_verify` for the
caches it creates: ``kv.new_cache(model)`` returns a :class:`StaticCache`, and appends,
verifications, kept paths and truncations of that cache run here. Code written against
those functions gets the compiled path without changing.

Shapes are what keeps compilation to a handful of graphs: a forward of ``n`` tokens is padded
to the next of :data:`BUCKETS` (longer appends go in chunks of the largest), the cache
capacity is a power of two grown by doubling, and the cache position is a tensor input, so
nothing recompiles as decoding advances. Every input crosses to the device in one
asynchronous copy; nothing is read back.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from typing import Any

import torch

from cad.selector.compiling import Compiled
from cad.selector.errors import ContextTooLongError
from cad.selector.static_forward import (
    MAX_TREE,
    ModelParts,
    UnsupportedModel,
    compact,
    forward,
    forward_last,
)

BUCKETS = (1, 8, 32, 128, MAX_TREE)
"""Token counts a forward is padded to."""
MIN_CAPACITY = 256

__all__ = [
    "BUCKETS",
    "StaticCache",
    "StaticRuntime",
    "UnsupportedModel",
    "install",
    "installed",
    "uninstall",
]


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


class StaticCache:
    """The keys and values of every layer in preallocated tensors ``(1, kv_heads, capacity,
    head_dim)``; slots ``0 .. length - 1`` hold the sequence so far. Created by
    :meth:`StaticRuntime.new_cache`; its tensors go back to the runtime when it is dropped."""

    def __init__(self, runtime: StaticRuntime) -> None:
        self.runtime = runtime
        self.length = 0
        self._slot: list[Any] = [0, [], []]
        self._windows: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        weakref.finalize(self, runtime.release, self._slot)

    @property
    def capacity(self) -> int:
        """Positions the tensors hold (0 before the first forward)."""
        return self._slot[0]

    @property
    def keys(self) -> list[torch.Tensor]:
        """One key tensor per layer."""
        return self._slot[1]

    @property
    def values(self) -> list[torch.Tensor]:
        """One value tensor per layer."""
        return self._slot[2]

    def get_seq_length(self) -> int:
        """Positions held (the name transformers' caches use)."""
        return self.length

    def window(self, end: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's keys and values over the first slots up to the power of two that
        holds ``end`` (views, made once per size): what a forward writing below ``end``
        needs to see, so that attention does not read the empty rest of a large cache."""
        size = min(self.capacity, max(MIN_CAPACITY, 1 << (end - 1).bit_length()))
        if size == self.capacity:
            return self.keys, self.values
        if size not in self._windows:
            views = tuple([t[:, :, :size] for t in tensors] for tensors in (self.keys, self.values))
            if self.runtime.compiled:
                for view in (*views[0], *views[1]):
                    torch._dynamo.maybe_mark_dynamic(view, 2)
            self._windows[size] = views
        return self._windows[size]


class StaticRuntime:
    """Static caches and (optionally compiled) forwards for one model on one device.

    With ``compile=False`` the same padded forwards run eagerly: the reference the compiled
    path is tested against, and a fallback where compilation is not wanted."""

    def __init__(
        self,
        model: Any,
        device: torch.device,
        *,
        compile: bool = True,
        backend: str = "inductor",
    ) -> None:
        self.model = weakref.ref(model)
        self.parts = ModelParts.of(model)
        self.device = torch.device(device)
        self.dtype = self.parts.embed.weight.dtype
        self.compiled = compile
        config = model.config
        context = int(getattr(config, "max_position_embeddings", None) or 32768)
        self.context_length = context
        self.max_capacity = 1 << (context + MAX_TREE - 1).bit_length()
        self._free: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self._lock = threading.Lock()
        self._graphs = compile and self.device.type == "cuda"
        self._windowed = self.device.type != "cuda"
        self.backend = backend if compile else None
        graphs = self._graphs
        self._forward = Compiled(forward, backend, graphs=graphs) if compile else forward
        self._forward_last = (
            Compiled(forward_last, backend, graphs=graphs) if compile else forward_last
        )
        self._compact = Compiled(compact, backend, graphs=graphs) if compile else compact

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

    def release(self, slot: list[Any]) -> None:
        """Take back a cache's tensors for the next cache of the same capacity (reusing them
        keeps CUDA graphs' static addresses valid); one set is kept per capacity."""
        capacity, keys, values = slot
        if capacity:
            with self._lock:
                self._free.setdefault(capacity, (keys, values))
        slot[:] = [0, [], []]

    def _take(self, capacity: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
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
        if self.compiled:
            for tensor in (*keys, *values):
                if self._graphs:
                    torch._dynamo.mark_static_address(tensor)
                torch._dynamo.maybe_mark_dynamic(tensor, 2)
        return keys, values

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
        capacity = min(1 << (wanted - 1).bit_length(), self.max_capacity)
        keys, values = self._take(capacity)
        old = list(cache._slot)
        if cache.length:
            with torch.inference_mode():
                for new, before in zip((*keys, *values), (*old[1], *old[2]), strict=True):
                    new[:, :, : cache.length].copy_(before[:, :, : cache.length])
        cache._slot[:] = [capacity, keys, values]
        cache._windows.clear()
        self.release(old)

    # -- forwards ----------------------------------------------------------------------------

    def _ints(self, values: list[int]) -> torch.Tensor:
        """Host integers on the device in one copy that does not wait for the device."""
        host = torch.tensor(values, dtype=torch.long)
        if self.device.type == "cuda":
            return host.pin_memory().to(self.device, non_blocking=True)
        return host.to(self.device)

    def _begin(self) -> None:
        if self._graphs:
            torch.compiler.cudagraph_mark_step_begin()

    def _layers(
        self, cache: StaticCache, end: int
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The cache tensors a forward writing below slot ``end`` runs on: on a CPU the
        smallest window holding them; on a GPU the whole cache (one shape per bucket, so
        one CUDA graph each, and reading the empty slots costs little there)."""
        return cache.window(end) if self._windowed else (cache.keys, cache.values)

    def _owned(self, tensor: torch.Tensor) -> torch.Tensor:
        """A CUDA graph's output is overwritten by its next replay: keep a copy."""
        return tensor.clone() if self._graphs else tensor

    @torch.inference_mode()
    def append(self, cache: StaticCache, token_ids: list[int]) -> torch.Tensor:
        """Feed ``token_ids`` after the cache (in :func:`chunks`); the next-token logits after
        the last one, float32 ``(vocab,)``."""
        if not token_ids:
            raise ValueError("append needs at least one token")
        pieces = chunks(len(token_ids), pad_freely=self.device.type == "cuda")
        self.reserve(cache, len(token_ids) - pieces[-1] + bucket(pieces[-1]))
        logits = None
        first = 0
        for size in pieces:
            chunk, padded = token_ids[first : first + size], bucket(size)
            first += size
            packed = self._ints([*chunk, *[0] * (padded - size), cache.length, size - 1])
            keys, values = self._layers(cache, cache.length + padded)
            self._begin()
            logits = self._forward_last(
                self.parts,
                keys,
                values,
                packed[:padded][None],
                packed[padded],
                packed[padded + 1 :],
            )
            cache.length += size
        assert logits is not None
        return self._owned(logits)

    @torch.inference_mode()
    def verify_tree(
        self, cache: StaticCache, tokens: list[int], parents: list[int]
    ) -> torch.Tensor:
        """Feed a tree of tokens (``parents[i] < i``, ``-1`` for a root) after the cache in
        one forward; returns the final hidden states ``(n, hidden)``. The cache then holds
        every node after the prefix, in order (see :meth:`keep`)."""
        size = len(tokens)
        padded = bucket(size)
        self.reserve(cache, padded)
        pad = padded - size
        packed = self._ints([*tokens, *[0] * pad, *parents, *[-1] * pad, cache.length])
        keys, values = self._layers(cache, cache.length + padded)
        self._begin()
        hidden = self._forward(
            self.parts,
            keys,
            values,
            packed[:padded][None],
            packed[2 * padded],
            packed[padded : 2 * padded],
        )
        cache.length += size
        return self._owned(hidden[:size])

    def verify(self, cache: StaticCache, token_ids: list[int]) -> torch.Tensor:
        """Feed ``token_ids`` in one forward; logits of every position, float32 ``(n, vocab)``."""
        hidden = self.verify_tree(cache, token_ids, list(range(-1, len(token_ids) - 1)))
        return self.parts.head(hidden).float()

    @torch.inference_mode()
    def keep(self, cache: StaticCache, past: int, nodes: list[int]) -> None:
        """Leave ``past`` cached positions followed by the tree nodes ``nodes`` (a path of the
        tree fed last, root first): their keys and values move down in place."""
        size = len(nodes)
        if nodes != list(range(size)):
            padded = bucket(size)
            rest = range(past + size, past + padded)
            packed = self._ints([*(past + n for n in nodes), *rest, *range(past, past + padded)])
            keys, values = self._layers(cache, past + max(padded, max(nodes) + 1))
            self._begin()
            self._compact(keys, values, packed[:padded], packed[padded:])
        cache.length = past + size

    @staticmethod
    def truncate(cache: StaticCache, length: int) -> None:
        """Drop cached positions beyond ``length``."""
        cache.length = min(cache.length, length)

    def warm_up(self, capacity: int = 2048) -> None:
        """Run every kind of forward at two sizes on a cache of ``capacity`` slots, so the
        compiled graphs exist before the first edit (``cad serve --preload``)."""
        cache = self.new_cache()
        self.reserve(cache, capacity // 2)
        for size in (1, BUCKETS[1], BUCKETS[2]):
            self.append(cache, [0] * size)
        for size in (BUCKETS[1], BUCKETS[2]):
            past = cache.length
            self.verify_tree(cache, [0] * size, [-1, *range(size - 1)])
            self.keep(cache, past, list(range(0, size // 2 + 2, 2)))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


_RUNTIMES: weakref.WeakKeyDictionary[Any, StaticRuntime] = weakref.WeakKeyDictionary()


def install(
    model: Any, device: torch.device | str, *, compile: bool = True, backend: str = "inductor"
) -> StaticRuntime:
    """Give ``model`` a static-cache runtime (compiled by ``backend`` unless
    ``compile=False``): from now on ``kv.new_cache(model)`` returns its caches. Raises
    :class:`UnsupportedModel` for architectures it does not know."""
    return StaticRuntime(model, torch.device(device), compile=compile, backend=backend).install()


def installed(model: Any) -> StaticRuntime | None:
    """The runtime installed on ``model``, if any."""
    return _RUNTIMES.get(model)


def uninstall(model: Any) -> None:
    """Back to transformers' dynamic cache and eager forwards for new caches."""
    _RUNTIMES.pop(model, None)
