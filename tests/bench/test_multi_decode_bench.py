"""The multi-file decoding benchmark end to end on a tiny random model: every method forced to
the files after each commit, fewer forwards for one multi-file program than file by file."""

from __future__ import annotations

import json
from pathlib import Path

from bench.multi_decode import METHODS, main
from cad.training import write_jsonl
from cad.training.datasets import FileChange, MultiEditExample
from tests.tiny_model import make_tiny_model


def move(number: int) -> MultiEditExample:
    body = "".join(f"    total += values[{i}] * {number}\n" for i in range(12))
    helper = f"def helper_{number}(values):\n    total = 0\n{body}    return total\n"
    app = f"import os\n\n\n{helper}\n\ndef main():\n    return helper_{number}([1])\n"
    return MultiEditExample(
        f"repo:{number:04d}",
        "Move the helper to util.py.",
        (
            FileChange("app.py", app, app.replace(helper + "\n\n", "")),
            FileChange("util.py", "X = 1\n", f"X = 1\n\n\n{helper}"),
        ),
    )


def test_one_program_for_every_file_takes_fewer_forwards(tmp_path: Path) -> None:
    corpus = tmp_path / "moves.jsonl"
    write_jsonl(corpus, [move(1), move(2)])
    model = make_tiny_model(tmp_path / "model", "qwen2")
    out = tmp_path / "result.json"
    table = tmp_path / "result.md"
    code = main(
        [str(corpus), "--model", str(model), "--out-json", str(out), "--out-md", str(table)]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert [row["id"] for row in result["rows"]] == ["repo:0001", "repo:0002"]
    for row in result["rows"]:
        forwards = {method: row["methods"][method]["forwards"] for method in METHODS}
        assert forwards["multi-file program"] < forwards["per-file program"] < forwards["AR"]
    assert result["summary"]["per-file program"]["forwards"]["over_multi"] > 1
    assert all(method in table.read_text() for method in METHODS)


def test_a_subset_of_methods_runs_only_those(tmp_path: Path) -> None:
    corpus = tmp_path / "moves.jsonl"
    write_jsonl(corpus, [move(3)])
    model = make_tiny_model(tmp_path / "model", "qwen2")
    out = tmp_path / "result.json"
    args = [str(corpus), "--model", str(model), "--methods", "per-file program"]
    assert main([*args, "--out-json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert set(row["methods"]) == {"multi-file program", "per-file program"}
    multi, per_file = (row["methods"][m]["forwards"] for m in row["methods"])
    assert multi < per_file
