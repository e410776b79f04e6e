"""The GPU check's first CUDA call: one line naming the device, torch and the features of the
GPU path this torch lacks (the project pins torch 2.13; the check machine may run an older
one), also written as JSON; without a CUDA device, one ``error:`` line and exit status 2.

    python3 -m bench.gpu.check --out-json bench/results/gpu-check.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import sys
from pathlib import Path

import torch

from cad.selector import compile_cache


def missing_features() -> list[str]:
    """The parts of the GPU path this torch cannot run, each with what is done instead."""
    missing = []
    if not hasattr(torch.cuda, "graph"):
        missing.append("CUDA graphs (forwards run eagerly)")
    if not compile_cache.available():
        missing.append("the persistent compile cache (--compile compiles in every process)")
    attention = torch.nn.functional.scaled_dot_product_attention
    try:
        grouped = "enable_gqa" in inspect.signature(attention).parameters
    except (TypeError, ValueError):
        grouped = "enable_gqa" in (attention.__doc__ or "")
    if not grouped:
        missing.append("grouped-query attention in SDPA (the static runtime cannot run)")
    return missing


def describe() -> dict[str, object]:
    """The machine and torch, for the results."""
    index = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return {
        "device": torch.cuda.get_device_name(index),
        "capability": f"{major}.{minor}",
        "memory_gib": round(torch.cuda.get_device_properties(index).total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "missing": missing_features(),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the line (and write the JSON); 2 without a CUDA device."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-json", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            f"error: no CUDA device is visible (torch {torch.__version__}, CUDA build "
            f"{torch.version.cuda or 'none'}); the GPU check needs one",
            file=sys.stderr,
        )
        return 2
    facts = describe()
    if args.out_json:
        args.out_json.write_text(json.dumps(facts, indent=2) + "\n")
    skipped = "; ".join(facts["missing"]) or "nothing"  # type: ignore[arg-type]
    print(
        f"{facts['device']} ({facts['memory_gib']} GiB), torch {facts['torch']}, CUDA "
        f"{facts['cuda']}, Python {facts['python']}; skipped for this torch: {skipped}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
