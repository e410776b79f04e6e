"""The edit schema, its loaders and deterministic splits."""

from __future__ import annotations

import json

import pytest

from resolver import format, oracle, parse, resolve
from training.datasets import (
    DatasetError,
    EditExample,
    load_humanevalpack,
    load_jsonl,
    split_by_id,
    write_jsonl,
)


def test_round_trip_and_content_ids(tmp_path) -> None:
    path = tmp_path / "edits.jsonl"
    path.write_text(
        json.dumps({"instruction": "i", "before": "a\r\n", "after": "b\r\n"})
        + "\n\n"
        + json.dumps({"id": "x", "instruction": "j", "before": "", "after": "é"})
        + "\n"
    )
    rows = load_jsonl(path)
    assert rows[1] == EditExample("x", "j", "", "é")
    assert len(rows[0].id) == 16 and load_jsonl(path)[0].id == rows[0].id
    out = tmp_path / "sub" / "copy.jsonl"
    write_jsonl(out, rows)
    assert load_jsonl(out) == rows


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{oops\n", "edits.jsonl:1: not JSON"),
        ('{"instruction": "i", "before": "a"}\n', "edits.jsonl:1: expected string fields"),
        ("[1, 2]\n", "expected string fields"),
        ("\n", "no rows"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, content: str, message: str) -> None:
    path = tmp_path / "edits.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_jsonl(path)


def test_missing_file_is_a_dataset_error(tmp_path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        load_jsonl(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("language", ["python", "js"])
def test_heval_loader_round_trips_every_edit(language: str) -> None:
    examples = load_humanevalpack(language)
    assert len(examples) == 164
    assert examples[0].instruction.startswith("Fix the bug in ")
    assert all(e.before != e.after for e in examples)
    for example in examples:
        for granularity in ("line", "subline"):
            program = parse(format(oracle(example.before, example.after, granularity=granularity)))
            assert resolve(program, example.before) == example.after


def test_unknown_heval_language() -> None:
    with pytest.raises(DatasetError, match="no such HumanEvalPack file"):
        load_humanevalpack("cobol")


def test_split_is_deterministic_and_complete() -> None:
    examples = load_humanevalpack("python")
    train, valid, test = split_by_id(examples)
    assert sorted(e.id for e in train + valid + test) == sorted(e.id for e in examples)
    shuffled = split_by_id(list(reversed(examples)))
    assert [sorted(e.id for e in part) for part in shuffled] == [
        sorted(e.id for e in part) for part in (train, valid, test)
    ]
    again = split_by_id(examples)
    assert [e.id for e in again[2]] == [e.id for e in test]
    assert 5 <= len(test) <= 35 and 5 <= len(valid) <= 35
