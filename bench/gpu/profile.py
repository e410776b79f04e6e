"""Where a GPU decode step's time goes: the kernels of one-token steps by kind (from the
profiler), the rate each of the step's matrix products reaches alone against the card's
copy rate, and the floors under a token choice (one read, one pinned copy, one graph
replay).

    python3 -m bench.gpu.profile --model qwen2.5-1.5b --out-json p.json --out-md p.md

The step is profiled through the static runtime run eagerly (every kernel launched on its
own), through CUDA graphs (the default: the same kernels replayed) and through CUDA graphs
with the fused Triton kernels (``cad.selector.gpu_kernels``); the difference between a
graphed step's wall time and the sum of its kernels' times is what launching and the gaps
between dependent kernels cost. Matrix products are timed as CUDA graphs of
20 products over enough distinct weight copies that no product finds its weight in the L2
cache, as a model's layers do not.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.harness import machine, pick_model, write_results
from cad.selector import LoadedModel, kv
from cad.selector.runtime import StaticRuntime, uninstall

KINDS = (
    ("fused (Triton)", r"rotary_kernel|attention_kernel|combine_kernel|silu_mul_kernel"),
    ("matrix products", r"gemm|gemv|cutlass|sm90_|xmma|cublas|splitk|nvjet|matmul"),
    ("softmax", r"softmax"),
    ("norms", r"rms|norm"),
    ("cache writes and gathers", r"index|scatter|gather"),
    ("copies", r"memcpy|memset|copy|cat_"),
    ("reductions", r"reduce|argmax"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|triton"),
)
"""Kernel kinds, each with the pattern its kernels' names match (the first that matches)."""
PRODUCTS_PER_GRAPH = 20
L2_DEFEAT_BYTES = 256 << 20


def kind_of(kernel: str) -> str:
    """The kind a kernel's name says it is (``other`` when none matches)."""
    lowered = kernel.lower()
    for kind, pattern in KINDS:
        if re.search(pattern, lowered):
            return kind
    return "other"


def kernel_table(events: list[tuple[str, int, float]], steps: int) -> dict[str, Any]:
    """Kernels ``(name, count, total µs)`` over ``steps`` steps, per step: by kind (count,
    µs) and the ten slowest kernels."""
    kinds: dict[str, dict[str, float]] = {}
    for name, count, total in events:
        entry = kinds.setdefault(kind_of(name), {"count": 0.0, "us": 0.0})
        entry["count"] += count / steps
        entry["us"] += total / steps
    slowest = sorted(events, key=lambda event: -event[2])[:10]
    return {
        "kinds": dict(sorted(kinds.items(), key=lambda item: -item[1]["us"])),
        "kernels_per_step": sum(count for _, count, _ in events) / steps,
        "kernel_us_per_step": sum(total for _, _, total in events) / steps,
        "slowest": [
            {"name": name[:120], "count": count / steps, "us": total / steps}
            for name, count, total in slowest
        ],
    }


def _device_events(profile: Any) -> list[tuple[str, int, float]]:
    """The profiled kernels and device copies as ``(name, count, total µs)``."""
    events = []
    for average in profile.key_averages():
        total = getattr(average, "self_device_time_total", None)
        if total is None:
            total = getattr(average, "self_cuda_time_total", 0.0)
        if total > 0:
            events.append((average.key, int(average.count), float(total)))
    return events


RUNTIMES = {
    "eager": {"graphs": False},
    "graphs": {"graphs": True},
    "kernels": {"graphs": True, "triton": True},
}
"""The static runtimes profiled, by name, with their options."""


def profile_steps(
    loaded: LoadedModel, options: dict[str, bool], prefix: int, steps: int
) -> dict[str, Any]:
    """The kernels of ``steps`` one-token steps after ``prefix`` cached tokens through the
    static runtime with ``options`` (one of :data:`RUNTIMES`), and the steps' median wall
    time unprofiled."""
    runtime = StaticRuntime(loaded.model, loaded.device, compile=False, **options)
    runtime.install()
    try:
        cache = runtime.new_cache()
        generator = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, 50_000, (prefix + steps,), generator=generator).tolist()
        kv.prefill(loaded.model, cache, tokens[:prefix], loaded.device)

        def run_steps() -> None:
            kv.truncate(cache, prefix)
            for token in tokens[prefix:]:
                kv.decode_one(loaded.model, cache, token, loaded.device)
            torch.cuda.synchronize(loaded.device)

        run_steps()
        walls = []
        for _ in range(3):
            began = time.perf_counter()
            run_steps()
            walls.append((time.perf_counter() - began) / steps * 1e6)
        activities = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as profile:
            run_steps()
        table = kernel_table(_device_events(profile), steps)
        table["wall_us_per_step"] = statistics.median(walls)
        return table
    finally:
        uninstall(loaded.model)


