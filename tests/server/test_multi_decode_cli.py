"""``cad edit A B --instr TEXT``: the model decodes one program for several files."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cad.resolver import apply_changes, oracle_multi
from cad.selector.multi_decoder import MultiDecoder
from cad.server.cli import app
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
BEFORE = {
    "app.py": "import os\n\n\ndef helper(x):\n    return x + 1\n\n\ndef main():\n    return helper(2)\n",
    "util.py": "X = 1\n",
    "ctx.py": "CTX = 3\n",
}
AFTER = {
    "app.py": "import os\n\nfrom util import helper\n\n\ndef main():\n    return helper(2)\n",
    "util.py": "X = 1\n\n\ndef helper(x):\n    return x + 1\n",
    "ctx.py": "CTX = 3\n",
    "lib/consts.py": "CTX = 3\n",
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch) -> Path:
    for name, text in BEFORE.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "lib").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def follow(program):
    """Make every multi-file decode follow ``program`` (the model still runs every forward)."""
    return functools.partialmethod(MultiDecoder.edit, program=program)


def test_the_decoded_program_is_written_to_every_file(workspace, model_dir, monkeypatch) -> None:
    program = oracle_multi(BEFORE, AFTER)
    monkeypatch.setattr(MultiDecoder, "edit", follow(program))
    args = ["edit", "app.py", "util.py", "--context", "ctx.py", "--instr", "Move helper"]
    result = CliRunner().invoke(
        app, [*args, "--model", str(model_dir), "--device", "cpu", "--json"]
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert {item["file"]: item["text"] for item in body["files"]} == {
        "app.py": AFTER["app.py"],
        "util.py": AFTER["util.py"],
        "lib/consts.py": AFTER["lib/consts.py"],
    }
    assert body["stats"]["decoded_by"] == "this process"
    assert body["stats"]["forwards"] > 0 and body["stats"]["copied_tokens"] > 0
    written = CliRunner().invoke(
        app, [*args, "--model", str(model_dir), "--device", "cpu", "--write"]
    )
    assert written.exit_code == 0, written.output
    on_disk = {
        path.relative_to(workspace).as_posix(): path.read_text() for path in workspace.rglob("*.py")
    }
    assert on_disk == apply_changes(BEFORE, AFTER)


def test_a_program_cut_short_by_the_budget_writes_nothing(workspace, model_dir) -> None:
    result = subprocess.run(
        [
            *CAD,
            "edit",
            "app.py",
            "util.py",
            "--instr",
            "Move helper",
            "--model",
            str(model_dir),
            "--device",
            "cpu",
            "--max-new-tokens",
            "3",
            "--write",
        ],
        capture_output=True,
        cwd=workspace,
        timeout=300,
    )
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith("error: the model spent its budget of 3 tokens"), line
    assert {path.name: path.read_text() for path in workspace.glob("*.py")} == BEFORE


def test_rewrite_mode_writes_every_file_it_was_given(workspace, model_dir, monkeypatch) -> None:
    import cad.selector.multi_rewrite as multi_rewrite

    targets = {"app.py": AFTER["app.py"], "util.py": AFTER["util.py"]}
    monkeypatch.setattr(
        multi_rewrite,
        "rewrite_files",
        functools.partial(multi_rewrite.rewrite_files, targets=targets),
    )
    args = ["edit", "app.py", "util.py", "--context", "ctx.py", "--instr", "Move helper"]
    result = CliRunner().invoke(
        app,
        [*args, "--mode", "rewrite", "--model", str(model_dir), "--device", "cpu", "--write"],
    )
    assert result.exit_code == 0, result.output
    assert (workspace / "app.py").read_text() == AFTER["app.py"]
    assert (workspace / "util.py").read_text() == AFTER["util.py"]
    assert (workspace / "ctx.py").read_text() == BEFORE["ctx.py"]
    assert "wrote 2 files, created 0, deleted 0" in result.output
