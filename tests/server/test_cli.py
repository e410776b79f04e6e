"""The ``cad`` command line reads well: help text of every command, plurals, quiet output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from cad.defaults import DEFAULT_MODEL
from cad.server.cli import app

ROOT = Path(__file__).resolve().parents[2]


def commands() -> dict[str, Any]:
    """Every command of the app (typer's own click commands) by its path (``edit``,
    ``data git``, ...)."""
    found: dict[str, Any] = {}

    def walk(group: Any, prefix: str) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, f"{prefix}{name} ")
            else:
                found[f"{prefix}{name}"] = command

    walk(typer.main.get_command(app), "")
    return found


def help_text(path: str) -> str:
    """``cad PATH --help`` at 110 columns."""
    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "110"})
    assert result.exit_code == 0, result.output
    return result.stdout


COMMANDS = sorted(commands())


@pytest.mark.parametrize("path", COMMANDS)
def test_help_names_every_option_whole_and_arguments_plainly(path: str) -> None:
    text = help_text(path)
    usage = text.splitlines()[0]
    assert usage.startswith(f"Usage: cad {path} [OPTIONS]"), usage
    assert "{" not in usage and "<bool>" not in text and "…" not in text
    for parameter in commands()[path].params:
        if getattr(parameter, "hidden", False):
            continue
        if parameter.param_type_name == "argument":
            assert (parameter.metavar or parameter.name or "").upper() in usage
        for name in [*parameter.opts, *parameter.secondary_opts]:
            if name.startswith("--"):
                assert name in text, f"{path}: {name} is cut or missing"


@pytest.mark.parametrize("path", ["edit", "eval", "serve"])
def test_the_model_option_says_what_runs_without_it(path: str) -> None:
    text = " ".join(help_text(path).split())
    assert "adapter's base model" in text
    if path == "edit":
        assert DEFAULT_MODEL in text


def test_the_default_model_is_named_once_in_the_code() -> None:
    sources = [*ROOT.glob("*/**/*.py"), *(ROOT / "extension" / "src").rglob("*.ts")]
    sources += [ROOT / "extension" / "package.json"]
    naming = sorted(
        str(path.relative_to(ROOT))
        for path in sources
        if "tests" not in path.parts
        and ".venv" not in path.parts
        and "build" not in path.parts
        and "node_modules" not in path.parts
        and DEFAULT_MODEL in path.read_text(errors="replace")
    )
    assert naming == ["cad/defaults.py"]


def test_output_stdout_cannot_take_is_one_line_not_a_traceback() -> None:
    """Help text is printed by the command-line library itself; to a full device it fails
    as the commands' own output does: one line, exit status 1, nothing more at exit."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [sys.executable, "-c", "from cad.server.cli import main; main()", "resolve", "--help"],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line == "error: cannot write the output to stdout (No space left on device)"
