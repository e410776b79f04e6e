"""CUDA graphs of the static runtime's forwards, captured with ``torch.cuda.graph`` (no
compiler needed) lazily, at the first use of each shape.

A forward is a ``body``: a function of one device tensor of packed integers (tokens,
parents, the cache position, ...) whose other inputs — the model, the cache tensors, the
window of them it attends over — are fixed for its ``key``. Its first call runs it for real
on a side stream (which also initialises every kernel it uses: cuBLAS handles, compiled
code) and then records it into a graph over a static copy of its input; later calls copy
the new integers into that input (one asynchronous transfer) and replay the graph, which
costs a handful of microseconds of host time whatever the model's depth.

Graphs write to the cache tensors they were captured on, so they are kept with those tensors
(a dictionary per set of cache tensors, see ``runtime.CacheTensors``): a cache that grows
moves to new tensors and captures their graphs afresh, and tensors that go back to the pool
keep theirs for the next cache. A graph's output tensor is overwritten by its next replay;
callers copy what they keep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch

Body = Callable[[torch.Tensor], Any]
T = TypeVar("T")


def warm_and_record(
    stream: torch.cuda.Stream, run: Callable[[], T], pool: Any = None
) -> tuple[T, torch.cuda.CUDAGraph, T]:
    """Run ``run`` for real on ``stream`` (which initialises every kernel it uses: cuBLAS
    handles, compiled code), then record it into a new graph (recording runs nothing).
    Returns the real run's result, the graph, and the recorded result, whose tensors the
    graph writes at every replay. ``stream`` waits for the current stream first, and the
    current stream for it after. Unlike ``torch.cuda.graph`` it neither empties PyTorch's
    device and pinned-memory caches nor collects garbage first: graphs are captured lazily,
    in the middle of an edit, where emptying the caches would make the allocations after
    every capture slow again."""
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        result = run()
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        try:
            output = run()
        finally:
            graph.capture_end()
    current.wait_stream(stream)
    return result, graph, output


class GraphRunner(Protocol):
    """Runs a forward's ``body`` for a ``key`` from a store of captured graphs."""

    def run(
        self, store: dict[Hashable, Any], key: Hashable, host: torch.Tensor, body: Body
    ) -> tuple[Any, float]:
        """``body`` on ``host`` (a CPU tensor of integers) moved to the device; its result
        and the seconds spent capturing (0 when a graph was replayed)."""
        ...


@dataclass
class Captured:
    """One captured forward: the static input it reads, the output it writes, the graph."""

    inputs: torch.Tensor
    output: Any
    graph: torch.cuda.CUDAGraph


class CudaGraphs:
    """Captures and replays CUDA graphs on one device. Every graph allocates from one
    memory pool (graphs replay one at a time on the current stream, so their scratch memory
    can be shared); captures are serialised by a lock."""

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream(self.device)
        self._lock = threading.Lock()

    def run(
        self, store: dict[Hashable, Any], key: Hashable, host: torch.Tensor, body: Body
    ) -> tuple[Any, float]:
        """Replay the graph of ``key`` on ``host``'s integers, capturing it first if there is
        none yet (see the module docstring)."""
        captured = store.get(key)
        if captured is None:
            return self._capture(store, key, host, body)
        captured.inputs.copy_(host.pin_memory(), non_blocking=True)
        captured.graph.replay()
        return captured.output, 0.0

    def _capture(
        self, store: dict[Hashable, Any], key: Hashable, host: torch.Tensor, body: Body
    ) -> tuple[Any, float]:
        """Run ``body`` for real on the side stream, then record it (recording runs nothing,
        so a forward that is not idempotent, such as moving kept slots, is not applied
        twice). The device is idle before and after, which makes the time honest and lets
        the side stream's memory be reused safely."""
        with self._lock:
            torch.cuda.synchronize(self.device)
            began = time.perf_counter()
            inputs = host.to(self.device)
            result, graph, output = warm_and_record(self.stream, lambda: body(inputs), self.pool)
            torch.cuda.synchronize(self.device)
            store[key] = Captured(inputs, output, graph)
            return result, time.perf_counter() - began
