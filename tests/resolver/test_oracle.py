"""The oracle is exact and minimal: fewest generated units, then fewest ops."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad.resolver import (
    CopyLines,
    CopySpan,
    Gen,
    format,
    oracle,
    parse,
    resolve,
    split_lines,
    token_pieces,
)
from tests.conftest import heval_pairs


def _occurs(source: list[str], run: list[str]) -> bool:
    return any(source[i : i + len(run)] == run for i in range(len(source) - len(run) + 1))


def _reference_cost(source: list[str], target: list[str], costs: list[int], min_copy: int):
    """Brute-force (generated cost, ops) over every segmentation of the target."""
    inf = (float("inf"), float("inf"))
    m = len(target)
    copy_end = [inf] * (m + 1)
    gen_end = [inf] * (m + 1)
    copy_end[0] = (0, 0)
    for end in range(1, m + 1):
        c = costs[end - 1]
        gen_end[end] = min(
            (copy_end[end - 1][0] + c, copy_end[end - 1][1] + 1),
            (gen_end[end - 1][0] + c, gen_end[end - 1][1]),
        )
        for start in range(0, end - min_copy + 1):
            if _occurs(source, target[start:end]):
                prev = min(copy_end[start], gen_end[start])
                copy_end[end] = min(copy_end[end], (prev[0], prev[1] + 1))
    return min(copy_end[m], gen_end[m])


def _program_cost(program, unit_cost) -> tuple[int, int]:
    return sum(unit_cost(op.text) for op in program.ops if isinstance(op, Gen)), len(program.ops)


small_lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "a\r\n", "d"]), max_size=9).map(
    "".join
)
small_chars = st.lists(st.sampled_from(list("abc\n")), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(before=small_lines, after=small_lines, min_copy=st.integers(1, 3))
def test_line_oracle_is_minimal(before: str, after: str, min_copy: int) -> None:
    source, target = split_lines(before), split_lines(after)
    expected = _reference_cost(source, target, [len(t) for t in target], min_copy)
    program = oracle(before, after, min_copy=min_copy)
    assert resolve(program, before) == after
    assert _program_cost(program, len) == expected


@settings(max_examples=400, deadline=None)
@given(before=small_chars, after=small_chars, min_copy=st.integers(1, 3))
def test_subline_oracle_is_minimal(before: str, after: str, min_copy: int) -> None:
    expected = _reference_cost(list(before), list(after), [1] * len(after), min_copy)
    program = oracle(before, after, granularity="subline", min_copy=min_copy)
    assert resolve(program, before) == after
    assert _program_cost(program, len) == expected


def test_whole_line_subline_copies_use_the_line_form() -> None:
    program = oracle("a\nb\nc\n", "b\nc\nX", granularity="subline")
    assert program.ops == (CopyLines(2, 3), Gen("X"))


def test_subline_copy_addresses_line_and_column() -> None:
    before = "def f(x):\n    return x + 1\n"
    after = "def f(x):\n    return x + 2\n"
    program = oracle(before, after, granularity="subline")
    assert any(isinstance(op, CopySpan) for op in program.ops)
    assert resolve(program, before) == after
    line_program = oracle(before, after)
    assert line_program.ops == (CopyLines(1, 1), Gen("    return x + 2\n"))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", ""),
        ("", "new\n"),
        ("old\n", ""),
        ("a\r\nb\r\n", "a\r\nX\r\nb\r\n"),
        ("a\rb\r", "b\ra\r"),
        ("a\nb\r\nc\rd", "d\nc\rb\r\na"),
        ("no final newline", "no final newline\n"),
        ("\ufeffbom\n", "\ufeffbom\nmore\n"),
        ("\tindent\n", "\t\tindent\n"),
        ("héllo 中文\n", "héllo 世界\n"),
        ("x</gen>y\n", "x</gen>y\nz</gen>\n"),
    ],
)
def test_byte_exact_edge_cases(before: str, after: str) -> None:
    for granularity in ("line", "subline"):
        program = oracle(before, after, granularity=granularity)
        text = format(program)
        assert resolve(parse(text), before).encode() == after.encode()


def test_token_pieces_tile_text_even_when_tokens_split_characters(qwen2_tokenizer) -> None:
    text = "emoji 🎉 and 中文 text\r\n"
    offsets = qwen2_tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)[
        "offset_mapping"
    ]
    assert "".join(token_pieces(text, offsets)) == text


@pytest.mark.parametrize("language", ["python", "js"])
def test_heval_fix_round_trips_exactly(language: str, qwen2_tokenizer) -> None:
    def pieces(text: str):
        return qwen2_tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)[
            "offset_mapping"
        ]

    pairs = heval_pairs(language)
    assert len(pairs) == 164
    for before, after in pairs:
        for granularity in ("line", "subline"):
            for tokens in (None, pieces):
                program = oracle(before, after, granularity=granularity, pieces=tokens)
                assert resolve(parse(format(program)), before) == after
