"""The edit schema, its loaders and deterministic splits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cad.resolver import format, oracle, parse, resolve
from cad.training import (
    DatasetError,
    EditExample,
    content_id,
    load_humanevalpack,
    load_jsonl,
    split_by_id,
    write_jsonl,
)


def write_rows(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_rows_load_with_given_or_content_ids(tmp_path: Path) -> None:
    path = tmp_path / "edits.jsonl"
    path.write_text(
        json.dumps({"instruction": "i", "before": "a\r\n", "after": "b\r\n"})
        + "\n\n"
        + json.dumps({"id": "x", "instruction": "j", "before": "", "after": "é", "extra": 1})
        + "\n",
        encoding="utf-8",
    )
    rows = load_jsonl(path)
    assert rows[0] == EditExample(content_id("i", "a\r\n", "b\r\n"), "i", "a\r\n", "b\r\n")
    assert len(rows[0].id) == 16 and load_jsonl(str(path))[0].id == rows[0].id
    assert rows[1] == EditExample("x", "j", "", "é")


def test_write_is_exact_and_atomic(tmp_path: Path) -> None:
    tricky = "a\u2028b\x85c\rd\x0ce\r\n\ufeff😀</gen>"
    rows = [EditExample("t", "keep every character", tricky, tricky + "\n")]
    out = tmp_path / "sub" / "copy.jsonl"
    write_jsonl(out, rows)
    assert load_jsonl(out) == rows
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1

    def broken() -> Iterator[EditExample]:
        yield EditExample("u", "i", "", "x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_jsonl(out, broken())
    assert load_jsonl(out) == rows
    assert [p.name for p in out.parent.iterdir()] == ["copy.jsonl"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{oops\n", r"edits\.jsonl:1: not JSON"),
        (b'\n{"instruction": "i", "before": "a"}\n', r"edits\.jsonl:2: expected string fields"),
        (b"[1, 2]\n", r"edits\.jsonl:1: expected string fields"),
        (b'{"id": 3, "instruction": "i", "before": "", "after": ""}\n', r":1: 'id' must be"),
        (b'{"instruction": "\xff"}\n', r"edits\.jsonl:1: not UTF-8"),
        (b"\n  \n", r"edits\.jsonl: no rows"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "edits.jsonl"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        load_jsonl(path)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    row = {"id": "a", "instruction": "i", "before": "", "after": ""}
    path = write_rows(tmp_path / "edits.jsonl", row, {**row, "id": "b"}, row)
    with pytest.raises(DatasetError, match=r"edits\.jsonl:3: duplicate id 'a' \(first on line 1\)"):
        load_jsonl(path)


def test_missing_file_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope\.jsonl: cannot read"):
        load_jsonl(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("language", ["python", "js"])
def test_heval_loader_round_trips_every_edit(language: str) -> None:
    examples = load_humanevalpack(language)
    assert len(examples) == 164 and len({e.id for e in examples}) == 164
    assert all(e.before != e.after for e in examples)
    for example in examples:
        for granularity in ("line", "subline"):
            program = parse(format(oracle(example.before, example.after, granularity=granularity)))
            assert resolve(program, example.before) == example.after, (example.id, granularity)


def test_heval_rows_and_instruction() -> None:
    first = load_humanevalpack("python")[0]
    assert first.id == "Python/0"
    assert first.instruction == "Fix the bug in has_close_elements."
    assert first.before.startswith("from typing import List")
    assert load_humanevalpack("js")[0].id == "JavaScript/0"


def test_heval_from_a_path_and_its_errors(tmp_path: Path) -> None:
    row = {"task_id": "T/1", "entry_point": "f", "declaration": "def f():\n"}
    row |= {"buggy_solution": "    return 1\n", "canonical_solution": "    return 2\n"}
    path = write_rows(tmp_path / "pack.jsonl", row)
    assert load_humanevalpack(path) == [
        EditExample(
            "T/1", "Fix the bug in f.", "def f():\n    return 1\n", "def f():\n    return 2\n"
        )
    ]
    write_rows(path, row, {"task_id": "T/2"})
    with pytest.raises(DatasetError, match=r"pack\.jsonl:2: expected string fields"):
        load_humanevalpack(path)
    with pytest.raises(DatasetError, match="no such HumanEvalPack file"):
        load_humanevalpack("cobol")


def test_split_is_deterministic_order_free_and_complete() -> None:
    examples = load_humanevalpack("python")
    train, valid, test = split_by_id(examples)
    assert sorted(e.id for e in train + valid + test) == sorted(e.id for e in examples)
    shuffled = split_by_id(list(reversed(examples)))
    assert [{e.id for e in part} for part in shuffled] == [
        {e.id for e in part} for part in (train, valid, test)
    ]
    assert [e.id for e in split_by_id(examples)[2]] == [e.id for e in test]
    assert 5 <= len(test) <= 35 and 5 <= len(valid) <= 35
    assert {e.id for e in split_by_id(examples[:50])[2]} == {e.id for e in test} & {
        e.id for e in examples[:50]
    }


def test_split_fractions() -> None:
    examples = load_humanevalpack("js")
    assert split_by_id(examples, 0, 0) == (examples, [], [])
    assert len(split_by_id(examples, valid=0.0, test=1.0)[2]) == 164
    with pytest.raises(ValueError, match="fractions"):
        split_by_id(examples, valid=0.6, test=0.6)
