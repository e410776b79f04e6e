"""``cad serve`` driven by a real third-party client: headless Neovim (0.7+).

Neovim starts the server over stdio, runs ``cad.applyEdit`` with a program, applies the
server's ``workspace/applyEdit`` with its own LSP machinery (UTF-16 columns, versions),
writes the file and quits; the file on disk must be exactly the edited text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cad.resolver import format, oracle

NVIM = shutil.which("nvim")
SCRIPT = Path(__file__).parent / "nvim" / "apply_edit.lua"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    NVIM is None, reason="nvim is not installed (apt-get install --no-install-recommends neovim)"
)

BEFORE = """\
import os


def total(values):
    label = "😀 sum"
    return sum(values) + 1


print(total([1, 2]))
"""
AFTER = """\
import os


def total(values):
    label = "😀 total"
    return sum(values)


print(total([1, 2]))
"""


def run_neovim(path: Path, argument: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """Edit ``path`` in headless Neovim with the Lua driver; at most a minute."""
    spec = {
        "cmd": [sys.executable, "-c", "from cad.server.cli import main; main()", "serve"],
        "settings": {"device": "cpu"},
        "argument": argument,
        "timeout_ms": 45000,
    }
    env = {
        **os.environ,
        "CAD_NVIM_SPEC": json.dumps(spec),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    command = [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n", str(path)]
    return subprocess.run(
        [*command, "-c", f"luafile {SCRIPT}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["unix", "dos"])
def test_neovim_applies_a_snapped_program_edit_and_writes_the_file(
    newline: str, tmp_path: Path
) -> None:
    before, after = BEFORE.replace("\n", newline), AFTER.replace("\n", newline)
    path = tmp_path / "total.py"
    path.write_bytes(before.encode())
    function = slice(3, 6)
    region = "".join(before.splitlines(keepends=True)[function])
    new_region = "".join(after.splitlines(keepends=True)[function])
    argument = {
        "instruction": "drop the + 1 and rename the label",
        "program": format(oracle(region, new_region)),
        "range": {"start": {"line": 5, "character": 4}, "end": {"line": 5, "character": 10}},
        "snap": True,
    }
    finished = run_neovim(path, argument, tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert path.read_bytes().decode() == after
