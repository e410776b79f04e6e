"""Kernel benchmark: copying N tokens by one parallel forward vs N decode steps, through
each runtime interleaved in one process: ``eager`` (transformers, dynamic cache), ``static``
(the static-cache runtime run eagerly), ``graphs`` (the same forwards replayed as CUDA
graphs: the default on a GPU), ``kernels`` (graphs with the fused Triton kernels of
``cad.selector.gpu_kernels``) and ``compiled`` (regionally compiled layers, with graphs on a
GPU); plus the masked token choice and, with ``--edits K``, whole decodes (rewrite mode and
program mode, oracle targets) after their prefill.

    python -m bench.kernel --model qwen2.5-0.5b --prefix 1024 --out-json k.json --out-md k.md
    python -m bench.kernel --model qwen2.5-1.5b --device cuda --compile --edits 5 --out-md k.md
    python -m bench.kernel --model tiny --runtimes eager,static,compiled --edits 5

By default eager, plus graphs on a GPU, plus static and compiled with ``--compile``.
``--model`` is an architecture at random init (``tiny`` is the test suite's 2-layer,
64-wide model) or a model folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.harness import machine, pick_model, spread, synchronize
from cad.grammar import allocate_token_bitmask
from cad.resolver import oracle
from cad.selector import Decoder, LoadedModel, kv
from cad.selector.rewrite import rewrite_forced
from cad.selector.runtime import StaticRuntime, uninstall
from cad.selector.sampling import Sampling, TokenChooser
from cad.training.datasets import load_edits, select_split

DEFAULT_SPANS = (8, 16, 32, 64, 128, 256, 512)
RUNTIMES = ("eager", "static", "graphs", "kernels", "compiled")
"""Every runtime, in table order."""
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = time.perf_counter


def time_copy(loaded: LoadedModel, cache: Any, prefix: int, span: list[int]) -> float:
    """Seconds for one forward of ``span`` after ``prefix`` cached tokens."""
    kv.truncate(cache, prefix)
    synchronize(loaded)
    began = clock()
    kv.append(loaded.model, cache, span, loaded.device)
    synchronize(loaded)
    return clock() - began


def time_decode(loaded: LoadedModel, cache: Any, prefix: int, span: list[int]) -> float:
    """Seconds for ``len(span)`` one-token forwards after ``prefix`` cached tokens."""
    kv.truncate(cache, prefix)
    synchronize(loaded)
    began = clock()
    for token in span:
        kv.decode_one(loaded.model, cache, token, loaded.device)
    synchronize(loaded)
    return clock() - began


def default_runtimes(device: torch.device, compile: bool) -> tuple[str, ...]:
    """Eager, plus graphs on a GPU, plus static and compiled with ``compile``."""
    wanted = {"eager"} | ({"graphs"} if device.type == "cuda" else set())
    wanted |= {"static", "compiled"} if compile else set()
    return tuple(name for name in RUNTIMES if name in wanted)


def make_runtime(loaded: LoadedModel, name: str) -> StaticRuntime | None:
    """The static runtime ``name`` stands for (``None`` for transformers' eager path)."""
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}; known: {', '.join(RUNTIMES)}")
    if name == "eager":
        return None
    compiled = name == "compiled"
    graphs = name != "static"
    triton = name == "kernels"
    return StaticRuntime(
        loaded.model, loaded.device, compile=compiled, graphs=graphs, triton=triton
    )


def _caches(loaded: LoadedModel, names: tuple[str, ...]) -> dict[str, Any]:
    """An empty cache per runtime: transformers' dynamic one, or a static runtime's."""
    caches: dict[str, Any] = {}
    for name in names:
        runtime = make_runtime(loaded, name)
        caches[name] = kv.new_cache(loaded.model) if runtime is None else runtime.new_cache()
    return caches


