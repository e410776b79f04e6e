"""``cad train`` and ``cad eval`` through the console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cad.training import EditExample, load_humanevalpack, write_jsonl
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]


def cad(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CAD, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    make_tiny_model(folder / "model", "qwen2", init_std=0.5)
    edits = [
        EditExample(f"e{i}", f"Set x to {i}.", "x = 0\ny = 1\n", f"x = {i}\ny = 1\n")
        for i in range(1, 7)
    ]
    write_jsonl(folder / "edits.jsonl", edits)
    return folder


@pytest.fixture(scope="module")
def trained(workspace: Path) -> dict:
    """``cad train`` of a 3-step adapter into ``workspace/adapter``; its JSON summary."""
    trained = cad(
        "train",
        "--base", "model",
        "--data", "edits.jsonl",
        "--out", "adapter",
        "--max-steps", "3",
        "--batch-size", "2",
        "--valid-fraction", "0",
        "--test-fraction", "0",
        "--device", "cpu",
        "--json",
        cwd=workspace,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    return json.loads(trained.stdout)


def test_train_then_eval_with_the_adapter(workspace: Path, trained: dict) -> None:
    assert trained["steps"] == 3 and trained["train_examples"] == 6
    assert (workspace / "adapter" / "adapter_model.safetensors").is_file()

    evaluated = cad(
        "eval",
        "--adapter", "adapter",
        "--data", "edits.jsonl",
        "--limit", "2",
        "--max-new-tokens", "24",
        "--device", "cpu",
        "--json",
        "--rows",
        cwd=workspace,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    for key in ("n", "em", "valid", "start_acc", "end_acc", "coverage", "wall_s", "speedup"):
        assert key in report
    assert report["n"] == 2 and len(report["rows"]) == 2
    exact = [row for row in report["rows"] if row["exact"]]
    assert report["timed"] == len(exact)
    if not exact:
        assert report["wall_s"] is report["speedup"] is report["ar_wall_s"] is None
    else:
        assert report["ar_wall_s"] > 0 and report["speedup"] > 0

    table = cad("eval", "--model", "model", "--data", "edits.jsonl", "--limit", "1", "--no-ar",
                "--max-new-tokens", "16", "--device", "cpu", cwd=workspace)  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "exact match" in table.stdout and "speed-up" not in table.stdout
    assert "n/a: no exact edit to time" in table.stdout or "median of 1 exact edit" in table.stdout


def test_an_adapter_runs_on_its_base_model_from_any_folder(
    workspace: Path, trained: dict, tmp_path: Path
) -> None:
    """``cad train`` says ``use: cad edit FILE --adapter OUT`` (see the resume test);
    followed literally, from another folder, the edit runs on the adapter's base model."""
    (tmp_path / "f.py").write_text("x = 0\ny = 1\n")
    (tmp_path / "fix.program").write_text('<gen>x = 3\n</gen>\n<copy lines="2-2"/>\n</program>')
    adapter = str(workspace / trained["adapter"])
    edited = cad("edit", "f.py", "--instr", "Set x to 3.", "--adapter", adapter, "--program",
                 "fix.program", "--device", "cpu", "--stdout", cwd=tmp_path)  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout == "x = 3\ny = 1\n"

    other = make_tiny_model(tmp_path / "other", "qwen2", seed=1)
    refused = cad("edit", "f.py", "--instr", "x", "--adapter", adapter, "--model", str(other),
                  cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"error: adapter {adapter} was trained on {workspace / 'model'}, not {other}; "
        f"leave out --model to run it on {workspace / 'model'}"
    ]


def test_a_second_run_into_the_same_folder_needs_resume(workspace: Path) -> None:
    args = ["train", "--base", "model", "--data", "edits.jsonl", "--out", "twice",
            "--max-steps", "1", "--batch-size", "2", "--device", "cpu"]  # fmt: skip
    first = cad(*args, cwd=workspace)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines()[-1] == "adapter: twice  (use: cad edit FILE --adapter twice)"
    again = cad(*args, cwd=workspace)
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [
        "error: twice already holds checkpoints; pass --resume to continue that run "
        "or choose another --out"
    ]
    resumed = cad(*args[:7], "--max-steps", "2", "--batch-size", "2", "--device", "cpu",
                  "--resume", "--json", cwd=workspace)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["steps"] == 2


def test_perturbation_needs_no_model(tmp_path: Path) -> None:
    result = cad("eval", "--data", "heval-python", "--perturb", "1", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["n"] == len(load_humanevalpack("python")) and report["eps"] == 1
    assert 0 < report["em"] < 0.5 and report["valid"] == 1

    several = cad("eval", "--data", "heval-js", "--perturb", "0", "--perturb", "2", "--json",
                  cwd=tmp_path)  # fmt: skip
    results = json.loads(several.stdout)["results"]
    assert [r["eps"] for r in results] == [0, 2] and results[0]["em"] == 1

    table = cad("eval", "--data", "heval-js", "--perturb", "1", cwd=tmp_path)
    assert "trimmed EM" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "--data", "missing.jsonl", "--perturb", "1"], "missing.jsonl: "),
        (["eval", "--data", "heval-js"], "pass --model or --adapter"),
        (["eval", "--data", "heval-js", "--perturb", "-1"], "--perturb takes"),
        (["eval", "--data", "heval-js", "--split", "dev", "--perturb", "1"], "--split must be"),
        (["eval", "--data", "heval-js", "--model", "./nowhere"], "does not exist"),
        (["train", "--base", "./nowhere", "--data", "heval-js", "--out", "o"], "does not exist"),
        (["train", "--base", "m", "--data", "heval-js", "--out", "o", "--lr", "-1"], "--lr"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, args: list[str], message: str) -> None:
    result = cad(*args, cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "o").exists()
