"""The kernel benchmark end to end on the tiny architecture (eager, and eager beside the
static runtime: compiling and graphs are what the runtime tests cover), its table for a
compiled run, and which runtimes it compares by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.kernel import default_runtimes, main, make_runtime, markdown


def _spread(median: float) -> dict[str, float]:
    return {"median": median, "q1": median, "q3": median, "min": median, "max": median}


def test_benchmark_writes_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    result = main(
        ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--prefix", "16",
         "--spans", "2,5", "--trials", "2", "--out-json", str(out)]
    )  # fmt: skip
    assert json.loads(out.read_text()) == result
    assert [row["n"] for row in result["rows"]] == [2, 5]
    for row in result["rows"]:
        assert row["eager"]["copy_s"]["median"] > 0
        assert row["eager"]["decode_s"]["median"] > 0
    table = markdown(result).splitlines()
    assert table[2] == "| N | one forward (ms) | N decode steps (ms) | speedup |"
    assert len(table) == 4 + 2


def test_compiled_table_has_a_column_per_runtime() -> None:
    names = ["eager", "static", "compiled"]
    row = {"n": 8, "compiled_over_eager_step": _spread(2.0)}
    for name, seconds in zip(names, (0.008, 0.006, 0.004), strict=True):
        row[name] = {"copy_s": _spread(seconds), "decode_s": _spread(8 * seconds)}
    result = {
        "model": "tiny (random init)",
        "dtype": "float32",
        "device": "cpu",
        "prefix": 16,
        "trials": 3,
        "runtimes": names,
        "first_pass_s": {"eager": 0.1, "static": 0.2, "compiled": 30.0},
        "rows": [row],
        "choice_s": {"eager": _spread(0.0007), "compiled": _spread(0.0001)},
        "decodes": [
            {
                "id": "heval-1",
                "rewrite": {"eager": _spread(0.2), "compiled": _spread(0.1), "forwards": 4},
                "program": {"eager": _spread(0.3), "compiled": _spread(0.15), "forwards": 20},
            }
        ],
    }
    table = markdown(result)
    assert "| 8 | 8.00 / 6.00 / 4.00 | 8.000 / 6.000 / 4.000 | 2.00× (2.00–2.00) |" in table
    assert "compiled 30.0 s" in table
    assert "| heval-1 | 200.00 (200.00–200.00) / 100.00 (100.00–100.00) |" in table


def test_runtimes_compared_by_default_follow_the_device() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert default_runtimes(cpu, compile=False) == ("eager",)
    assert default_runtimes(cpu, compile=True) == ("eager", "static", "compiled")
    assert default_runtimes(cuda, compile=False) == ("eager", "graphs")
    assert default_runtimes(cuda, compile=True) == ("eager", "static", "graphs", "compiled")


def test_static_runtime_beside_eager_with_decodes(tmp_path: Path, tiny_qwen) -> None:
    result = main(
        ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--prefix", "16",
         "--spans", "3", "--trials", "1", "--runtimes", "eager,static", "--edits", "1",
         "--out-md", str(tmp_path / "k.md")]
    )  # fmt: skip
    assert result["runtimes"] == ["eager", "static"]
    row = result["rows"][0]
    assert row["static_over_eager_step"]["median"] > 0
    assert set(result["choice_s"]) == {"eager"}
    decode = result["decodes"][0]
    assert set(decode["rewrite"]) == {"eager", "host", "forwards"}
    assert decode["program"]["eager"]["median"] > 0
    table = (tmp_path / "k.md").read_text()
    assert "| static step speed-up over eager |" in table
    assert make_runtime(tiny_qwen, "eager") is None
    assert make_runtime(tiny_qwen, "static").graphs is None
    with pytest.raises(ValueError, match="unknown runtime"):
        make_runtime(tiny_qwen, "fast")
