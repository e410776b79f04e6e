"""Start-up on a GPU: seconds from a fresh process's start to its imports, its device being
ready (the first CUDA call, which starts the driver's context), its model, the first forward
of a rewrite-mode edit (with that forward's acceptance) and the edit's end, for the default
CUDA graphs and for ``--compile``, each cold (empty cad, inductor and triton caches) and then
warm (the caches the cold run filled).

    python3 -m bench.gpu.startup --model qwen2.5-1.5b --out-json s.json --out-md s.md

The model loads as ``cad edit`` loads one, from a checkpoint folder: an architecture name is
first initialised at random and saved (once, in a process of its own, not timed). The edit
is the first held-out HumanEvalPack-Fix edit, its target forced (random weights).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("graphs", "compile")
MARKS = (
    "imported",
    "device",
    "tokenizer",
    "weights",
    "on_device",
    "loaded",
    "first_forward",
    "edit",
)
"""The moments marked, in order: imports done, the device's first call, the phases of
:func:`cad.selector.load_model` (tokenizer, weights mapped on the host, moved to the
device, runtime installed: ``loaded``), the first forward and the edit's end."""
PHASE_MARKS = {
    "tokenizer": "tokenizer",
    "weights": "weights",
    "device": "on_device",
    "runtime": "loaded",
}
"""The mark each phase of the load ends (the runtime's install ends the load)."""
READ_CHUNK = 1 << 26


def child(mode: str, model: str, device: str, dtype: str, launched: float) -> dict[str, object]:
    """The measured process: import, load, one edit; the marks in seconds since launch."""
    marks: dict[str, float] = {}

    def mark(name: str) -> None:
        marks.setdefault(name, time.time() - launched)

    import torch

    from bench.harness import pick_model
    from cad.selector.rewrite import rewrite_forced
    from cad.training.datasets import load_edits, select_split

    mark("imported")
    if device.startswith("cuda"):
        torch.empty(1, device=device)
    mark("device")
    loaded = pick_model(
        model,
        device,
        dtype,
        compile=mode == "compile",
        on_phase=lambda phase: mark(PHASE_MARKS[phase]),
    )
    mark("loaded")
    example = select_split(load_edits("heval-python"), "test")[0]
    result = rewrite_forced(
        loaded,
        example.before,
        example.instruction,
        example.after,
        on_progress=lambda _: mark("first_forward"),
    )
    mark("first_forward")
    mark("edit")
    return {
        "marks": marks,
        "exact": result.text == example.after,
        "capture_s": result.stats.capture_s,
    }


def measure(mode: str, model: str, device: str, dtype: str, caches: Path) -> dict[str, object]:
    """One fresh process in ``mode`` with its caches in ``caches``."""
    env = dict(
        os.environ,
        CAD_CACHE_DIR=str(caches / "cad"),
        TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
        TRITON_CACHE_DIR=str(caches / "triton"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    command = [sys.executable, "-m", "bench.gpu.startup", "--child", mode, "--model", model]
    command += ["--device", device, "--dtype", dtype, "--launched", repr(time.time())]
    return _outcome(subprocess.run(command, env=env, capture_output=True, text=True, check=False))


def _outcome(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """A child's last line of JSON, or its last line of error."""
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return {"error": lines[-1][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def save_checkpoint(model: str, device: str, dtype: str, folder: Path) -> dict[str, object]:
    """The architecture ``model`` at random init, saved with its tokenizer to ``folder``
    (in this process)."""
    from bench.harness import QWEN2_TOKENIZER
    from cad.selector.architectures import random_init

    began = time.perf_counter()
    loaded = random_init(model, QWEN2_TOKENIZER, device=device, dtype=dtype)
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return {"saved_s": time.perf_counter() - began}


def read_rate(folder: Path) -> dict[str, float]:
    """Seconds to read the checkpoint's weight files with plain reads, twice in a row (the
    second from the page cache where it holds them), and the first read's GB/s: the floor
    under the model's load on this machine."""
    files = sorted(folder.glob("*.safetensors"))
    size = sum(path.stat().st_size for path in files)
    times = []
    for _ in range(2):
        began = time.perf_counter()
        for path in files:
            with path.open("rb", buffering=0) as handle:
                while handle.read(READ_CHUNK):
                    pass
        times.append(time.perf_counter() - began)
    return {
        "bytes": size,
        "first_s": times[0],
        "second_s": times[1],
        "first_gb_s": size / times[0] / 1e9 if times[0] else 0.0,
    }


def run(model: str, device: str, dtype: str, modes: tuple[str, ...]) -> dict[str, object]:
    """Cold then warm, per mode, each mode with caches of its own, loading ``model`` (a
    folder, or an architecture saved first to one)."""
    from cad.selector.architectures import ARCHITECTURES

    result: dict[str, object] = {"model": model, "device": device, "dtype": dtype}
    with tempfile.TemporaryDirectory(prefix="cad-startup-model-") as saved:
        folder = model
        if model in ARCHITECTURES:
            folder = saved
            command = [sys.executable, "-m", "bench.gpu.startup", "--save-to", saved]
            command += ["--model", model, "--device", device, "--dtype", dtype]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            result["checkpoint"] = _outcome(done)
            print(f"checkpoint: {json.dumps(result['checkpoint'])}", flush=True)
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix=f"cad-startup-{mode}-") as caches:
                runs = {}
                for state in ("cold", "warm"):
                    runs[state] = measure(mode, folder, device, dtype, Path(caches))
                    print(f"{mode} {state}: {json.dumps(runs[state])}", flush=True)
                result[mode] = runs
        result["read"] = read_rate(Path(folder))
        print(f"read: {json.dumps(result['read'])}", flush=True)
    return result


def markdown(result: dict[str, object]) -> str:
    """One row per mode and cache state."""
    lines = [
        f"Start-up, {result['model']} (random init, loaded from a saved checkpoint), "
        f"{result['device']}, {result['dtype']}: seconds since process start",
        "",
        "| runtime | caches | imports | device ready | tokenizer | weights mapped "
        "| on device | runtime ready | first forward | edit done | capture |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode in MODES:
        runs = result.get(mode)
        if not isinstance(runs, dict):
            continue
        for state, run_ in runs.items():
            if "error" in run_:
                lines.append(f"| {mode} | {state} | {run_['error']} |" + " |" * len(MARKS))
                continue
            marks = run_["marks"]
            cells = " | ".join(f"{marks[name]:.1f}" if name in marks else "" for name in MARKS)
            lines.append(f"| {mode} | {state} | {cells} | {run_['capture_s']:.1f} |")
    read = result.get("read")
    if isinstance(read, dict) and read.get("bytes"):
        lines += [
            "",
            f"Reading the checkpoint's {read['bytes'] / 1e9:.2f} GB with plain reads after "
            f"these runs: {read['first_s']:.1f} s ({read['first_gb_s']:.2f} GB/s), then "
            f"{read['second_s']:.1f} s again.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Command line entry point; returns what it wrote."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-1.5b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--save-to", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    if args.save_to:
        outcome = save_checkpoint(args.model, args.device, args.dtype, args.save_to)
        print(json.dumps(outcome))
        return outcome
    if args.child:
        outcome = child(args.child, args.model, args.device, args.dtype, args.launched)
        print(json.dumps(outcome))
        return outcome
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    result = run(args.model, args.device, args.dtype, modes)
    from bench.harness import write_results

    write_results(result, markdown(result), args.out_json, args.out_md)
    return result


if __name__ == "__main__":
    main()