def forwards(
    loaded: LoadedModel, names: tuple[str, ...], prefix: int, spans: list[int], trials: int
) -> tuple[list[dict], dict[str, float], dict[str, str]]:
    """Per span length: one forward and N steps for every runtime, interleaved; the seconds
    each runtime's first pass took (compilation, for the compiled one); and the runtimes
    whose first pass raised, with the error (they are left out of the rows, the others are
    still measured)."""
    generator = torch.Generator().manual_seed(0)
    vocab = min(loaded.vocab_size, 100_000)
    tokens = torch.randint(0, vocab, (prefix + max(spans),), generator=generator).tolist()
    caches = _caches(loaded, names)
    first: dict[str, float] = {}
    failed: dict[str, str] = {}
    for name, cache in caches.items():
        began = time.perf_counter()
        try:
            kv.prefill(loaded.model, cache, tokens[:prefix], loaded.device)
            for n in sorted({1, *spans}):
                time_copy(loaded, cache, prefix, tokens[prefix : prefix + n])
                time_copy(loaded, cache, prefix, tokens[prefix : prefix + n])
        except Exception as exc:  # one runtime failing must not hide the others
            traceback.print_exc()
            failed[name] = f"{type(exc).__name__}: {exc}"[:500]
            print(f"{name}: failed ({failed[name]}); measuring the others", flush=True)
            continue
        first[name] = time.perf_counter() - began
    caches = {name: cache for name, cache in caches.items() if name not in failed}
    names = tuple(caches)
    rows = []
    for n in spans:
        span = tokens[prefix : prefix + n]
        copy: dict[str, list[float]] = {name: [] for name in names}
        decode: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(trials):
            for name, cache in caches.items():
                copy[name].append(time_copy(loaded, cache, prefix, span))
                decode[name].append(time_decode(loaded, cache, prefix, span))
        row: dict[str, Any] = {"n": n}
        for name in names:
            ratios = [d / c for d, c in zip(decode[name], copy[name], strict=True)]
            row[name] = {
                "copy_s": spread(copy[name]),
                "decode_s": spread(decode[name]),
                "speedup": spread(ratios),
            }
        for name in names[1:]:
            steps = zip(decode[names[0]], decode[name], strict=True)
            row[f"{name}_over_{names[0]}_step"] = spread([e / c for e, c in steps])
        rows.append(row)
        shown = "  ".join(
            f"{name}: copy {row[name]['copy_s']['median'] * 1e3:7.2f} ms "
            f"step {row[name]['decode_s']['median'] / n * 1e3:6.2f} ms"
            for name in names
        )
        print(f"N={n:4d} {shown}", flush=True)
    return rows, first, failed


def token_choice(loaded: LoadedModel, names: tuple[str, ...], trials: int) -> dict[str, dict]:
    """Seconds to choose the greedy token under a bitmask allowing every other token:
    eager tensor operations, one CUDA graph (on a GPU) and one compiled kernel, for the
    runtimes in ``names``, interleaved."""
    vocab = loaded.vocab_size
    bitmask = allocate_token_bitmask(1, vocab)
    bitmask.fill_(0x55555555)
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(1)).to(loaded.device)
    options = {
        "eager": {},
        "graphs": {"graphs": True},
        "compiled": {"backend": "inductor"},
    }
    if loaded.device.type != "cuda":
        del options["graphs"]
    choosers = {
        name: TokenChooser(vocab, loaded.device, Sampling(), **option)
        for name, option in options.items()
        if name in names
    }
    times: dict[str, list[float]] = {name: [] for name in choosers}
    for attempt in range(trials + 2):
        for name, chooser in choosers.items():
            chooser.bitmask.copy_(bitmask)
            scratch = logits.clone()
            synchronize(loaded)
            began = clock()
            chooser.choose(scratch)
            if attempt >= 2:
                times[name].append(clock() - began)
    return {name: spread(values) for name, values in times.items()}


def vocabulary_projection(loaded: LoadedModel, trials: int) -> dict:
    """Seconds for the output projection alone (one position's hidden state to logits over
    the whole vocabulary): the part of every step that no runtime can shorten, since its
    cost is reading the projection's weights."""
    head = loaded.model.get_output_embeddings()
    hidden = torch.randn(1, 1, head.in_features, dtype=loaded.dtype).to(loaded.device)
    times = []
    with torch.inference_mode():
        for attempt in range(trials + 2):
            synchronize(loaded)
            began = clock()
            head(hidden)
            synchronize(loaded)
            if attempt >= 2:
                times.append(clock() - began)
    return spread(times)


