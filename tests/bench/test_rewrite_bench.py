"""The rewrite- and program-mode benchmark end to end on a tiny random model: every method
byte-exact, the table, the JSON and the plot written, and the model-free replay counting
exactly the forwards the model took."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.rewrite import PHASES, main, perfect_draft_forwards, select
from cad.selector import load_draft_config
from cad.training.calibrate import replay
from cad.training.datasets import load_humanevalpack
from tests.conftest import TOKENIZERS
from tests.tiny_model import make_tiny_model

METHODS = [
    "ar",
    "pld",
    "pld-budget",
    "rewrite:default",
    "rewrite:small",
    "program-sequential",
    "program",
    "program-subline",
]


def test_select_takes_the_held_out_split() -> None:
    examples = load_humanevalpack("python")
    test = select(examples, "test", 0)
    assert 0 < len(test) < len(examples) / 5
    assert select(examples, "test", 3) == test[:3]
    assert select(examples, "all", 0) == examples


@pytest.mark.parametrize("budget", [4, 16, 96])
def test_perfect_drafts_reach_the_bound_and_nothing_beats_it(budget: int) -> None:
    """Drafting from a document that IS the target, every forward accepts a full budget: the
    replayed count equals the bound; drafting from the real document never goes below it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "qwen2")
    config = replace(load_draft_config(), budget=budget, min_reach=0.0)
    for example in load_humanevalpack("python")[:6]:
        before = tokenizer.encode(example.before, add_special_tokens=False)
        after = tokenizer.encode(example.after, add_special_tokens=False)
        bound = perfect_draft_forwards(len(after), budget)
        stop = tokenizer.eos_token_id
        assert len(replay(after, after, config, stop=stop, prompt_tokens=10)) - 1 == bound
        assert len(replay(before, after, config, stop=stop, prompt_tokens=10)) - 1 >= bound


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("configs") / "small.json"
    path.write_text(replace(load_draft_config(), budget=4, min_reach=0.0).to_json())
    return path


@pytest.mark.slow
def test_benchmark_writes_table_and_json_and_replays_the_same_forwards(
    model: Path, small: Path, tmp_path: Path
) -> None:
    out = {name: tmp_path / f"r.{name}" for name in ("json", "md", "png")}
    common = ["--limit", "2", "--configs", f"default,{small}"]
    result = main([
        "--model", str(model), "--device", "cpu", "--dtype", "float32", *common,
        "--out-json", str(out["json"]), "--out-md", str(out["md"]), "--plot", str(out["png"]),
    ])  # fmt: skip
    assert result["methods"] == METHODS
    rows = json.loads(out["json"].read_text())["rows"]
    assert len(rows) == 2
    for row in rows:
        assert row["ar"]["forwards"] == row["tokens"]
        assert row["rewrite:default"]["forwards"] < row["pld"]["forwards"]
        assert row["rewrite:small"]["drafted"] <= 4 * (row["rewrite:small"]["forwards"] + 1)
        assert row["program"]["forwards"] < row["program-sequential"]["forwards"]
        assert row["program-subline"]["forwards"] <= row["program"]["forwards"]
        assert all(row[name]["wall_s"] > 0 for name in METHODS)
        assert all(len(row[name]["host_s"]) == row[name]["forwards"] + 1 for name in METHODS)
    for name in METHODS:  # every phase of every forward, each part of the edit's time
        phases = row[name]["phases_s"]
        assert set(phases) == set(PHASES) and all(value >= 0 for value in phases.values())
        assert sum(phases.values()) <= row[name]["wall_s"]
    assert rows[0]["program"]["phases_s"]["draft"] > 0
    assert rows[0]["ar"]["phases_s"]["choose"] > 0
    split = result["summary"]["program"]["phase_ms"]
    assert split["draft"] > 0 and split["decode"] > 0
    table = out["md"].read_text().splitlines()
    assert len(table) == 4 + len(METHODS) + 5 + len(METHODS)
    assert "host ms/fwd p50 / p90" in table[2]
    assert table[4 + len(METHODS) + 3].startswith("| method | drafting | layout | masks |")
    assert table[8].startswith("| rewrite + draft graph (small config: budget 4, min reach 0)")
    assert "÷ rewrite" in table[2]
    assert out["png"].read_bytes()[:4] == b"\x89PNG"
    replayed = main(["--replay", "--tokenizer", str(TOKENIZERS / "qwen2"), *common])
    assert replayed["methods"] == [*METHODS[:3], "perfect-draft", *METHODS[3:]]
    for measured, counted in zip(rows, replayed["rows"], strict=True):
        assert counted["perfect-draft"]["forwards"] <= counted["rewrite:default"]["forwards"]
        assert {m: counted[m]["forwards"] for m in METHODS} == {
            m: measured[m]["forwards"] for m in METHODS
        }
    for name in METHODS[1:]:
        host = replayed["summary"][name]["host_ms"]
        assert 0 < host["p50"] <= host["p90"]
