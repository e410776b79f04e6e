"""Start-up: help and argument errors answer without importing torch or transformers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from cad.server.cli import main
sys.argv = ["cad", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(name for name in ("torch", "transformers", "peft") if name in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def _run(args: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        (["edit", "--help"], 0),
        (["edit", "{missing}", "--instr", "x"], 1),
        (["edit", "{file}", "--instr", " "], 1),
        (["edit", "{file}"], 2),
        (["edit", "{file}", "--instr", "x", "--lines", "9-3", "--mode", "rewrite"], 1),
    ],
)
def test_help_and_argument_errors_import_no_model_library(
    tmp_path: Path, args: list[str], code: int
) -> None:
    file = tmp_path / "a.py"
    file.write_text("x = 1\n")
    args = [a.format(file=file, missing=tmp_path / "missing.py") for a in args]
    outcome = _run(args)
    assert outcome == {"code": code, "heavy": []}
