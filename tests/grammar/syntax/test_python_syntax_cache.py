"""The Python recogniser's tables come back from the on-disk cache in a new process exactly
as they were built, and a damaged cache file is rebuilt instead of failing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cad.grammar.index_cache import cache_path
from cad.grammar.syntax.python_syntax import CACHE_KIND, PythonSyntax, _fingerprint

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
    stored.write_bytes(b"not a pickle")
    syntax = PythonSyntax((3, 12))
    assert [syntax.accepts(s) for s in SAMPLES[:2]] == [True, True]
    assert stored.read_bytes() != b"not a pickle"


def test_versions_are_cached_apart():
    assert _fingerprint((3, 10)) != _fingerprint((3, 13))
