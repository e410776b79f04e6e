"""Round-trip invariants over arbitrary texts, every line-ending mix and unicode."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cad.resolver import (
    CopyLines,
    CopySpan,
    Gen,
    IncrementalResolver,
    Program,
    format,
    oracle,
    parse,
    resolve,
    split_lines,
)

_ALPHABET = st.sampled_from(
    ["a", "b", " ", "\t", "\n", "\r", "\r\n", "é", "中", "\ufeff", "<", "/gen>", "\\", "\x0c"]
)
texts = st.lists(_ALPHABET, max_size=40).map("".join)
line_texts = st.lists(
    st.sampled_from(["x\n", "y\n", "x\r\n", "z\r", "", "é\n", "  x\n", "\n", "w"]), max_size=25
).map("".join)

ops = st.one_of(
    st.builds(lambda a, b: CopyLines(min(a, b), max(a, b)), st.integers(1, 50), st.integers(1, 50)),
    st.builds(
        lambda a, b: CopySpan(*min(a, b), *max(a, b)),
        st.tuples(st.integers(1, 9), st.integers(1, 9)),
        st.tuples(st.integers(1, 9), st.integers(1, 9)),
    ),
    st.builds(Gen, texts),
)
programs = st.lists(ops, max_size=8).map(lambda o: Program(tuple(o)))


@settings(max_examples=300, deadline=None)
@given(before=texts, after=texts, granularity=st.sampled_from(["line", "subline"]))
def test_oracle_round_trips_arbitrary_text(before: str, after: str, granularity: str) -> None:
    program = oracle(before, after, granularity=granularity)
    assert resolve(program, before) == after
    assert parse(format(program)) == program


@settings(max_examples=300, deadline=None)
@given(before=line_texts, after=line_texts, min_copy=st.integers(1, 3))
def test_oracle_round_trips_line_structured_text(before: str, after: str, min_copy: int) -> None:
    for granularity in ("line", "subline"):
        program = oracle(before, after, granularity=granularity, min_copy=min_copy)
        assert resolve(program, before) == after


@settings(max_examples=300, deadline=None)
@given(program=programs)
def test_parse_inverts_format(program: Program) -> None:
    assert parse(format(program)) == program


@settings(max_examples=200, deadline=None)
@given(before=line_texts, after=line_texts)
def test_incremental_resolver_matches_resolve(before: str, after: str) -> None:
    program = oracle(before, after, granularity="subline")
    incremental = IncrementalResolver(before)
    produced = "".join(incremental.push(op) for op in program.ops)
    assert produced == incremental.text == resolve(program, before) == after


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_split_lines_is_exact(text: str) -> None:
    lines = split_lines(text)
    assert "".join(lines) == text
    assert all(line for line in lines)
    for line in lines:
        body = line.removesuffix("\r\n").removesuffix("\n").removesuffix("\r")
        assert "\r" not in body and "\n" not in body
    assert all(line.endswith(("\n", "\r")) for line in lines[:-1])
