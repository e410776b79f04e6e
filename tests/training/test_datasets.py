"""The edit schema, its loaders and deterministic splits."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cad.resolver import (
    apply_changes,
    format,
    format_multi,
    oracle,
    oracle_multi,
    parse,
    parse_multi,
    resolve,
    resolve_multi,
)
from cad.training import (
    DatasetError,
    EditExample,
    content_id,
    load_humanevalpack,
    load_jsonl,
    split_by_id,
    write_jsonl,
)
from cad.training.datasets import (
    FileChange,
    MultiEditExample,
    as_multi,
    files_content_id,
    load_examples,
    parse_file_changes,
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


MULTI_ROW = {
    "id": "m1",
    "instruction": "Move f to b.py",
    "files": [
        {"path": "a.py", "before": "def f():\r\n    pass\r\nx = 1\n", "after": "x = 1\n"},
        {"path": "pkg/b.py", "before": None, "after": "def f():\r\n    pass\r\n"},
        {"path": "gone.py", "before": "é\n", "after": None},
        {"path": "context.py", "before": "c\n", "after": "c\n"},
    ],
}


def test_multi_file_rows_load_next_to_single_file_rows(tmp_path: Path) -> None:
    single = {"instruction": "i", "before": "a\n", "after": "b\n"}
    unnamed = {key: value for key, value in MULTI_ROW.items() if key != "id"}
    path = write_rows(tmp_path / "mixed.jsonl", single, MULTI_ROW, unnamed)
    first, multi, content = load_examples(path)
    assert first == load_jsonl(write_rows(tmp_path / "one.jsonl", single))[0]
    assert isinstance(multi, MultiEditExample) and multi.id == "m1"
    assert multi.files[1] == FileChange("pkg/b.py", None, "def f():\r\n    pass\r\n")
    assert list(multi.before_files) == ["a.py", "gone.py", "context.py"]
    assert list(multi.after_files) == ["a.py", "pkg/b.py", "context.py"]
    assert isinstance(content, MultiEditExample) and len(content.id) == 16
    assert content.id == files_content_id(content.instruction, content.files)
    out = tmp_path / "copy.jsonl"
    write_jsonl(out, [first, multi])
    assert load_examples(out) == [first, multi]
    assert as_multi(first, "x.py") == MultiEditExample(
        first.id, "i", (FileChange("x.py", "a\n", "b\n"),)
    )
    parts = split_by_id([first, multi, content])
    assert sorted(e.id for part in parts for e in part) == sorted([first.id, "m1", content.id])


def test_single_file_loaders_name_a_multi_file_row(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "multi.jsonl", MULTI_ROW)
    with pytest.raises(DatasetError, match=r"multi\.jsonl:1: a multi-file edit \('files'\)"):
        load_jsonl(path)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([], "'files' must be a non-empty list"),
        ("a.py", "'files' must be a non-empty list"),
        ([{"before": "a", "after": "b"}], "file 1 must be an object with a string 'path'"),
        ([{"path": "a", "before": None, "after": None}], "not both null"),
        ([{"path": "a", "before": 1, "after": "b"}], "strings or null"),
        ([{"path": "../a", "before": "a", "after": "b"}], "is not a relative path"),
        ([{"path": "a", "before": "a", "after": "b"}] * 2, "two files have the same path"),
    ],
)
def test_bad_multi_file_rows_name_file_and_line(
    tmp_path: Path, files: object, message: str
) -> None:
    path = write_rows(tmp_path / "edits.jsonl", {"instruction": "i", "files": files})
    with pytest.raises(DatasetError, match=rf"edits\.jsonl:1: .*{re.escape(message)}"):
        load_examples(path)


def test_multi_file_rows_round_trip_through_the_oracle() -> None:
    files = parse_file_changes(MULTI_ROW["files"], "row")
    example = MultiEditExample("m1", "Move f to b.py", files)
    before, after = example.before_files, example.after_files
    program = parse_multi(format_multi(oracle_multi(before, after)))
    assert apply_changes(before, resolve_multi(program, before)) == after
