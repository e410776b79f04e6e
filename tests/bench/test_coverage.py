"""The coverage table on a tiny corpus (offline, real Qwen2 tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.coverage import main, round_trip_failure
from cad.training import EditExample, write_jsonl

QWEN2 = Path(__file__).parents[1] / "fixtures" / "tokenizers" / "qwen2"
EDITS = [
    EditExample("a", "i", "def f(x):\n    return x + 1\n", "def f(x):\n    return x + 2\n"),
    EditExample("b", "i", "a\r\nb\r\n", "a\r\nB\r\nc"),
    EditExample("c", "i", "", "new\n"),
]


def test_round_trip_failure_is_none_for_exact_programs() -> None:
    assert [round_trip_failure(e) for e in EDITS] == [None, None, None]


def test_table_and_json(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(corpus, EDITS)
    md, js = tmp_path / "table.md", tmp_path / "table.json"
    argv = [str(corpus), "--tokenizer", str(QWEN2), "--out-md", str(md), "--out-json", str(js)]
    assert main([*argv, "--kernel-speedup", "4"]) == 0
    table = md.read_text(encoding="utf-8")
    assert table.split("\nMachine: ")[0] in capsys.readouterr().out
    assert table.rstrip().splitlines()[-1].startswith("Machine: ")
    header, _, row = table.splitlines()[:3]
    assert "m=32" in header and "ceiling at s=4 line / sub-line" in header
    assert row.startswith("| tiny | 3 | 3/3 |") and row.endswith("| qwen2 |")
    summary = json.loads(js.read_text())["corpora"][0]
    assert summary["n"] == 3 and summary["round_trip_failures"] == []
    assert 0 < summary["line_coverage"]["pooled"] <= summary["subline_coverage"]["pooled"] < 1


def test_bad_corpus_is_one_error_line(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text("{}\n")
    assert main([str(corpus), "--tokenizer", str(QWEN2)]) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"error: {corpus}:1: expected string fields instruction, before, after"
    )