def decodes(loaded: LoadedModel, names: tuple[str, ...], edits: int, trials: int) -> list[dict]:
    """Rewrite mode and program mode (oracle targets) on the first ``edits`` held-out
    HumanEvalPack-Fix edits through each runtime but the static one, interleaved: seconds
    after the prefill, and the host's share of them."""
    examples = select_split(load_edits("heval-python"), "test")[:edits]
    runtimes = {name: make_runtime(loaded, name) for name in names if name != "static"}
    decoder = Decoder(loaded, max_new_tokens=8192)
    cases: dict[str, Callable[[Any], Any]] = {
        "rewrite": lambda e: rewrite_forced(loaded, e.before, e.instruction, e.after),
        "program": lambda e: decoder.edit(
            e.before, e.instruction, program=oracle(e.before, e.after)
        ),
    }
    rows = []
    for example in examples:
        row: dict[str, Any] = {"id": example.id}
        for case, run in cases.items():
            after: dict[str, list[float]] = {name: [] for name in runtimes}
            host: dict[str, list[float]] = {name: [] for name in runtimes}
            for attempt in range(trials + 1):
                for name, runtime in runtimes.items():
                    if runtime is not None:
                        runtime.install()
                    result = run(example)
                    uninstall(loaded.model)
                    if result.text != example.after:
                        raise AssertionError(f"{case} ({name}) was not exact on {example.id}")
                    if attempt:
                        stats = result.stats
                        after[name].append(stats.wall_s - stats.prefill_s - stats.capture_s)
                        host[name].append(stats.host_s)
            row[case] = {name: spread(values) for name, values in after.items()}
            row[case]["host"] = {name: spread(values) for name, values in host.items()}
            row[case]["forwards"] = result.stats.forwards
        rows.append(row)
        print(
            f"{example.id}: "
            + "  ".join(
                f"{case} "
                + " / ".join(
                    f"{name} {row[case][name]['median'] * 1e3:.0f} ms" for name in runtimes
                )
                for case in cases
            ),
            flush=True,
        )
    return rows


def run(
    model: str,
    device: str,
    dtype: str,
    prefix: int,
    spans: list[int],
    trials: int,
    compile: bool,
    edits: int,
    runtimes: tuple[str, ...] | None = None,
    save: Callable[[dict], None] = lambda result: None,
) -> dict:
    """Every measurement of one configuration (``runtimes`` default:
    :func:`default_runtimes`), handed to ``save`` after each stage so a run cut short keeps
    what it measured."""
    loaded = pick_model(model, device, dtype, graphs=False)
    names = runtimes or default_runtimes(loaded.device, compile)
    rows, first, failed = forwards(loaded, names, prefix, spans, trials)
    names = tuple(name for name in names if name not in failed)
    result: dict[str, Any] = {
        "model": loaded.name,
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "device": machine(),
        "prefix": prefix,
        "trials": trials,
        "runtimes": list(names),
        "first_pass_s": first,
        "failed": failed,
        "rows": rows,
        "vocab": loaded.vocab_size,
    }
    save(result)
    if len(names) > 1:
        result["choice_s"] = token_choice(loaded, names, max(trials, 20))
        result["projection_s"] = vocabulary_projection(loaded, max(trials, 20))
        save(result)
        if edits:
            result["decodes"] = decodes(loaded, names, edits, trials)
            save(result)
    return result


def _ms(value: dict) -> str:
    return f"{value['median'] * 1e3:.2f} ({value['q1'] * 1e3:.2f}–{value['q3'] * 1e3:.2f})"


