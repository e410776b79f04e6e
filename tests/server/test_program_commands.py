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
