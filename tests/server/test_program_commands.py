"""``cad oracle``, ``cad resolve`` and ``cad analyze`` through the real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TOKENIZERS, heval_pairs

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]


def cad(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CAD, *args], capture_output=True, cwd=cwd, timeout=300)


def test_oracle_then_resolve_is_byte_exact(tmp_path: Path) -> None:
    before = tmp_path / "before.txt"
    after = tmp_path / "after.txt"
    before.write_bytes("\ufeffline one\r\nline two\rthree\n".encode())
    after.write_bytes("\ufeffline one\r\nline 2\rthree\nfour".encode())
    for flag in ([], ["--subline"]):
        result = cad("oracle", str(before), str(after), *flag)
        assert result.returncode == 0, result.stderr
        program = tmp_path / "edit.program"
        program.write_bytes(result.stdout)
        resolved = cad("resolve", str(program), str(before))
        assert resolved.returncode == 0, resolved.stderr
        assert resolved.stdout == after.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["oracle", "missing.txt", "b.txt"], "missing.txt: no such file"),
        (["oracle", "binary.bin", "b.txt"], "looks like a binary file"),
        (["oracle", "latin1.txt", "b.txt"], "not valid UTF-8"),
        (["oracle", "b.txt"], "Missing argument"),
        (["oracle", "b.txt", "b.txt", "--min-copy", "0"], "--min-copy"),
        (["resolve", "bad.program", "b.txt"], "expected '<copy', '<gen>' or '</program>'"),
        (["resolve", "range.program", "b.txt"], "out of range"),
        (["analyze", "b.txt", "--tokenizer", "."], "no tokenizer.json"),
        (
            ["analyze", "bad.jsonl", "--tokenizer", str(TOKENIZERS / "qwen2")],
            "bad.jsonl:1: not JSON",
        ),
        (
            ["analyze", "noafter.jsonl", "--tokenizer", str(TOKENIZERS / "qwen2")],
            "'before' and 'after'",
        ),
        (["frobnicate"], "No such command"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "b.txt").write_text("b\n")
    (tmp_path / "binary.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    (tmp_path / "bad.program").write_text("<copy lines=1-2/></program>")
    (tmp_path / "range.program").write_text('<copy lines="1-9"/>\n</program>')
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    (tmp_path / "noafter.jsonl").write_text('{"before": "x"}\n')
    result = cad(*args, cwd=tmp_path)
    assert result.returncode != 0
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith("error: ")
    assert message in stderr
    assert result.stdout == b""


def test_analyze_reports_line_and_subline_coverage(tmp_path: Path) -> None:
    corpus = tmp_path / "heval.jsonl"
    with corpus.open("w") as handle:
        for before, after in heval_pairs("python")[:20]:
            handle.write(json.dumps({"before": before, "after": after}) + "\n")
    result = cad(
        "analyze",
        str(corpus),
        "--tokenizer",
        str(TOKENIZERS / "qwen2"),
        "--json",
        "--kernel-speedup",
        "20",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["n"] == 20
    line = summary["line_coverage"]["pooled"]
    subline = summary["subline_coverage"]["pooled"]
    assert 0.5 < line <= subline <= 1.0
    sweep = [summary["sweep_pooled"][m] for m in ("1", "2", "4", "8", "16", "32")]
    assert sweep == sorted(sweep, reverse=True)
    assert summary["subline_speedup_ceiling"] == pytest.approx(1 / ((1 - subline) + subline / 20))
    table = cad("analyze", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen2"))
    assert table.returncode == 0
    assert b"subline" in table.stdout


def test_analyze_takes_the_built_in_edit_sets_by_name(tmp_path: Path) -> None:
    result = cad("analyze", "heval-python", "--tokenizer", str(TOKENIZERS / "qwen2"), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n"] == len(heval_pairs("python"))


def test_analyze_reads_rows_with_unicode_line_separators(tmp_path: Path) -> None:
    corpus = tmp_path / "sep.jsonl"
    corpus.write_text(
        json.dumps({"before": "a\u2028b\n", "after": "a\u2028c\n"}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    result = cad("analyze", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen2"), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n"] == 1


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    """A folder holding ``files`` (relative paths) byte for byte."""
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


BEFORE_TREE = {
    "app.py": b"\xef\xbb\xbfimport os\r\n\r\ndef helper(x):\r\n    return x * 2\r\n\r\ndef main():\r\n    pass\r\n",
    "pkg/util.py": "VALUE = 'é'\n".encode(),
    "old.txt": b"no final newline",
}
AFTER_TREE = {
    "app.py": b"\xef\xbb\xbfimport os\r\n\r\ndef main():\r\n    pass\r\n",
    "pkg/util.py": "VALUE = 'é'\n\ndef helper(x):\r\n    return x * 2\r\n".encode(),
    "pkg/new.txt": b"no final newline",
}


@pytest.mark.parametrize("flag", [[], ["--subline"]])
def test_folder_oracle_then_resolve_write_turns_one_folder_into_the_other(
    tmp_path: Path, flag: list[str]
) -> None:
    before = write_tree(tmp_path / "before", BEFORE_TREE)
    after = write_tree(tmp_path / "after", AFTER_TREE)
    result = cad("oracle", str(before), str(after), *flag)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert '<copy file="1" ' in text and '<create path="pkg/new.txt">' in text
    assert '<delete file="2"/>' in text  # old.txt, file 2 in sorted order
    program = tmp_path / "edit.program"
    program.write_bytes(result.stdout)
    shown = cad("resolve", str(program), str(before))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {
        "app.py": AFTER_TREE["app.py"].decode(),
        "old.txt": None,
        "pkg/util.py": AFTER_TREE["pkg/util.py"].decode(),
        "pkg/new.txt": "no final newline",
    }
    written = cad("resolve", str(program), str(before), "--write")
    assert written.returncode == 0, written.stderr
    assert written.stderr == b"wrote 3 files, deleted 1\n"
    found = {p.relative_to(before).as_posix(): p for p in before.rglob("*") if p.is_file()}
    assert {name: path.read_bytes() for name, path in found.items()} == AFTER_TREE


def test_resolve_takes_context_files_given_one_by_one(tmp_path: Path) -> None:
    """A bare program edits file 1 and may copy from the others; its result is printed as
    it is."""
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("def f():\n    return 2\n")
    (tmp_path / "p.program").write_text(
        '<copy lines="1-1"/>\n<copy file="2" lines="1-2"/>\n</program>'
    )
    result = cad("resolve", "p.program", "a.py", "b.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"a = 1\ndef f():\n    return 2\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["oracle", "folder", "b.txt"], "both be files or both be folders"),
        (["resolve", "files.program", "b.txt"], '<edit file="2">: no file 2'),
        (["resolve", "files.program", "folder", "b.txt"], "folder: a folder"),
        (["resolve", "cross.program", "b.txt"], "names no file: expected a file from 1 to 1"),
        (["resolve", "create.program", "b.txt"], "expected a new path"),
    ],
)
def test_multi_file_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "b.txt").write_text("b\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "files.program").write_text('<edit file="2"></edit></program>')
    (tmp_path / "cross.program").write_text('<copy file="3" lines="1-1"/></program>')
    (tmp_path / "create.program").write_text('<create path="b.txt"></create></program>')
    result = cad(*args, cwd=tmp_path)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert message in stderr


def test_analyze_measures_cross_file_copies_of_a_multi_file_corpus(tmp_path: Path) -> None:
    helper = "".join(
        f"def helper_{n}(values):\n    total = sum(values) * {n}\n    return total / len(values)\n"
        for n in range(4)
    )
    rows = [
        {
            "instruction": "Move helper to util.py",
            "files": [
                {
                    "path": "app.py",
                    "before": f"import os\n\n{helper}\nrun()\n",
                    "after": "import os\n\nrun()\n",
                },
                {"path": "util.py", "before": "X = 1\n", "after": f"X = 1\n\n{helper}"},
            ],
        },
        {"instruction": "Fix", "before": "a = 1\nb = 2\n", "after": "a = 1\nb = 3\n"},
    ]
    corpus = tmp_path / "multi.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = cad("analyze", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen2"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["n"] == 2 and summary["files"] == 3
    schemes = summary["schemes"]
    assert schemes["multi_line"]["pooled"] > schemes["per_file_line"]["pooled"]
    assert schemes["multi_line"]["cross_pooled"] > 0 == schemes["per_file_line"]["cross_pooled"]
    assert summary["cross_file_gain"]["line"] == pytest.approx(
        schemes["multi_line"]["pooled"] - schemes["per_file_line"]["pooled"]
    )
    assert summary["edits_copying_across_files"] == 1
    assert schemes["multi_line"]["program_tokens"] < schemes["per_file_line"]["program_tokens"]
    table = cad("analyze", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen2"))
    assert table.returncode == 0, table.stderr
    assert b"cross-file copies reach" in table.stdout