def _graph_time(run: Callable[[], Any], repeats: int = 5) -> float:
    """Microseconds one call of ``run`` takes on the device, replayed as a graph of
    :data:`PRODUCTS_PER_GRAPH` calls (median of ``repeats`` replays)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(PRODUCTS_PER_GRAPH):
            run()
    graph.replay()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / PRODUCTS_PER_GRAPH)
    return statistics.median(times)


def product_shapes(config: Any) -> dict[str, tuple[int, int]]:
    """A decoder layer's fused matrix products and the output projection, as ``(out,
    in)``."""
    hidden = config.hidden_size
    head_dim = getattr(config, "head_dim", None) or hidden // config.num_attention_heads
    kv_width = config.num_key_value_heads * head_dim
    query_width = config.num_attention_heads * head_dim
    return {
        "qkv": (query_width + 2 * kv_width, hidden),
        "out": (hidden, query_width),
        "gate_up": (2 * config.intermediate_size, hidden),
        "down": (hidden, config.intermediate_size),
        "head": (config.vocab_size, hidden),
    }


def _product_time(x: torch.Tensor, weights: list[torch.Tensor]) -> float:
    """Microseconds of one product of ``x`` by a weight, the products taking the weights
    in turn (:func:`_graph_time`)."""
    turn = itertools.cycle(weights)
    return _graph_time(lambda: torch.nn.functional.linear(x, next(turn)))


def copy_rate(device: torch.device) -> float:
    """The card's device-to-device copy rate in GB/s (bytes read and written), the ceiling
    a product reading its weight once can approach."""
    source = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    microseconds = _graph_time(lambda: target.copy_(source), repeats=3)
    return 2 * source.numel() / microseconds / 1e3


def product_rates(
    loaded: LoadedModel, rows: tuple[int, ...], library: str
) -> dict[str, dict[str, float]]:
    """Per product and row count: µs per product and the GB/s of weight it reads, through
    the cuBLAS ``library`` PyTorch is told to prefer."""
    backends = torch.backends.cuda
    previous = backends.preferred_blas_library()
    backends.preferred_blas_library(library)
    try:
        rates: dict[str, dict[str, float]] = {}
        for name, (out, inner) in product_shapes(loaded.model.config).items():
            weight_bytes = out * inner * loaded.dtype.itemsize
            copies = max(2, -(-L2_DEFEAT_BYTES // weight_bytes))
            weights = [
                torch.randn(out, inner, dtype=loaded.dtype, device=loaded.device)
                for _ in range(copies)
            ]
            for count in rows:
                x = torch.randn(count, inner, dtype=loaded.dtype, device=loaded.device)
                microseconds = _product_time(x, weights)
                rates.setdefault(name, {})[str(count)] = microseconds
                rates[name][f"{count}_gb_s"] = weight_bytes / microseconds / 1e3
        return rates
    finally:
        backends.preferred_blas_library(previous)


def choice_floors(device: torch.device, width: int, trials: int = 50) -> dict[str, float]:
    """Median µs of what a token choice cannot avoid: reading one integer back, copying a
    pinned bitmask row of ``width`` words to the device and waiting, replaying a graph of one
    small kernel and waiting."""
    ready = torch.zeros((), dtype=torch.long, device=device)
    host = torch.zeros(width, dtype=torch.int32).pin_memory()
    words = torch.zeros(width, dtype=torch.int32, device=device)
    scratch = torch.zeros(16, device=device)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize(device)
    with torch.cuda.graph(graph):
        scratch.add_(1)

    def median_us(run: Callable[[], Any]) -> float:
        times = []
        for attempt in range(trials + 5):
            torch.cuda.synchronize(device)
            began = time.perf_counter()
            run()
            if attempt >= 5:
                times.append((time.perf_counter() - began) * 1e6)
        return statistics.median(times)

    def replay() -> None:
        graph.replay()
        torch.cuda.synchronize(device)

    def pinned_copy() -> None:
        words.copy_(host, non_blocking=True)
        torch.cuda.synchronize(device)

    return {
        "read_us": median_us(lambda: int(ready)),
        "pinned_copy_us": median_us(pinned_copy),
        "replay_us": median_us(replay),
    }


def markdown(result: dict[str, Any]) -> str:
    """The step's kernels by kind, the products' rates and the choice's floors."""
    names = [name for name in RUNTIMES if name in result]
    lines = [
        f"Decode step profile: {result['model']} (random init), {result['dtype']}, "
        f"{result['machine']}, {result['prefix']}-token prefix, {result['steps']} steps",
        "",
        "| kind | "
        + " | ".join(f"{name}: kernels/step | {name}: µs/step" for name in names)
        + " |",
        "| --- | " + " | ".join("---: | ---:" for _ in names) + " |",
    ]
    empty = {"count": 0, "us": 0}
    kinds = dict.fromkeys(kind for name in names for kind in result[name]["kinds"])
    for kind in kinds:
        cells = [result[name]["kinds"].get(kind, empty) for name in names]
        shown = " | ".join(f"{cell['count']:.0f} | {cell['us']:.0f}" for cell in cells)
        lines.append(f"| {kind} | {shown} |")
    blank = " | ".join("" for _ in range(2 * len(names) - 2))
    for name in names:
        table = result[name]
        lines.append(
            f"| **{name}: all kernels / wall** | {table['kernels_per_step']:.0f} "
            f"| {table['kernel_us_per_step']:.0f} / {table['wall_us_per_step']:.0f} "
            f"| {blank} |"
        )
    eager = result["eager"]
    if "kernels_failed" in result:
        lines += ["", f"The fused kernels failed and are not profiled: {result['kernels_failed']}"]
    lines += ["", "Slowest kernels of the eager step (µs per step, count per step):", ""]
    lines += [
        f"- {kernel['us']:.0f} µs ×{kernel['count']:.0f}: `{kernel['name']}`"
        for kernel in eager["slowest"]
    ]
    copy = result["copy_gb_s"]
    lines += [
        "",
        f"Matrix products alone (µs, and GB/s of weight read; the card copies {copy:.0f} GB/s "
        "counting bytes read and written):",
        "",
        "| product (out × in) | library | "
        + " | ".join(f"{n} rows" for n in result["rows"])
        + " |",
        "| --- | --- | " + " | ".join("---:" for _ in result["rows"]) + " |",
    ]
    for library, rates in result["products"].items():
        for name, rate in rates.items():
            out, inner = result["shapes"][name]
            cells = " | ".join(
                f"{rate[str(n)]:.1f} ({rate[f'{n}_gb_s']:.0f})" for n in result["rows"]
            )
            lines.append(f"| {name} ({out} × {inner}) | {library} | {cells} |")
    floors = result["choice_floors"]
    lines += [
        "",
        f"Token choice floors (median µs, host wall): one read back {floors['read_us']:.1f}, "
        f"a pinned bitmask row to the device {floors['pinned_copy_us']:.1f}, one graph replay "
        f"of a small kernel {floors['replay_us']:.1f}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line entry point; returns what it wrote."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-1.5b")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prefix", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--rows", default="1,8,32,128")
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("the step profile needs a CUDA device")
    loaded = pick_model(args.model, "cuda", args.dtype, graphs=False)
    rows = tuple(int(n) for n in args.rows.split(","))
    result: dict[str, Any] = {
        "model": args.model,
        "dtype": args.dtype,
        "machine": machine(),
        "prefix": args.prefix,
        "steps": args.steps,
        "rows": list(rows),
        "shapes": product_shapes(loaded.model.config),
    }
    for name, options in RUNTIMES.items():
        try:
            result[name] = profile_steps(loaded, options, args.prefix, args.steps)
        except Exception as exc:  # one runtime failing must not hide the others
            if name != "kernels":
                raise
            result["kernels_failed"] = f"{type(exc).__name__}: {exc}"[:500]
            print(f"{name}: failed ({result['kernels_failed']})", flush=True)
            continue
        print(f"{name}: {json.dumps(result[name]['kinds'])}", flush=True)
    result["copy_gb_s"] = copy_rate(loaded.device)
    result["products"] = {
        library: product_rates(loaded, rows, library) for library in ("cublas", "cublaslt")
    }
    result["choice_floors"] = choice_floors(loaded.device, -(-loaded.vocab_size // 32))
    write_results(result, markdown(result), args.out_json, args.out_md)
    return result


if __name__ == "__main__":
    main()
