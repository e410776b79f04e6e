"""Kernel benchmark: copying N tokens by one parallel forward vs N decode steps.

python -m bench.kernel --model qwen2.5-0.5b --prefix 1024 --out-json k.json --out-md k.md
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from bench.harness import machine, pick_model, spread, synchronize
from cad.selector import kv

DEFAULT_SPANS = (8, 16, 32, 64, 128, 256, 512)


def time_copy(loaded, cache, prefix: int, span: list[int]) -> float:
    """Seconds for one forward of ``span`` after ``prefix`` cached tokens."""
    kv.truncate(cache, prefix)
    synchronize(loaded)
    began = time.perf_counter()
    kv.append(loaded.model, cache, span, loaded.device)
    synchronize(loaded)
    return time.perf_counter() - began


def time_decode(loaded, cache, prefix: int, span: list[int]) -> float:
    """Seconds for ``len(span)`` one-token forwards after ``prefix`` cached tokens."""
    kv.truncate(cache, prefix)
    synchronize(loaded)
    began = time.perf_counter()
    for token in span:
        kv.decode_one(loaded.model, cache, token, loaded.device)
    synchronize(loaded)
    return time.perf_counter() - began


def run(model: str, device: str, dtype: str, prefix: int, spans: list[int], trials: int) -> dict:
    """Median and spread of both costs for every span length, plus their ratio."""
    loaded = pick_model(model, device, dtype)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 100_000, (prefix + max(spans),), generator=generator).tolist()
    cache = kv.new_cache(loaded.model)
    kv.prefill(loaded.model, cache, tokens[:prefix], loaded.device)
    for _ in range(2):
        time_copy(loaded, cache, prefix, tokens[prefix : prefix + 8])
        time_decode(loaded, cache, prefix, tokens[prefix : prefix + 2])
    rows = []
    for n in spans:
        span = tokens[prefix : prefix + n]
        copy = [time_copy(loaded, cache, prefix, span) for _ in range(trials)]
        decode = [time_decode(loaded, cache, prefix, span) for _ in range(trials)]
        ratios = [d / c for d, c in zip(decode, copy, strict=True)]
        rows.append(
            {"n": n, "copy_s": spread(copy), "decode_s": spread(decode), "speedup": spread(ratios)}
        )
        print(
            f"N={n:4d} copy {rows[-1]['copy_s']['median'] * 1e3:8.2f} ms  "
            f"decode {rows[-1]['decode_s']['median'] * 1e3:9.2f} ms  "
            f"speedup {rows[-1]['speedup']['median']:7.1f}x",
            flush=True,
        )
    return {
        "model": loaded.name,
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "device": machine(),
        "prefix": prefix,
        "trials": trials,
        "rows": rows,
    }


def markdown(result: dict) -> str:
    """The README table for one run."""
    lines = [
        f"Kernel: {result['model']}, {result['dtype']}, {result['device']}, "
        f"{result['prefix']}-token prefix, median of {result['trials']} trials (IQR)",
        "",
        "| N | one forward (ms) | N decode steps (ms) | speedup |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        c, d, s = row["copy_s"], row["decode_s"], row["speedup"]
        lines.append(
            f"| {row['n']} | {c['median'] * 1e3:.2f} ({c['q1'] * 1e3:.2f}–{c['q3'] * 1e3:.2f}) "
            f"| {d['median'] * 1e3:.1f} ({d['q1'] * 1e3:.1f}–{d['q3'] * 1e3:.1f}) "
            f"| {s['median']:.1f}× ({s['q1']:.1f}–{s['q3']:.1f}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="qwen2.5-0.5b", help="architecture name (random init) or model folder"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--prefix", type=int, default=1024)
    parser.add_argument("--spans", default=",".join(map(str, DEFAULT_SPANS)))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args()
    spans = [int(s) for s in args.spans.split(",")]
    result = run(args.model, args.device, args.dtype, args.prefix, spans, args.trials)
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2))
    table = markdown(result)
    if args.out_md:
        args.out_md.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
