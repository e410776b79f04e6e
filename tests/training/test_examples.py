"""Training examples are the decoder's own sequences, supervised on model-decided tokens only."""

from __future__ import annotations

import pytest

from cad.resolver import (
    CopyFrom,
    CopyLines,
    CopySpan,
    Document,
    op_text,
    oracle,
    oracle_multi,
    resolve_multi,
)
from cad.selector import Decoder, MultiDecoder, kv
from cad.training import EditExample
from cad.training.datasets import FileChange, MultiEditExample
from cad.training.examples import IGNORE, ExampleBuilder, collate
from tests.conftest import heval_pairs

TOY = [
    EditExample("toy-set", "Set b to 7.", "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 7\nc = 3\n"),
    EditExample("toy-del", "Drop b.", "a = 1\nb = 2\nc = 3\n", "a = 1\nc = 3\n"),
    EditExample("toy-crlf", "Add d.", "a = 1\r\nb = 2\r\n", "a = 1\r\nb = 2\r\nd = 4\r\n"),
    EditExample("toy-empty", "Write x.", "", "x = 1\n"),
]


def edits() -> list[EditExample]:
    heval = [
        EditExample(f"heval-{i}", "Fix the bug.", before, after)
        for i, (before, after) in enumerate(heval_pairs("python")[:4])
    ]
    return TOY + heval


@pytest.fixture(scope="module")
def builder(tiny_qwen) -> ExampleBuilder:
    return ExampleBuilder.for_model(tiny_qwen)


def fed_tokens(decoder: Decoder, edit: EditExample, granularity: str, monkeypatch) -> tuple:
    """Everything the decoder appends to its cache while following the oracle program."""
    fed: list[int] = []
    append = kv.append

    def recording(model, cache, token_ids, device):
        fed.extend(token_ids)
        return append(model, cache, token_ids, device)

    monkeypatch.setattr(kv, "append", recording)
    program = oracle(edit.before, edit.after, granularity=granularity)
    result = decoder.edit(edit.before, edit.instruction, program=program)
    monkeypatch.setattr(kv, "append", append)
    return fed, result


@pytest.mark.parametrize("granularity", ["line", "subline"])
def test_examples_are_what_the_decoder_feeds_and_supervise_its_decisions(
    tiny_qwen, builder, granularity, monkeypatch
) -> None:
    # Without drafts every fed token goes through kv.append (drafts keep the same sequence).
    decoder = Decoder(tiny_qwen, subline=granularity == "subline", draft_budget=0)
    for edit in edits():
        item = builder.build(edit, granularity=granularity)
        fed, result = fed_tokens(decoder, edit, granularity, monkeypatch)
        assert result.text == edit.after
        # The decoder stops feeding once the program is complete: everything it fed is the
        # example's prefix, and every supervised token is predicted from a fed position.
        assert item.input_ids[: len(fed)] == fed
        assert all(label == IGNORE for label in item.labels[len(fed) + 1 :])
        assert item.supervised == result.stats.generated_tokens
        unsupervised_tape = len(item.input_ids) - item.prompt_length - item.supervised
        assert unsupervised_tape == result.stats.forced_tokens + result.stats.copied_tokens
        assert all(label == IGNORE for label in item.labels[: item.prompt_length])
        for position, label in enumerate(item.labels):
            assert label in (IGNORE, item.input_ids[position])


@pytest.mark.parametrize("granularity", ["line", "subline"])
def test_echoed_copies_are_never_supervised(builder, granularity) -> None:
    for edit in edits():
        item = builder.build(edit, granularity=granularity)
        document = Document(edit.before)
        program = oracle(edit.before, edit.after, granularity=granularity)
        cursor = item.prompt_length
        for index, op in enumerate(program.ops):
            if not isinstance(op, CopyLines | CopySpan):
                continue
            echo = builder.encode(op_text(op, document, index))
            while item.input_ids[cursor : cursor + len(echo)] != echo:
                cursor += 1
                assert cursor + len(echo) <= len(item.input_ids), f"{edit.id}: echo not found"
            assert all(label == IGNORE for label in item.labels[cursor : cursor + len(echo)])
            cursor += len(echo)


def test_collate_pads_right_and_never_supervises_padding(builder) -> None:
    items = [builder.build(edit) for edit in TOY[:2]]
    batch = collate(items, pad_id=0)
    width = max(len(item.input_ids) for item in items)
    assert batch["input_ids"].shape == (2, width)
    for row, item in enumerate(items):
        length = len(item.input_ids)
        assert batch["input_ids"][row, :length].tolist() == item.input_ids
        assert batch["attention_mask"][row].tolist() == [1] * length + [0] * (width - length)
        assert batch["labels"][row, length:].eq(IGNORE).all()
        assert int(batch["labels"][row].ne(IGNORE).sum()) == item.supervised


MOVE = MultiEditExample(
    "move",
    "Move helper to util.py.",
    (
        FileChange(
            "app.py",
            "import os\n\n\ndef helper(x):\n    return x + 1\n\n\ndef main():\n    return 2\n",
            "import os\n\n\ndef main():\n    return 2\n",
        ),
        FileChange("util.py", "X = 1\n", "X = 1\n\n\ndef helper(x):\n    return x + 1\n"),
        FileChange("old.py", "gone\n", None),
        FileChange("new.py", None, "def helper(x):\n"),
    ),
)


def test_an_edit_of_several_files_is_what_the_multi_file_decoder_feeds(
    tiny_qwen, builder, monkeypatch
) -> None:
    fed: list[int] = []
    append = kv.append

    def recording(model, cache, token_ids, device):
        fed.extend(token_ids)
        return append(model, cache, token_ids, device)

    program = oracle_multi(MOVE.before_files, MOVE.after_files)
    assert any(isinstance(op, CopyFrom) for section in program.sections[1:2] for op in section.ops)
    monkeypatch.setattr(kv, "append", recording)
    result = MultiDecoder(tiny_qwen, draft_budget=0).edit(
        MOVE.before_files, MOVE.instruction, program=program
    )
    monkeypatch.setattr(kv, "append", append)
    item = builder.build(MOVE)
    assert result.changes == resolve_multi(program, MOVE.before_files)
    assert item.input_ids[: len(fed)] == fed
    assert item.supervised == result.stats.generated_tokens
    unsupervised_tape = len(item.input_ids) - item.prompt_length - item.supervised
    assert unsupervised_tape == result.stats.forced_tokens + result.stats.copied_tokens
    for position, label in enumerate(item.labels):
        assert label in (IGNORE, item.input_ids[position])
