"""The native masking core is built by the package install and importable under ``cad``; a
missing, broken or stale build stops the package with one line that names the rebuild."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from cad.grammar import NATIVE_ABI, NativeCoreError, _native, load_native


def test_native_core_is_built_into_the_grammar_package():
    assert _native.ABI_VERSION == NATIVE_ABI
    assert _native.__name__ == "cad.grammar._native"
    assert load_native() is _native


def _assert_names_the_rebuild(message: str) -> None:
    assert "\n" not in message
    assert "pip install -e ." in message and "g++" in message


def test_a_missing_native_core_is_one_line_naming_the_rebuild(monkeypatch):
    monkeypatch.setitem(sys.modules, "cad.grammar._native", None)
    with pytest.raises(NativeCoreError, match="native core does not load") as caught:
        load_native()
    _assert_names_the_rebuild(str(caught.value))


def test_a_stale_native_core_is_refused(monkeypatch):
    stale = types.ModuleType("cad.grammar._native")
    stale.ABI_VERSION = NATIVE_ABI - 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cad.grammar._native", stale)
    with pytest.raises(NativeCoreError, match="out of date") as caught:
        load_native()
    _assert_names_the_rebuild(str(caught.value))


def test_importing_any_part_without_the_core_stops_with_that_line():
    code = (
        "import sys\n"
        "sys.modules['cad.grammar._native'] = None\n"
        "from cad.grammar.syntax.languages import syntax_machine\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("cad.errors.NativeCoreError: cad's native core does not load")
    _assert_names_the_rebuild(last)


def test_the_command_line_without_the_core_says_so_in_one_line(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    code = (
        "import sys\n"
        "sys.modules['cad.grammar._native'] = None\n"
        "sys.argv = ['cad', 'edit', 'a.py', '--instr', 'fix', '--no-server']\n"
        "from cad.server.cli import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: cad's native core does not load")
    _assert_names_the_rebuild(line)
