"""Multi-file program decoding end to end on tiny random models with the real tokenizers."""

from __future__ import annotations

import threading

import pytest

from cad.resolver import (
    CopyFrom,
    CopyLines,
    CreateFile,
    DeleteFile,
    EditFile,
    MultiProgram,
    Workspace,
    oracle_multi,
    resolve_multi,
)
from cad.selector import Cancelled, MultiDecoder, follow_multi_program
from cad.selector.multi_drafting import MultiDrafter
from tests.conftest import heval_pairs

INSTRUCTION = "Move the code where it belongs."
HELPER = "def helper(values):\n" + "".join(f"    x{i} = values[{i}]\n" for i in range(12))


def moves(language: str, count: int) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Edits of three files: file a gets its fix and b's fixed code appended, b is emptied
    but for one line, c is deleted and a new file takes a's old first half."""
    pairs = heval_pairs(language)
    edits = []
    for first in range(0, 2 * count, 2):
        (a, fixed_a), (b, fixed_b) = pairs[first], pairs[first + 1]
        before = {"a.py": a, "b.py": b, "c.py": "gone\n"}
        after = {
            "a.py": fixed_a + "\n" + fixed_b,
            "b.py": b.splitlines(keepends=True)[0],
            "moved/first.py": a[: len(a) // 2].rsplit("\n", 1)[0] + "\n",
        }
        edits.append((before, after))
    return edits


def test_forced_programs_are_byte_exact_whatever_the_draft_budget(tiny_qwen) -> None:
    for before, after in moves("python", 6):
        program = oracle_multi(before, after)
        expected = resolve_multi(program, before)
        decoded = [
            MultiDecoder(tiny_qwen, max_new_tokens=4096, draft_budget=budget).edit(
                before, INSTRUCTION, program=program
            )
            for budget in (0, None)
        ]
        for result in decoded:
            assert result.program == program
            assert result.changes == expected
            assert not result.stats.truncated
        one_per_forward, drafted = (result.stats for result in decoded)
        assert drafted.forwards <= one_per_forward.forwards
        assert one_per_forward.forwards == one_per_forward.generated_tokens - 1


def test_sub_line_copies_across_files_with_multi_digit_tokens(tiny_llama) -> None:
    decoder = MultiDecoder(tiny_llama, max_new_tokens=4096)
    for before, after in moves("js", 3):
        program = oracle_multi(before, after, granularity="subline")
        assert decoder.edit(before, INSTRUCTION, program=program).changes == resolve_multi(
            program, before
        )


def test_the_decoder_appends_exactly_the_tape_training_builds(tiny_qwen) -> None:
    before, after = moves("python", 1)[0]
    program = oracle_multi(before, after)
    decoder = MultiDecoder(tiny_qwen, max_new_tokens=4096)
    result = decoder.edit(before, INSTRUCTION, program=program)
    tape = follow_multi_program(decoder.index, decoder.encode, Workspace(before), program)
    assert tape.program == program
    assert result.stats.generated_tokens == sum(tape.decided)
    assert (
        result.stats.generated_tokens + result.stats.forced_tokens + result.stats.copied_tokens
        == len(tape.tokens)
    )
    assert result.stats.copied_tokens > 0


def test_a_long_copy_from_another_file_takes_a_few_forwards(tiny_qwen) -> None:
    lines = [f"value_{i} = {i}\n" for i in range(200)]
    before = {"a.py": "".join(lines), "b.py": "X = 1\n"}
    after = {"a.py": "".join(lines[190:]), "b.py": "X = 1\n" + "".join(lines[:190])}
    program = oracle_multi(before, after)
    assert program.sections[1].ops[1] == CopyFrom(1, CopyLines(1, 190))
    result = MultiDecoder(tiny_qwen, draft_budget=0).edit(before, INSTRUCTION, program=program)
    assert result.changes == resolve_multi(program, before)
    assert result.stats.copied_tokens > 1500
    assert result.stats.forwards < 40


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_whatever_the_model_writes_is_a_valid_program_for_the_files(tiny_qwen, seed) -> None:
    from cad.selector import Sampling

    before, _ = moves("python", 1)[0]
    decoder = MultiDecoder(
        tiny_qwen, max_new_tokens=120, sampling=Sampling(temperature=1.0, seed=seed)
    )
    result = decoder.edit(before, INSTRUCTION, editable=2)
    assert result.changes == resolve_multi(result.program, before)
    for section in result.program.sections:
        assert isinstance(section, CreateFile) or section.file in (1, 2)
    assert result.stats.generated_tokens <= 120


def test_a_spent_budget_closes_the_program_and_says_so(tiny_qwen) -> None:
    before, after = moves("python", 1)[0]
    program = oracle_multi(before, after)
    result = MultiDecoder(tiny_qwen, max_new_tokens=5).edit(before, INSTRUCTION, program=program)
    assert result.stats.truncated
    assert result.changes == resolve_multi(result.program, before)


def test_a_set_cancel_event_stops_the_decode(tiny_qwen) -> None:
    before, _ = moves("python", 1)[0]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        MultiDecoder(tiny_qwen).edit(before, INSTRUCTION, cancel=cancel)


def test_editable_must_name_some_of_the_files(tiny_qwen) -> None:
    with pytest.raises(ValueError, match="between 1 and 2"):
        MultiDecoder(tiny_qwen).edit({"a": "x\n", "b": "y\n"}, INSTRUCTION, editable=3)


def test_dropped_lines_of_finished_sections_are_drafted_as_moves() -> None:
    program = MultiProgram(
        (
            EditFile(1, (CopyLines(1, 3), CopyLines(9, 12), CopyLines(20, 20))),
            DeleteFile(3),
            EditFile(2, (CopyLines(1, 1),)),
        )
    )
    assert MultiDrafter.gaps(program) == [(1, 4, 8), (1, 13, 19)]
    taken = MultiProgram(
        (*program.sections[:2], EditFile(2, (CopyFrom(1, CopyLines(4, 8)),)), EditFile(4, ()))
    )
    assert MultiDrafter.gaps(taken) == [(1, 13, 19)]


def test_rewriting_several_files_drafts_moved_code_from_the_file_it_left(tiny_qwen) -> None:
    from cad.selector.multi_rewrite import draft_source, rewrite_files

    before, after = moves("python", 1)[0]
    kept = {path: after[path] for path in ("a.py", "b.py")}
    result = rewrite_files(tiny_qwen, before, INSTRUCTION, editable=2, targets=kept)
    assert result.changes == kept
    assert not result.stats.truncated
    encode = tiny_qwen.tokenizer.encode
    source = draft_source(Workspace(before), 2, encode)
    assert source[: len(encode(before["b.py"]))] == encode(before["b.py"])
    assert len(source) == sum(len(encode(text)) for text in before.values())
    output = len(tiny_qwen.tokenizer.encode(after["a.py"] + after["b.py"]))
    assert result.stats.forwards < output / 2


def test_rewriting_several_files_cut_short_says_so(tiny_qwen) -> None:
    from cad.selector.multi_rewrite import rewrite_files

    before, _ = moves("python", 1)[0]
    result = rewrite_files(tiny_qwen, before, INSTRUCTION, editable=1, max_new_tokens=4)
    assert result.stats.truncated
    assert list(result.changes) == ["a.py"]
