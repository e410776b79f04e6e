"""``cad`` as a shell tool: piped diffs that apply, the instruction from stdin or a file,
a JSON result, defaults from the environment and a configuration file, completion,
``python -m cad``, hints and help that fit."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cad.resolver import format, oracle
from cad.selector.first_use import first_use_notice
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
LONG = "x" * 150
BEFORE = f"def mean(values):\n    return sum(values) / len(values) + 1  # {LONG}\n"
AFTER = f"def mean(values):\n    return sum(values) / len(values)  # {LONG}\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture
def repository(tmp_path) -> Path:
    """A git repository holding ``src/mean.py`` and the program that fixes it."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "mean.py").write_text(BEFORE)
    (tmp_path / "fix.program").write_text(format(oracle(BEFORE, AFTER)))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def cad(*args: str, cwd: Path, stdin: bytes | None = None, env: dict | None = None):
    return subprocess.run(
        [*CAD, *args],
        capture_output=True,
        cwd=cwd,
        input=stdin,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def edit_args(model_dir: Path, *extra: str) -> list[str]:
    return ["edit", "src/mean.py", "--instr", "Drop the + 1", "--model", str(model_dir),
            "--program", "fix.program", *extra]  # fmt: skip


def test_a_piped_diff_is_never_wrapped_and_applies_with_git_and_patch(repository, model_dir):
    result = cad(*edit_args(model_dir), cwd=repository, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    diff = result.stdout.decode()
    assert diff.startswith("--- a/src/mean.py\n+++ b/src/mean.py\n"), diff
    assert f"+    return sum(values) / len(values)  # {LONG}\n" in diff
    (repository / "fix.diff").write_text(diff)
    checked = subprocess.run(
        ["git", "apply", "--check", "fix.diff"], cwd=repository, capture_output=True
    )
    assert checked.returncode == 0, checked.stderr
    if shutil.which("patch") is not None:
        patched = subprocess.run(
            ["patch", "-p1", "-i", "fix.diff"], cwd=repository, capture_output=True
        )
        assert patched.returncode == 0, patched.stdout + patched.stderr
        assert (repository / "src" / "mean.py").read_text() == AFTER


def test_a_piped_diff_keeps_carriage_returns_and_control_characters(repository, model_dir):
    """A CRLF file's diff keeps every CR (and an escape byte in a string), so it applies."""
    before = BEFORE.replace("\n", "\r\n") + 'BELL = "\x1b[0m"\r\n'
    after = AFTER.replace("\n", "\r\n") + 'BELL = "\x1b[0m"\r\n'
    (repository / "src" / "mean.py").write_bytes(before.encode())
    (repository / "fix.program").write_text(format(oracle(before, after)))
    result = cad(*edit_args(model_dir), cwd=repository)
    assert result.returncode == 0, result.stderr
    assert b"+    return sum(values) / len(values)  # " + LONG.encode() + b"\r\n" in result.stdout
    (repository / "fix.diff").write_bytes(result.stdout)
    applied = subprocess.run(["git", "apply", "fix.diff"], cwd=repository, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    assert (repository / "src" / "mean.py").read_bytes() == after.encode()


def test_the_instruction_comes_from_stdin_or_a_file(repository, model_dir):
    (repository / "instruction.txt").write_text("Drop the + 1\n")
    from_stdin = cad(
        "edit", "src/mean.py", "--instr", "-", "--model", str(model_dir), "--program",
        "fix.program", "--stdout", cwd=repository, stdin=b"Drop the + 1",
    )  # fmt: skip
    from_file = cad(
        "edit", "src/mean.py", "--instr-file", "instruction.txt", "--model", str(model_dir),
        "--program", "fix.program", "--stdout", cwd=repository,
    )  # fmt: skip
    for result in (from_stdin, from_file):
        assert result.returncode == 0, result.stderr
        assert result.stdout.decode() == AFTER
    both = cad(
        "edit", "src/mean.py", "--instr", "x", "--instr-file", "instruction.txt",
        cwd=repository,
    )  # fmt: skip
    assert both.stderr.decode() == "error: choose one of --instr and --instr-file\n"
    bad = cad("edit", "src/mean.py", "--instr", "-", cwd=repository, stdin=b"\xff\xfe")
    assert bad.returncode == 1
    assert bad.stderr.decode().startswith("error: the instruction on stdin is not valid UTF-8")


def test_json_gives_text_program_stats_and_diff(repository, model_dir):
    result = cad(*edit_args(model_dir, "--json"), cwd=repository)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["text"] == AFTER and answer["changed"] is True
    assert answer["program"] == format(oracle(BEFORE, AFTER))
    assert answer["diff"].startswith("--- a/src/mean.py")
    assert answer["stats"]["mode"] == "program" and answer["stats"]["decoded_by"] == "this process"


def test_the_model_comes_from_the_command_line_then_the_environment_then_the_file(
    repository, tmp_path
):
    config = tmp_path / "config.toml"
    config.write_text('model = "/no/such/model-from-file"\n')
    base = ["edit", "src/mean.py", "--instr", "x", "--no-server"]

    def named(*args: str, **env: str) -> str:
        result = cad(*base, *args, cwd=repository, env={"CAD_CONFIG": str(config), **env})
        assert result.returncode == 1
        return result.stderr.decode()

    assert "model-from-file" in named()
    assert "model-from-env" in named(CAD_MODEL="/no/such/model-from-env")
    assert "model-from-cli" in named("--model", "/no/such/model-from-cli", CAD_MODEL="/x")
    config.write_text("modle = 'typo'\n")
    assert (
        named()
        == f"error: {config}: unknown setting 'modle'; it may set model, device, dtype, server\n"
    )


def test_shell_completion_and_python_dash_m(tmp_path):
    # The completion script is for the shell that runs the command: run it from bash (kept
    # as its parent, not replaced by it), so that the result does not depend on what
    # started the tests.
    shown = subprocess.run(
        ["bash", "-c", shlex.join([*CAD, "--show-completion"]) + "; exit $?"],
        capture_output=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert shown.returncode == 0 and "_CAD_COMPLETE" in shown.stdout.decode()
    module = subprocess.run(
        [sys.executable, "-m", "cad", "oracle", "--help"], capture_output=True, cwd=tmp_path
    )
    assert module.returncode == 0 and b"Usage:" in module.stdout
    direct = subprocess.run(
        [sys.executable, "-m", "cad.server.cli", "--help"], capture_output=True, cwd=tmp_path
    )
    assert direct.returncode == 0 and b"Commands:" in direct.stdout


def test_a_local_folder_that_is_not_a_model_gets_a_hint_that_fits(tmp_path):
    (tmp_path / "mean.py").write_text(BEFORE)
    (tmp_path / "empty").mkdir()
    result = cad("edit", "mean.py", "--instr", "x", "--model", "empty", "--no-server", cwd=tmp_path)
    assert result.returncode == 1
    assert "not a model folder: no config.json" in result.stderr.decode()
    assert "hf download" not in result.stderr.decode()


def test_the_engine_command_explains_itself_without_vllm(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from cad.engine.launcher import main; main()", "--help"],
        capture_output=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0
    assert result.stdout.decode().startswith("Usage: cad-engine --model MODEL")
    assert "--max-edits N" in result.stdout.decode()


def test_help_groups_edit_options_in_panels_and_names_values_plainly(tmp_path):
    text = cad("edit", "--help", cwd=tmp_path).stdout.decode()
    headings = [line[:-1] for line in text.splitlines() if line.endswith(":") and line[0] != " "]
    assert headings == [
        "Arguments", "Input", "Model", "Mode", "Decoding", "Output", "Performance", "Options"
    ]  # fmt: skip
    for name in ("synth", "git"):
        text += cad("data", name, "--help", cwd=tmp_path).stdout.decode()
    text += cad("eval", "--help", cwd=tmp_path).stdout.decode()
    assert re.search(r"<[a-zA-Z]", text) is None and "list[" not in text
    assert "--out PATH        The JSONL file to write (required, except" in text
    overview = cad("--help", cwd=tmp_path).stdout.decode()
    assert "..." not in overview.split("Commands:")[1]


def test_the_first_use_of_compiled_forwards_is_announced():
    class Compiled:
        compiled, graphs = True, False

    class Graphs:
        compiled, graphs = False, True

    class Eager:
        compiled, graphs = False, False

    notice = first_use_notice(Compiled())
    assert notice is not None and "compiling" in notice and "1, 8, 16" in notice
    assert "kept in" in notice
    assert "CUDA graphs" in (first_use_notice(Graphs()) or "")
    assert first_use_notice(Eager()) is None
