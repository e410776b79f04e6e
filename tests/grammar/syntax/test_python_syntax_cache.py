"""The Python recogniser's tables come back from the on-disk cache in a new process exactly
as they were built, and whatever else lies in the cache folder under that name (a damaged or
foreign file, a pickle, a FIFO, a link to a device, a huge file) is never executed, never
waited for, and rebuilt quietly."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cad.grammar.index_cache import cache_path, read_cached
from cad.grammar.syntax import table_store
from cad.grammar.syntax.lalr import Tables
from cad.grammar.syntax.lexer_dfa import Dfa
from cad.grammar.syntax.python_syntax import (
    CACHE_KIND,
    MAX_CACHE_BYTES,
    PythonSyntax,
    _fingerprint,
    built_parts,
)

SAMPLES = [
    b"def f(a, /, b=1, *c, **d):\n    return f'{a!r:>{b}}' + rb'\\d'\n",
    b"match x:\n    case [1, *rest] if rest:\n        pass\n",
    b"class C[T](B):\n    x: int = 1\n",
    b"if x:\n  pass\n pass\n",
    b"x = (1,\n",
    "ñame = 'é'\n".encode(),
]

PROBE = """
import json, sys
from cad.grammar.syntax import python_syntax
python_syntax.build_tables = None  # the tables must come from the cache
syntax = python_syntax.PythonSyntax((3, 13))
print(json.dumps([syntax.accepts(bytes.fromhex(h)) for h in sys.argv[1:]]))
"""


def _probe(cache: Path) -> list[bool]:
    """The verdicts of a fresh process that may only read the tables from ``cache``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *(s.hex() for s in SAMPLES)],
        env={"CAD_CACHE_DIR": str(cache), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_tables_round_trip_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_CACHE_DIR", str(tmp_path))
    expected = [PythonSyntax((3, 13)).accepts(s) for s in SAMPLES]
    assert expected == [True, True, True, False, False, True]
    stored = cache_path(CACHE_KIND, _fingerprint((3, 13)))
    assert stored.is_file()
    assert _probe(tmp_path) == expected


def test_damaged_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_CACHE_DIR", str(tmp_path))
    stored = cache_path(CACHE_KIND, _fingerprint((3, 12)))
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"not a table store")
    syntax = PythonSyntax((3, 12))
    assert [syntax.accepts(s) for s in SAMPLES[:2]] == [True, True]
    assert stored.read_bytes() != b"not a table store"


def test_versions_are_cached_apart():
    assert _fingerprint((3, 10)) != _fingerprint((3, 13))


