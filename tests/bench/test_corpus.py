"""The release-diff corpus builder on synthetic sdists made in a temporary folder (no network)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from bench import corpus
from bench.corpus import (
    CorpusError,
    build_releases,
    check_cache,
    extract_sdist,
    read_sources,
    release_pairs,
)
from cad.resolver import format, oracle, parse, resolve
from cad.training import load_jsonl


def make_tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def make_sdist(path: Path, top: str, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return path


OLD = {
    "pkg/a.py": b"x = 1\r\ny = 2\r\n",
    "pkg/same.py": b"same\n",
    "pkg/gone.py": b"g\n",
    "pkg/data.bin": b"\x00\x01",
    "pkg/nul.py": b"a\x00b\n",
    "pkg/latin.py": "é\n".encode("latin-1"),
    "pkg/big.py": b"#" * (corpus.MAX_BYTES + 1),
    "README.txt": b"r\n",
}
NEW = {
    "pkg/a.py": b"x = 1\r\ny = 3\r\n",
    "pkg/same.py": b"same\n",
    "pkg/new.py": b"n\n",
    "pkg/nul.py": b"a\x00c\n",
    "pkg/big.py": b"#" * (corpus.MAX_BYTES + 2),
    "README.txt": b"r2\n",
    "tests/t.py": "def f():\n    return 'é'".encode(),
}


def test_read_sources_keeps_small_utf8_python_files_exactly(tmp_path: Path) -> None:
    sources = read_sources(make_tree(tmp_path / "old", OLD))
    assert set(sources) == {"pkg/a.py", "pkg/same.py", "pkg/gone.py"}
    assert sources["pkg/a.py"] == "x = 1\r\ny = 2\r\n"


def test_pairs_only_changed_files_present_in_both_releases(tmp_path: Path) -> None:
    old = read_sources(make_tree(tmp_path / "old", OLD))
    new = read_sources(make_tree(tmp_path / "new", {**NEW, "pkg/gone2.py": b"x\n"}))
    pairs = release_pairs("pkg", "1.0", "1.1", old, new)
    assert [p.id for p in pairs] == ["pkg/1.0->1.1/pkg/a.py"]
    (pair,) = pairs
    assert pair.instruction == "Update pkg/a.py from pkg 1.0 to 1.1."
    assert (pair.before, pair.after) == ("x = 1\r\ny = 2\r\n", "x = 1\r\ny = 3\r\n")
    for granularity in ("line", "subline"):
        program = parse(format(oracle(pair.before, pair.after, granularity=granularity)))
        assert resolve(program, pair.before) == pair.after


def test_extract_finds_the_top_folder_once(tmp_path: Path) -> None:
    archive = make_sdist(tmp_path / "pkg-1.0.tar.gz", "pkg-1.0", OLD)
    tree = extract_sdist(archive, tmp_path / "trees" / "pkg" / "1.0")
    assert tree == tmp_path / "trees" / "pkg" / "1.0" / "pkg-1.0"
    assert read_sources(tree)["pkg/same.py"] == "same\n"
    archive.unlink()
    assert extract_sdist(archive, tmp_path / "trees" / "pkg" / "1.0") == tree


def test_extract_refuses_paths_outside_the_cache(tmp_path: Path) -> None:
    archive = make_sdist(tmp_path / "evil.tar.gz", "..", {"escape.py": b"x\n"})
    with pytest.raises(tarfile.TarError):
        extract_sdist(archive, tmp_path / "trees" / "evil")
    assert not (tmp_path / "escape.py").exists()
    assert list((tmp_path / "trees").iterdir()) == []


def test_build_pairs_consecutive_releases(tmp_path: Path, monkeypatch, capsys) -> None:
    releases = {"1.0": OLD, "1.1": NEW, "2.0": {**NEW, "tests/t.py": b"def f():\n    pass\n"}}

    def fake_download(package: str, version: str, cache: Path) -> Path:
        folder = cache / "sdists" / package / version
        folder.mkdir(parents=True, exist_ok=True)
        return make_sdist(
            folder / f"{package}-{version}.tar.gz", f"{package}-{version}", releases[version]
        )

    monkeypatch.setattr(corpus, "download_sdist", fake_download)
    monkeypatch.setitem(corpus.RELEASES, "pkg", tuple(releases))
    out = tmp_path / "releases.jsonl"
    code = corpus.main(
        ["releases", "--packages", "pkg", "--cache", str(tmp_path), "--out", str(out)]
    )
    assert code == 0 and "wrote 2 edits" in capsys.readouterr().out
    assert [e.id for e in load_jsonl(out)] == ["pkg/1.0->1.1/pkg/a.py", "pkg/1.1->2.0/tests/t.py"]
    assert len(build_releases(["pkg"], tmp_path, max_pairs=1)) == 1


def test_unknown_packages_and_repository_caches_are_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(CorpusError, match="unknown packages nope"):
        build_releases(["nope"], tmp_path)
    with pytest.raises(CorpusError, match="outside"):
        check_cache(corpus.REPOSITORY / "cache")
    inside = str(corpus.REPOSITORY / "cache")
    assert corpus.main(["releases", "--packages", "six", "--cache", inside, "--out", "x"]) == 1
    assert "must live outside" in capsys.readouterr().err


def test_heval_command_writes_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "heval-js.jsonl"
    assert corpus.main(["heval", "--language", "js", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 164 and set(rows[0]) == {"id", "instruction", "before", "after"}
