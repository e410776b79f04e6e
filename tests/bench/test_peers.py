"""The peer benchmark on the test suite's tiny model and two HEvalFix edits: cad's rows and
transformers' rows all write the gold bytes, forcing picks the gold token and leaves prompt
lookup's drafts alone, the table renders with a one-line reason for each peer that cannot
run, and (``engine``, where vLLM is installed) the vLLM rows are exact too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.peers import GoldForcing, main, vllm_configs
from tests.tiny_model import make_tiny_model

LOCAL = ["cad:rewrite", "cad:program", "transformers:ar-static", "transformers:pld-10",
         "transformers:pld-96"]  # fmt: skip
VLLM = ["vllm:ar", "vllm:ngram-4", "vllm:ngram-10", "vllm:ngram-96", "vllm:suffix"]


def test_forcing_raises_only_the_gold_token_at_its_position() -> None:
    forcing = GoldForcing(prompt_length=3, gold=[7, 8], stop=2)
    for length, expected in ((3, 7), (4, 8), (5, 2)):
        scores = forcing(torch.zeros(1, length, dtype=torch.long), torch.zeros(1, 10))
        assert int(scores.argmax()) == expected
        assert not torch.isneginf(scores).any()
    untouched = forcing(torch.zeros(1, 6, dtype=torch.long), torch.zeros(1, 10))
    assert torch.equal(untouched, torch.zeros(1, 10))


def test_vllm_configurations_by_draft_length() -> None:
    configs = vllm_configs([0, 4], (1, 3), 32)
    assert configs["vllm:ar"] is None
    assert configs["vllm:ngram-4"] == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }
    assert configs["vllm:suffix"]["method"] == "suffix"
    assert "vllm:suffix" not in vllm_configs([4], (1, 3), 0)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


def test_local_rows_are_exact_and_the_table_names_what_cannot_run(
    model: Path, tmp_path: Path
) -> None:
    out_json, out_md = tmp_path / "peers.json", tmp_path / "peers.md"
    result = main([
        "--model", str(model), "--device", "cpu", "--limit", "2",
        "--engine-python", str(tmp_path / "no-engine" / "python"),
        "--out-json", str(out_json), "--out-md", str(out_md),
    ])  # fmt: skip
    assert result["methods"] == LOCAL + VLLM
    assert result["n"] == 2
    for name in LOCAL:
        assert result["summary"][name]["exact"] == 2, name
        assert all(run["exact"] for run in result["rows"][name].values())
    rows = result["rows"]
    for edit, plain in rows["transformers:ar-static"].items():
        assert plain["forcing_s"] > 0
        for lookup in ("transformers:pld-10", "transformers:pld-96"):
            assert 0 < rows[lookup][edit]["forwards"] < plain["forwards"]
    for name in ("cad:rewrite", "cad:program"):
        host, wall = result["summary"][name]["host_ms"], result["summary"][name]["ms"]
        assert 0 < host["median"] < wall["median"]
    assert "host_ms" not in result["summary"]["transformers:ar-static"]
    assert json.loads(out_json.read_text())["summary"] == result["summary"]
    table = out_md.read_text().splitlines()
    assert table[2].startswith("| method | exact | ms per edit |")
    assert len([line for line in table if line.startswith("| ")]) == 2 + len(LOCAL + VLLM)
    assert all("| 2/2 |" in line for line in table[4 : 4 + len(LOCAL)])
    for line in table[4 + len(LOCAL) : 4 + len(LOCAL + VLLM)]:
        assert "not run: no engine environment" in line
    assert table[-1].startswith("Best peer configuration: transformers")


@pytest.mark.engine
@pytest.mark.slow
def test_vllm_rows_are_exact(tmp_path: Path) -> None:
    """Skipped, with the table's reason, where the engine environment or vLLM is missing."""
    from tests.engine.conftest import make_engine_model

    folder = make_engine_model(tmp_path / "model")
    result = main([
        "--model", str(folder), "--device", "cpu", "--limit", "2", "--methods", "vllm",
        "--vllm-drafts", "4", "--vllm-suffix", "0",
        "--vllm-log", str(tmp_path / "vllm.log"),
    ])  # fmt: skip
    assert result["methods"] == ["vllm:ngram-4"]
    note = result["notes"].get("vllm:ngram-4", "")
    if "no engine environment" in note or "cannot import vLLM" in note:
        pytest.skip(note)
    summary = result["summary"]["vllm:ngram-4"]
    assert summary["exact"] == summary["edits"] == 2, note
    assert summary["forwards"]["max"] >= 1