def _rebuild_with(stored: Path, version: tuple[int, int] = (3, 12)) -> PythonSyntax:
    """Build the recogniser with ``stored`` in place of its cache file, failing (instead of
    hanging) if that takes more than a minute."""
    built: list[PythonSyntax] = []
    worker = threading.Thread(target=lambda: built.append(PythonSyntax(version)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert built, "building the recogniser did not finish"
    return built[0]


def _cache_file(tmp_path: Path, monkeypatch, version: tuple[int, int] = (3, 12)) -> Path:
    monkeypatch.setenv("CAD_CACHE_DIR", str(tmp_path))
    stored = cache_path(CACHE_KIND, _fingerprint(version))
    stored.parent.mkdir(parents=True, exist_ok=True)
    return stored


def _assert_rebuilt_quietly(stored: Path, capsys, caplog) -> None:
    """The recogniser works, its cache file is a fresh store, and nothing was said above
    debug level."""
    with caplog.at_level(logging.DEBUG):
        syntax = _rebuild_with(stored)
    assert [syntax.accepts(s) for s in SAMPLES[:2]] == [True, True]
    assert not stored.is_symlink() and stored.is_file()
    assert stored.read_bytes().startswith(table_store.MAGIC)
    assert capsys.readouterr() == ("", "")
    assert all(record.levelno <= logging.DEBUG for record in caplog.records)


class _Planted:
    """Unpickled, it would create the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def test_a_planted_pickle_never_runs(tmp_path, monkeypatch, capsys, caplog):
    marker = tmp_path / "marker"
    stored = _cache_file(tmp_path / "cache", monkeypatch)
    stored.write_bytes(pickle.dumps(_Planted(marker)))
    _assert_rebuilt_quietly(stored, capsys, caplog)
    assert not marker.exists()


def _valid_store(version: tuple[int, int] = (3, 12)) -> tuple[Tables, dict[str, Dfa]]:
    tables, _, lexer = built_parts(version)
    return tables, dict(lexer.automata)


def _wrong_shape() -> bytes:
    tables, automata = _valid_store()
    code = automata["code"]
    automata["code"] = Dfa(code.transitions[:, :255].copy(), code.accept, code.labels)
    return table_store.encode(tables, automata)


def _out_of_range() -> bytes:
    tables, automata = _valid_store()
    code = automata["code"]
    transitions = code.transitions.copy()
    transitions[0, ord("a")] = code.size
    automata["code"] = Dfa(transitions, code.accept, code.labels)
    return table_store.encode(tables, automata)


def _bad_action() -> bytes:
    tables, automata = _valid_store()
    actions = list(tables.actions)
    actions[0] = {**actions[0], 0: (len(actions) + 5,)}
    return table_store.encode(dataclasses.replace(tables, actions=tuple(actions)), automata)


def _truncated() -> bytes:
    data = table_store.encode(*_valid_store())
    return data[: len(data) // 2]


def _flipped() -> bytes:
    data = bytearray(table_store.encode(*_valid_store()))
    data[len(data) // 2] ^= 1
    return bytes(data)


def _foreign_version() -> bytes:
    data = bytearray(table_store.encode(*_valid_store()))
    data[len(table_store.MAGIC)] += 1
    return bytes(data)


@pytest.mark.parametrize(
    "content", [_wrong_shape, _out_of_range, _bad_action, _truncated, _flipped, _foreign_version]
)
def test_a_damaged_store_is_rebuilt_quietly(tmp_path, monkeypatch, capsys, caplog, content):
    data = content()
    stored = _cache_file(tmp_path, monkeypatch)
    stored.write_bytes(data)
    _assert_rebuilt_quietly(stored, capsys, caplog)


def test_a_fifo_is_not_waited_for(tmp_path, monkeypatch, capsys, caplog):
    stored = _cache_file(tmp_path, monkeypatch)
    os.mkfifo(stored)
    _assert_rebuilt_quietly(stored, capsys, caplog)


def test_a_link_to_an_endless_device_is_not_read(tmp_path, monkeypatch, capsys, caplog):
    stored = _cache_file(tmp_path, monkeypatch)
    stored.symlink_to("/dev/zero")
    _assert_rebuilt_quietly(stored, capsys, caplog)


def test_an_oversize_file_is_not_read(tmp_path, monkeypatch, capsys, caplog):
    stored = _cache_file(tmp_path, monkeypatch)
    with stored.open("wb") as file:
        file.truncate(MAX_CACHE_BYTES + 1)
    _assert_rebuilt_quietly(stored, capsys, caplog)


def test_the_reader_refuses_what_is_not_a_bounded_regular_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_CACHE_DIR", str(tmp_path))
    folder = cache_path("kind", "0").parent
    folder.mkdir(parents=True, exist_ok=True)
    cache_path("plain", "0").write_bytes(b"12345")
    os.mkfifo(cache_path("fifo", "0"))
    cache_path("zero", "0").symlink_to("/dev/zero")
    cache_path("link", "0").symlink_to(cache_path("plain", "0"))
    (folder / "folder-0.bin").mkdir()
    assert read_cached("plain", "0") == b"12345"
    assert read_cached("plain", "0", max_bytes=4) is None
    for kind in ("fifo", "zero", "link", "folder", "missing"):
        assert read_cached(kind, "0") is None, kind
