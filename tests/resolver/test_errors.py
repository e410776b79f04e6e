"""Every malformed program and every bad span is a ProgramError with position, expected, found."""

from __future__ import annotations

import pytest

from cad.resolver import (
    CopyLines,
    CopySpan,
    Gen,
    IncrementalResolver,
    Program,
    ProgramError,
    parse,
    resolve,
)


@pytest.mark.parametrize(
    ("text", "position", "expected_fragment"),
    [
        ("", 0, "'</program>'"),
        ('<copy lines="1-2"/>', 19, "'</program>'"),
        ('<copy lines="0-2"/></program>', 13, "a number"),
        ('<copy lines="01-2"/></program>', 13, "a number"),
        ('<copy lines="2-1"/></program>', 0, "an end line >= 2"),
        ('<copy lines="1_2"/></program>', 14, "'-'"),
        ('<copy lines="1-2"></program>', 16, "'\"/>'"),
        ('<copy lines="1-2" /></program>', 16, "'\"/>'"),
        ('<copy span="1:2-1"/></program>', 17, "':'"),
        ('<copy span="2:1-1:5"/></program>', 0, "an end at or after 2:1"),
        ("<gen>abc</program>", 18, "'</gen>'"),
        ('<del lines="1-2"/></program>', 0, "'<copy', '<gen>' or '</program>'"),
        ("hello</program>", 0, "'<copy', '<gen>' or '</program>'"),
        ("</program> trailing", 11, "nothing after"),
    ],
)
def test_parse_errors_carry_position_expected_found(
    text: str, position: int, expected_fragment: str
) -> None:
    with pytest.raises(ProgramError) as info:
        parse(text)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.position == position
    assert expected_fragment in error.expected
    assert error.found
    assert expected_fragment in str(error)


@pytest.mark.parametrize(
    ("op", "document", "expected_fragment"),
    [
        (CopyLines(1, 4), "a\nb\nc\n", "lines within 1-3"),
        (CopyLines(4, 4), "a\nb\nc\n", "lines within 1-3"),
        (CopyLines(3, 2), "a\nb\nc\n", "lines within 1-3"),
        (CopyLines(1, 1), "", "no copy"),
        (CopySpan(1, 1, 1, 3), "ab\n", "columns within 1-3"),
        (CopySpan(1, 1, 1, 4), "ab\n", "columns within 1-3 on line 1"),
        (CopySpan(2, 1, 2, 1), "ab", "lines within 1-1"),
        (CopySpan(1, 2, 1, 1), "ab\n", "an end at or after the start"),
    ],
)
def test_resolve_never_clamps(op, document: str, expected_fragment: str) -> None:
    program = Program((Gen("x"), op))
    if expected_fragment == "columns within 1-3":
        assert resolve(program, document) == "xab\n"
        return
    with pytest.raises(ProgramError) as info:
        resolve(program, document)
    assert info.value.op_index == 1
    assert expected_fragment in info.value.expected
    assert "op 2" in str(info.value)


def test_incremental_resolver_rejects_bad_op_without_changing_state() -> None:
    resolver = IncrementalResolver("a\nb\n")
    assert resolver.push(CopyLines(2, 2)) == "b\n"
    with pytest.raises(ProgramError):
        resolver.push(CopyLines(2, 3))
    assert resolver.text == "b\n"
    assert resolver.push(Gen("c")) == "c"
    assert resolver.program == Program((CopyLines(2, 2), Gen("c")))


def test_whitespace_between_ops_is_free_but_not_inside_tags() -> None:
    program = parse(' \r\n\t<copy lines="1-1"/>  <gen>x</gen>\n\n</program>\n')
    assert program == Program((CopyLines(1, 1), Gen("x")))


def test_escaped_closing_tag_round_trips() -> None:
    assert parse("<gen>a<\\/gen>b<\\\\/gen></gen></program>") == Program((Gen("a</gen>b<\\/gen>"),))
