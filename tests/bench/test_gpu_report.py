"""The GPU check's summary from a results folder, on a CPU (the folder's files as the check's
steps write them)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpu import report


def _kernel(runtimes: dict[str, float], n: int = 8) -> dict:
    """A kernel benchmark result: per runtime, ``n`` steps and one forward of ``n`` tokens
    in the ms given (the forward 1.2 times a step)."""
    row = {"n": n}
    for name, step in runtimes.items():
        row[name] = {
            "copy_s": {"median": 1.2 * step / 1e3},
            "decode_s": {"median": n * step / 1e3},
        }
    return {"runtimes": list(runtimes), "rows": [row]}


def test_the_summary_lists_every_target_with_the_fused_kernels_beside_graphs(
    tmp_path: Path,
) -> None:
    small = _kernel({"eager": 20.0, "graphs": 2.7, "kernels": 1.9, "compiled": 2.4})
    small["choice_s"] = {"graphs": {"median": 0.00009}}
    (tmp_path / "gpu-kernel-1.5b.json").write_text(json.dumps(small))
    (tmp_path / "gpu-kernel-7b.json").write_text(
        json.dumps(_kernel({"graphs": 5.6, "kernels": 4.9}))
    )
    (tmp_path / "gpu-steps.tsv").write_text("gpu-tests\tok\t54\nkernel-1.5b\tcut at 60s\t60\n")
    summary = report.main([str(tmp_path)])
    values = {target["name"]: target["value"] for target in summary["targets"]}
    assert abs(values["1.5B one-token step (graphs)"] - 2.7) < 1e-9
    assert abs(values["1.5B one-token step (graphs, fused kernels)"] - 1.9) < 1e-9
    assert abs(values["1.5B forward of 8 tokens ÷ step (fused kernels)"] - 1.2) < 1e-9
    assert values["1.5B forward of 32 tokens ÷ step (fused kernels)"] is None
    assert abs(values["1.5B compiled step ÷ graphs step"] - 2.4 / 2.7) < 1e-9
    assert abs(values["7B one-token step (graphs, fused kernels)"] - 4.9) < 1e-9
    assert not any(name.startswith("start to first forward") for name in values)
    page = (tmp_path / "gpu-summary.md").read_text()
    assert "| 1.5B one-token step (graphs) | 2.7 ms | ≤ 2 ms | no |" in page
    assert "| 1.5B one-token step (graphs, fused kernels) | 1.9 ms | ≤ 2 ms | yes |" in page
    assert "| greedy token choice (graphs) | 0.09 ms | ≤ 0.05 ms | no |" in page
    assert "| kernel-1.5b | cut at 60s | 60 |" in page
    assert json.loads((tmp_path / "gpu-summary.json").read_text())["steps"][0]["status"] == "ok"
