"""``cad edit`` through the console script with a tiny random model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from resolver import format, oracle
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from server.cli import main; main()"]
BEFORE = (
    "def mean(values):\r\n    return sum(values) / len(values) + 1\r\n\r\nprint(mean([1, 2]))\r\n"
)
AFTER = "def mean(values):\r\n    return sum(values) / len(values)\r\n\r\nprint(mean([1, 2]))\r\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture
def workspace(tmp_path) -> Path:
    (tmp_path / "mean.py").write_bytes(BEFORE.encode())
    (tmp_path / "after.py").write_bytes(AFTER.encode())
    (tmp_path / "fix.program").write_text(format(oracle(BEFORE, AFTER)))
    return tmp_path


def cad(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CAD, *args], capture_output=True, cwd=cwd, timeout=300)


def test_forced_program_write_is_exact_and_reports_stats(workspace, model_dir) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "Drop the + 1",
        "--model",
        str(model_dir),
        "--program",
        "fix.program",
        "--write",
        "--stats-json",
        "stats.json",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert (workspace / "mean.py").read_bytes() == AFTER.encode()
    stats = json.loads((workspace / "stats.json").read_text())
    for key in ("forwards", "generated_tokens", "copied_tokens", "forced_tokens", "wall_s"):
        assert key in stats
    assert stats["copied_tokens"] > 0
    assert list(workspace.glob(".mean.py.*")) == []


def test_diff_is_the_default_output(workspace, model_dir) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--program",
        "fix.program",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert b"-    return sum(values) / len(values) + 1" in result.stdout
    assert b"+    return sum(values) / len(values)" in result.stdout
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


@pytest.mark.parametrize("baseline", ["ar", "pld"])
def test_baselines_regenerate_the_target_exactly(workspace, model_dir, baseline: str) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--baseline",
        baseline,
        "--target",
        "after.py",
        "--stdout",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == AFTER.encode()


def test_model_decoding_never_writes_a_truncated_edit(workspace, model_dir) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--max-new-tokens",
        "1",
        "--write",
        cwd=workspace,
    )
    assert result.returncode == 1
    assert b"nothing was written" in result.stderr
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["edit", "missing.py", "--instr", "x"], "missing.py: no such file"),
        (["edit", "blob.bin", "--instr", "x"], "binary file"),
        (["edit", "latin.py", "--instr", "x"], "not valid UTF-8"),
        (["edit", "mean.py", "--instr", "  "], "the instruction is empty"),
        (["edit", "mean.py", "--instr", "x", "--program", "bad.program"], "expected"),
        (["edit", "mean.py", "--instr", "x", "--program", "range.program"], "out of range"),
        (["edit", "mean.py", "--instr", "x", "--baseline", "ar"], "--target"),
        (["edit", "mean.py", "--instr", "x", "--write", "--stdout"], "one of --write and --stdout"),
        (["edit", "mean.py", "--instr", "x", "--model", "./no-model-here"], "does not exist"),
        (
            ["edit", "mean.py", "--instr", "x", "--device", "tpu", "--model", "MODEL"],
            "unknown device",
        ),
    ],
)
def test_bad_input_is_one_line_nonzero_and_writes_nothing(
    workspace, model_dir, args: list[str], message: str
) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01")
    (workspace / "latin.py").write_bytes("café".encode("latin-1"))
    (workspace / "bad.program").write_text("<copy lines=1/>")
    (workspace / "range.program").write_text('<copy lines="1-99"/>\n</program>')
    args = [str(model_dir) if a == "MODEL" else a for a in args]
    result = cad(*args, cwd=workspace)
    assert result.returncode != 0
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert message in stderr
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


def test_grammar_constrains_the_rewritten_file(workspace, model_dir) -> None:
    (workspace / "answer.ebnf").write_text('root ::= "yes" | "no" | "maybe\\n"\n')
    (workspace / "schema.json").write_text(
        json.dumps(
            {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        )
    )
    for seed in ("1", "2"):
        result = cad(
            "edit",
            "mean.py",
            "--instr",
            "x",
            "--model",
            str(model_dir),
            "--grammar",
            "answer.ebnf",
            "--temperature",
            "1",
            "--seed",
            seed,
            "--stdout",
            cwd=workspace,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout in (b"yes", b"no", b"maybe\n")
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--grammar",
        "schema.json",
        "--grammar-format",
        "json-schema",
        "--temperature",
        "1",
        "--stdout",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert isinstance(json.loads(result.stdout)["ok"], bool)


def test_bad_grammar_is_one_line(workspace, model_dir) -> None:
    (workspace / "bad.ebnf").write_text('root ::= ( "a"')
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--grammar",
        "bad.ebnf",
        cwd=workspace,
    )
    assert result.returncode == 1
    assert result.stderr.decode().startswith("error: grammar: expected ')'")
