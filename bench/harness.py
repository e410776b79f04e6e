"""Shared benchmark plumbing: pick a model (a folder, or an architecture at random init),
summarise timings as median and spread, describe the machine."""

from __future__ import annotations

import json
import platform
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from cad.selector import LoadedModel, load_model
from cad.selector.architectures import ARCHITECTURES, random_init
from cad.selector.loading import use_runtime

QWEN2_TOKENIZER = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tokenizers" / "qwen2"
)


def pick_model(
    model: str,
    device: str,
    dtype: str,
    tokenizer: Path = QWEN2_TOKENIZER,
    *,
    compile: bool = False,
    graphs: bool | None = None,
    triton: bool = False,
    on_phase: Callable[[str], None] | None = None,
) -> LoadedModel:
    """``model`` is an architecture name (random init, real tokenizer) or a model folder/hub
    id, decoding as :func:`cad.selector.loading.use_runtime` says (by default CUDA graphs on
    a GPU, as ``cad edit`` does; ``triton``: with the fused kernels); ``on_phase`` as
    :func:`cad.selector.load_model` calls it, for a folder."""
    if model in ARCHITECTURES:
        loaded = random_init(model, tokenizer, device=device, dtype=dtype)
        return use_runtime(loaded, compile=compile, graphs=graphs, triton=triton)
    options = {"compile": compile, "graphs": graphs, "triton": triton}
    return load_model(model, device=device, dtype=dtype, on_phase=on_phase, **options)


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles, min and max of a sample."""
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "median": statistics.median(ordered),
        "q1": quartiles[0],
        "q3": quartiles[2],
        "min": ordered[0],
        "max": ordered[-1],
    }


def machine() -> str:
    """One line naming the hardware the numbers come from."""
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    cores = len(__import__("os").sched_getaffinity(0))
    return f"{platform.processor() or platform.machine()} CPU, {cores} cores, torch {torch.__version__}"


def synchronize(loaded: LoadedModel) -> None:
    """Wait for queued GPU work so wall-clock timings are honest."""
    if loaded.device.type == "cuda":
        torch.cuda.synchronize(loaded.device)


def write_results(
    result: dict[str, Any], table: str, out_json: Path | None, out_md: Path | None
) -> None:
    """A benchmark's ending: ``result`` as JSON to ``out_json`` and its markdown ``table`` to
    ``out_md`` where given, and the table printed."""
    if out_json:
        out_json.write_text(json.dumps(result, indent=2) + "\n")
    if out_md:
        out_md.write_text(table)
    print(table)
