"""The rewrite-mode benchmark end to end on a tiny random model: every method byte-exact,
the table, the JSON and the plot written."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.rewrite import main, select
from cad.selector import load_draft_config
from cad.training.datasets import load_humanevalpack
from tests.tiny_model import make_tiny_model


def test_select_takes_the_held_out_split() -> None:
    examples = load_humanevalpack("python")
    test = select(examples, "test", 0)
    assert 0 < len(test) < len(examples) / 5
    assert select(examples, "test", 3) == test[:3]
    assert select(examples, "all", 0) == examples


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


def _run(model: Path, *extra: str) -> dict:
    args = ["--model", str(model), "--device", "cpu", "--dtype", "float32", "--limit", "3"]
    return main([*args, *extra])


@pytest.mark.slow
def test_benchmark_writes_table_and_json(model: Path, tmp_path: Path) -> None:
    small = tmp_path / "small.json"
    small.write_text(replace(load_draft_config(), budget=4, min_reach=0.0).to_json())
    out = {name: tmp_path / f"r.{name}" for name in ("json", "md")}
    result = _run(
        model, "--configs", f"default,{small}", "--out-json", str(out["json"]),
        "--out-md", str(out["md"]),
    )  # fmt: skip
    assert result["methods"] == ["ar", "pld", "rewrite:default", "rewrite:small", "program"]
    rows = json.loads(out["json"].read_text())["rows"]
    assert len(rows) == 3
    for row in rows:
        assert row["ar"]["forwards"] == row["tokens"]
        assert row["rewrite:default"]["forwards"] < row["pld"]["forwards"]
        assert row["rewrite:default"]["drafted"] > row["rewrite:default"]["forwards"]
        assert row["rewrite:small"]["drafted"] <= 5 * row["rewrite:small"]["forwards"]
    table = out["md"].read_text().splitlines()
    assert len(table) == 4 + 5
    assert table[6].startswith("| rewrite + draft graph (default config: budget ")
    assert table[7].startswith("| rewrite + draft graph (small config: budget 4, min reach 0)")


@pytest.mark.slow
def test_benchmark_plots_forwards_and_wall_clock(model: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _run(model, "--plot", str(tmp_path / "r.png"))
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
