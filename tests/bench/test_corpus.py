"""The release-diff corpus builder on synthetic sdists (no network)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from bench.corpus import read_sources, release_pairs
from resolver import oracle, resolve


def make_sdist(path: Path, top: str, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return path


def test_pairs_changed_text_sources_only(tmp_path) -> None:
    old = make_sdist(tmp_path / "old.tar.gz", "pkg-1.0", {
        "pkg/a.py": b"x = 1\r\n", "pkg/b.py": b"same\n", "pkg/gone.py": b"g\n",
        "pkg/data.bin": b"\x00\x01", "pkg/latin.py": "é".encode("latin-1"), "README": b"r\n",
    })  # fmt: skip
    new = make_sdist(tmp_path / "new.tar.gz", "pkg-1.1", {
        "pkg/a.py": b"x = 2\r\n", "pkg/b.py": b"same\n", "pkg/new.py": b"n\n",
    })  # fmt: skip
    before, after = read_sources(old), read_sources(new)
    assert set(before) == {"pkg/a.py", "pkg/b.py", "pkg/gone.py"}
    pairs = release_pairs("pkg", "1.0", "1.1", before, after)
    assert [p.id for p in pairs] == ["pkg/1.0->1.1/pkg/a.py"]
    assert pairs[0].instruction == "Update pkg/a.py from pkg 1.0 to 1.1."
    assert resolve(oracle(pairs[0].before, pairs[0].after), pairs[0].before) == "x = 2\r\n"
