"""No pure-Python engine runs in a ``cad`` command: the reference engines are the tests'
oracles only.

Every command here runs in a process where constructing a reference engine (the Python
DPDA, Earley and mask kernel of the context-free grammars, the Python GLR and layout parsers
of the Python syntax, the Python program FSM and its byte transitions) writes its name to a
log and raises. The syntax-safe edits run with a tiny random model: forced programs and
rewrites held to JSON, to a JSON Schema and to Python, on the command line and through the
language server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cad.resolver import format, oracle
from tests.tiny_model import make_tiny_model

REFERENCE_ENGINES = {
    "cad.grammar.cfg.dpda": ["DpdaAutomaton"],
    "cad.grammar.cfg.earley": ["EarleyAutomaton"],
    "cad.grammar.cfg.token_masks": ["MaskComputer", "TransitionTable"],
    "cad.grammar.cfg.reference": ["ReferenceCfgMatcher"],
    "cad.grammar.syntax.glr": ["GlrParser"],
    "cad.grammar.syntax.python_layout": ["LayoutParser"],
    "cad.grammar.program_fsm": ["ReferenceProgramMatcher", "ReferenceProgramIndex"],
    "cad.grammar.program_states": ["ProgramStructure"],
}

JSON_BEFORE = '{\n  "name": "cad",\n  "sizes": [1, 2, 3],\n  "ok": true\n}\n'
JSON_AFTER = '{\n  "name": "cad",\n  "sizes": [1, 2, 3, 4],\n  "ok": false\n}\n'
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "sizes": {"type": "array", "items": {"type": "integer"}},
        "ok": {"type": "boolean"},
    },
    "required": ["name"],
}
PY_BEFORE = "def mean(values):\n    return sum(values) / len(values) + 1\n"
PY_AFTER = "def mean(values):\n    return sum(values) / len(values)\n"


def guard(log: Path) -> str:
    """Python to run first in a ``cad`` process: every reference engine appends its name to
    ``log`` and raises when constructed."""
    lines = ["import importlib", f"LOG = {str(log)!r}", "def refuse(cls):"]
    lines += [
        "    def init(self, *args, **kwargs):",
        "        with open(LOG, 'a') as log:",
        "            log.write(cls.__qualname__ + '\\n')",
        "        raise RuntimeError('a Python reference engine ran: ' + cls.__qualname__)",
        "    cls.__init__ = init",
    ]
    for module, names in REFERENCE_ENGINES.items():
        lines += [
            f"for name in {names!r}:",
            f"    refuse(getattr(importlib.import_module({module!r}), name))",
        ]
    return "\n".join(lines) + "\n"


def ran(log: Path) -> list[str]:
    """The reference engines the guarded process constructed."""
    return log.read_text().split() if log.exists() else []


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture
def workspace(tmp_path) -> Path:
    (tmp_path / "data.json").write_text(JSON_BEFORE)
    (tmp_path / "json.program").write_text(format(oracle(JSON_BEFORE, JSON_AFTER)))
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "mean.py").write_text(PY_BEFORE)
    (tmp_path / "py.program").write_text(format(oracle(PY_BEFORE, PY_AFTER)))
    return tmp_path


def guarded_cad(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = guard(workspace / "engines.log") + "from cad.server.cli import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=workspace,
        timeout=300,
    )


def test_the_guard_catches_a_reference_engine(tmp_path: Path) -> None:
    code = guard(tmp_path / "engines.log") + (
        "from cad.grammar.cfg import compile\n"
        "from cad.grammar.syntax.languages import JSON_FILE\n"
        "from cad.grammar.vocab import Vocabulary\n"
        "compile(JSON_FILE, Vocabulary((b'a', None), 1), backend='python')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert "a Python reference engine ran" in result.stderr
    assert ran(tmp_path / "engines.log")


@pytest.mark.parametrize(
    ("file", "program", "syntax", "after"),
    [
        ("data.json", "json.program", ["--syntax", "json"], JSON_AFTER),
        ("data.json", "json.program", ["--syntax", "json", "--schema", "schema.json"], JSON_AFTER),
        ("mean.py", "py.program", ["--syntax", "python"], PY_AFTER),
    ],
    ids=["json", "json-schema", "python"],
)
def test_syntax_safe_forced_programs_run_no_python_engine(
    workspace: Path, model_dir: Path, file: str, program: str, syntax: list[str], after: str
) -> None:
    result = guarded_cad(
        workspace, "edit", file, "--instr", "x", "--model", str(model_dir),
        "--program", program, *syntax, "--stdout",
    )  # fmt: skip
    assert ran(workspace / "engines.log") == []
    assert result.returncode == 0, result.stderr
    assert result.stdout == after


@pytest.mark.parametrize(
    ("file", "syntax"),
    [("data.json", ["--syntax", "json"]), ("mean.py", ["--syntax", "python"])],
    ids=["json", "python"],
)
def test_syntax_safe_rewrites_run_no_python_engine(
    workspace: Path, model_dir: Path, file: str, syntax: list[str]
) -> None:
    result = guarded_cad(
        workspace, "edit", file, "--instr", "x", "--model", str(model_dir),
        "--mode", "rewrite", "--max-new-tokens", "6", *syntax, "--stdout",
    )  # fmt: skip
    assert ran(workspace / "engines.log") == []
    assert "Traceback" not in result.stderr, result.stderr


def test_the_language_server_runs_no_python_engine(tmp_path: Path, model_dir: Path) -> None:
    from tests.server.test_serve import REWRITE_INSTRUCTION, Client, model_options, run

    uri = "file:///tmp/cad-test/data.json"

    async def scenario() -> dict:
        client = Client()
        options = {**model_options(str(model_dir), budget=6), "syntax": "json"}
        await client.start(options, prelude=guard(tmp_path / "engines.log"))
        client.open(JSON_BEFORE, uri=uri, language_id="json")
        result = await client.try_edit({"uri": uri, "instruction": REWRITE_INSTRUCTION})
        await client.stop()
        return result

    result = run(scenario())
    assert ran(tmp_path / "engines.log") == []
    assert "a Python reference engine ran" not in json.dumps(result)
