"""The GPU check's summary: the targets of the GPU path against what the check measured
(kernel benchmark, start-up, rewrite benchmark), the steps that ran, failed or were skipped,
as ``gpu-summary.md`` and ``gpu-summary.json`` in the results folder.

    python3 -m bench.gpu.report bench/results
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

Target = tuple[str, float | None, float, str]
"""What is measured, the value (``None``: not measured), the limit, and the unit."""


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _row(kernel: dict[str, Any], n: int) -> dict[str, Any] | None:
    return next((row for row in kernel["rows"] if row["n"] == n), None)


def step_ms(kernel: dict[str, Any], runtime: str) -> float | None:
    """One decode step of ``runtime`` in ms: the N-step median over N of the widest row."""
    if runtime not in kernel.get("runtimes", []):
        return None
    row = max(kernel["rows"], key=lambda r: r["n"])
    return row[runtime]["decode_s"]["median"] / row["n"] * 1e3


def forward_ms(kernel: dict[str, Any], runtime: str, n: int) -> float | None:
    """One forward of ``n`` tokens of ``runtime`` in ms."""
    row = _row(kernel, n)
    if row is None or runtime not in row:
        return None
    return row[runtime]["copy_s"]["median"] * 1e3


FORWARD_LIMITS = ((8, 1.3), (32, 1.3), (128, 2.0))
"""Forwards of ``n`` tokens and their limits, as multiples of the one-token step."""


def step_targets(
    kernel: dict[str, Any], runtime: str, step_name: str, forward_name: str
) -> list[Target]:
    """The one-token step of ``runtime`` (named ``step_name``) and its forwards of
    :data:`FORWARD_LIMITS` tokens over it (named ``forward_name`` with ``{n}``)."""
    step = step_ms(kernel, runtime)
    targets: list[Target] = [(step_name, step, 2.0, "ms")]
    for n, factor in FORWARD_LIMITS:
        forward = forward_ms(kernel, runtime, n)
        ratio = None if forward is None or not step else forward / step
        targets.append((forward_name.format(n=n), ratio, factor, "×"))
    return targets


def kernel_targets(kernel: dict[str, Any], prefix: str = "1.5B") -> list[Target]:
    """The per-step targets of the default runtime (graphs), and of graphs with the fused
    kernels where they were measured."""
    targets = step_targets(
        kernel,
        "graphs",
        f"{prefix} one-token step (graphs)",
        f"{prefix} forward of {{n}} tokens ÷ step",
    )
    step = targets[0][1]
    choices = kernel.get("choice_s", {})
    chosen = "graphs" if "graphs" in choices else "eager"
    choice = choices.get(chosen)
    targets.append(
        (
            f"greedy token choice ({chosen})",
            None if choice is None else choice["median"] * 1e3,
            0.05,
            "ms",
        )
    )
    compiled = step_ms(kernel, "compiled")
    ratio = None if compiled is None or not step else compiled / step
    targets.append((f"{prefix} compiled step ÷ graphs step", ratio, 1.0, "×"))
    if "kernels" in kernel.get("runtimes", []):
        targets += step_targets(
            kernel,
            "kernels",
            f"{prefix} one-token step (graphs, fused kernels)",
            f"{prefix} forward of {{n}} tokens ÷ step (fused kernels)",
        )
    decodes = kernel.get("decodes") or []
    after = [
        row["rewrite"]["graphs"]["median"] * 1e3 for row in decodes if "graphs" in row["rewrite"]
    ]
    targets.append(
        (
            "rewrite-mode edit after prefill (HEvalFix edits, median)",
            sorted(after)[len(after) // 2] if after else None,
            150.0,
            "ms",
        )
    )
    return targets


def startup_targets(startup: dict[str, Any]) -> list[Target]:
    """Process start to the first edit's first forward, cold and warm, per runtime."""
    limits = {("graphs", "cold"): 20.0, ("graphs", "warm"): 8.0}
    limits |= {("compile", "cold"): 45.0, ("compile", "warm"): 15.0}
    targets: list[Target] = []
    for (mode, state), limit in limits.items():
        run = startup.get(mode, {}).get(state, {})
        value = run.get("marks", {}).get("first_forward")
        targets.append((f"start to first forward, {mode}, {state}", value, limit, "s"))
    return targets


def markdown(targets: list[Target], steps: list[list[str]], check: dict[str, Any] | None) -> str:
    """The summary page."""
    machine = "no GPU" if check is None else f"{check['device']}, torch {check['torch']}"
    lines = [f"GPU check: {machine}", ""]
    if check is not None and check.get("missing"):
        lines += [f"Skipped for this torch: {'; '.join(check['missing'])}.", ""]
    lines += ["| target | measured | limit | met |", "| --- | ---: | ---: | --- |"]
    for name, value, limit, unit in targets:
        shown = "not measured" if value is None else f"{value:.3g} {unit}"
        met = "" if value is None else ("yes" if value <= limit else "no")
        lines.append(f"| {name} | {shown} | ≤ {limit:g} {unit} | {met} |")
    lines += ["", "| step | status | seconds |", "| --- | --- | ---: |"]
    lines += [f"| {name} | {status} | {seconds} |" for name, status, seconds in steps]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Write the summary of the results in a folder; returns it."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    folder: Path = args.folder
    targets: list[Target] = []
    kernel = _load(folder, "gpu-kernel-1.5b.json")
    if kernel is not None:
        targets += kernel_targets(kernel)
    large = _load(folder, "gpu-kernel-7b.json")
    if large is not None:
        targets.append(("7B one-token step (graphs)", step_ms(large, "graphs"), 6.0, "ms"))
        if "kernels" in large.get("runtimes", []):
            fused = step_ms(large, "kernels")
            targets.append(("7B one-token step (graphs, fused kernels)", fused, 6.0, "ms"))
    startup = _load(folder, "gpu-startup.json")
    if startup is not None:
        targets += startup_targets(startup)
    steps_file = folder / "gpu-steps.tsv"
    steps = (
        [line.split("\t") for line in steps_file.read_text().splitlines()]
        if steps_file.is_file()
        else []
    )
    check = _load(folder, "gpu-check.json")
    summary = {
        "check": check,
        "targets": [
            {"name": name, "value": value, "limit": limit, "unit": unit}
            for name, value, limit, unit in targets
        ],
        "steps": [{"name": s[0], "status": s[1], "seconds": s[2]} for s in steps if len(s) == 3],
    }
    (folder / "gpu-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    page = markdown(targets, [s for s in steps if len(s) == 3], check)
    (folder / "gpu-summary.md").write_text(page)
    print(page)
    return summary


if __name__ == "__main__":
    main()