def markdown(result: dict) -> str:
    """The README tables for one run."""
    head = (
        f"{result['model']}, {result['dtype']}, {result['device']}, "
        f"{result['prefix']}-token prefix, median of {result['trials']} trials (IQR)"
    )
    if result.get("clock") == "cpu":
        head += ", CPU time of one thread"
    names = result["runtimes"]
    if names == ["eager"]:
        lines = [
            f"Kernel: {head}",
            "",
            "| N | one forward (ms) | N decode steps (ms) | speedup |",
            "| ---: | ---: | ---: | ---: |",
        ]
        for row in result["rows"]:
            c, d, s = row["eager"]["copy_s"], row["eager"]["decode_s"], row["eager"]["speedup"]
            lines.append(
                f"| {row['n']} | {_ms(c)} | {d['median'] * 1e3:.1f} "
                f"({d['q1'] * 1e3:.1f}–{d['q3'] * 1e3:.1f}) "
                f"| {s['median']:.1f}× ({s['q1']:.1f}–{s['q3']:.1f}) |"
            )
        return "\n".join(lines) + "\n"
    joined = " / ".join(names)
    best = names[-1]
    lines = [
        f"Kernel, {joined}: {head}",
        "",
        f"| N | one forward, ms: {joined} | one decode step, ms: {joined} "
        f"| {best} step speed-up over eager |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        copies = " / ".join(f"{row[name]['copy_s']['median'] * 1e3:.2f}" for name in names)
        steps = " / ".join(
            f"{row[name]['decode_s']['median'] / row['n'] * 1e3:.3f}" for name in names
        )
        ratio = row[f"{best}_over_eager_step"]
        lines.append(
            f"| {row['n']} | {copies} | {steps} "
            f"| {ratio['median']:.2f}× ({ratio['q1']:.2f}–{ratio['q3']:.2f}) |"
        )
    first = ", ".join(f"{name} {result['first_pass_s'][name]:.1f} s" for name in names)
    lines += ["", f"First pass over every shape (capture and compilation included): {first}."]
    for name, error in result.get("failed", {}).items():
        lines += ["", f"Runtime {name} failed and is not measured: {error}"]
    if "choice_s" in result:
        choice = result["choice_s"]
        lines += [
            "",
            "Greedy token choice under a bitmask, ms: "
            + ", ".join(f"{name} {_ms(value)}" for name, value in choice.items()),
        ]
    if "projection_s" in result:
        projection = result["projection_s"]["median"]
        row = result["rows"][0]
        rest = {name: row[name]["decode_s"]["median"] / row["n"] - projection for name in names}
        lines += [
            "",
            f"The output projection alone (one position to {result.get('vocab', 'all')} "
            f"logits) takes {_ms(result['projection_s'])} ms of every step; the rest of the "
            f"step at N={row['n']}, ms: "
            + " / ".join(f"{rest[name] * 1e3:.3f}" for name in names)
            + f" ({joined}; {best} {rest['eager'] / rest[best]:.2f}× faster than eager).",
        ]
    if result.get("decodes"):
        shown = [name for name in names if name in result["decodes"][0]["rewrite"]]
        runtimes = " / ".join(shown)
        lines += [
            "",
            f"| edit | rewrite after prefill, ms: {runtimes} | program after prefill, "
            f"ms: {runtimes} | forwards: rewrite / program |",
            "| --- | ---: | ---: | ---: |",
        ]
        for row in result["decodes"]:
            cells = [
                " / ".join(_ms(row[case][name]) for name in shown)
                for case in ("rewrite", "program")
            ]
            lines.append(
                f"| {row['id']} | {cells[0]} | {cells[1]} "
                f"| {row['rewrite']['forwards']} / {row['program']['forwards']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    """Command line entry point; returns the result it wrote."""
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
    parser.add_argument(
        "--compile", action="store_true", help="add the static-cache and compiled runtimes"
    )
    parser.add_argument(
        "--runtimes",
        default="",
        help=f"comma-separated runtimes to compare, from {', '.join(RUNTIMES)} "
        "(default: eager, graphs on a GPU, static and compiled with --compile)",
    )
    parser.add_argument(
        "--edits",
        type=int,
        default=0,
        help="with two runtimes or more: also decode the first K edits",
    )
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="cpu: this thread's CPU time with one torch thread, for a busy shared machine "
        "(forwards and token choice only)",
    )
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    if args.clock == "cpu":
        torch.set_num_threads(1)
    spans = [int(s) for s in args.spans.split(",")]

    def save(result: dict) -> None:
        if args.out_json:
            args.out_json.write_text(json.dumps({**result, "clock": args.clock}, indent=2) + "\n")

    result = run(
        args.model,
        args.device,
        args.dtype,
        args.prefix,
        spans,
        args.trials,
        args.compile,
        args.edits,
        tuple(name for name in args.runtimes.split(",") if name) or None,
        save,
    )
    result["clock"] = args.clock
    save(result)
    table = markdown(result)
    if args.out_md:
        args.out_md.write_text(table)
    print(table)
    return result


if __name__ == "__main__":
    sys.exit(1 if main().get("failed") else 0)
