"""Snapping a line range to the smallest enclosing definition (tree-sitter)."""

from __future__ import annotations

import pytest

from cad.server.snap import language_of, snap_lines

PYTHON = """\
import os


@cache
@other(1)
def helper(x):
    y = x + 1
    return y


class Shape:
    \"\"\"A shape.\"\"\"

    def area(self):
        return 0

    @property
    def name(self):
        return "shape"


def outer():
    def inner():
        return 1

    return inner
"""

JAVASCRIPT = """\
import fs from "fs";

export function load(path) {
  const text = fs.readFileSync(path);
  return text;
}

const double = (x) => {
  return x * 2;
};

let legacy = function () {
  return 1;
};

class Counter {
  count = 0;

  increment() {
    this.count += 1;
    return this.count;
  }

  reset = () => {
    this.count = 0;
  };
}

const limit = 10;
"""


def lines_of(text: str, first: int, last: int) -> str:
    return "".join(text.splitlines(keepends=True)[first : last + 1])


@pytest.mark.parametrize(
    ("first", "last", "expected_first_line", "expected_last_line"),
    [
        (6, 6, "@cache\n", "    return y\n"),
        (3, 3, "@cache\n", "    return y\n"),
        (14, 14, "    def area(self):\n", "        return 0\n"),
        (18, 18, "    @property\n", '        return "shape"\n'),
        (14, 17, "class Shape:\n", '        return "shape"\n'),
        (23, 23, "    def inner():\n", "        return 1\n"),
        (25, 25, "def outer():\n", "    return inner\n"),
    ],
)
def test_python_ranges_snap_to_the_smallest_definition(
    first: int, last: int, expected_first_line: str, expected_last_line: str
) -> None:
    start, end = snap_lines(PYTHON, "python", first, last)
    lines = PYTHON.splitlines(keepends=True)
    assert lines[start] == expected_first_line
    assert lines[end] == expected_last_line
    assert start <= first and end >= last


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        (
            3,
            3,
            "export function load(path) {\n  const text = fs.readFileSync(path);\n  return text;\n}\n",
        ),
        (8, 8, "const double = (x) => {\n  return x * 2;\n};\n"),
        (12, 12, "let legacy = function () {\n  return 1;\n};\n"),
        (19, 20, "  increment() {\n    this.count += 1;\n    return this.count;\n  }\n"),
        (24, 24, "  reset = () => {\n    this.count = 0;\n  };\n"),
    ],
)
def test_javascript_ranges_snap_to_the_smallest_definition(
    first: int, last: int, expected: str
) -> None:
    start, end = snap_lines(JAVASCRIPT, "javascript", first, last)
    assert lines_of(JAVASCRIPT, start, end) == expected


def test_a_range_across_two_methods_snaps_to_their_class() -> None:
    start, end = snap_lines(JAVASCRIPT, "javascript", 16, 20)
    assert lines_of(JAVASCRIPT, start, end).startswith("class Counter {\n")
    assert lines_of(JAVASCRIPT, start, end).endswith("  };\n}\n")


@pytest.mark.parametrize(
    ("text", "language", "first", "last"),
    [
        (PYTHON, "python", 0, 0),
        (PYTHON, "python", 5, 12),
        (JAVASCRIPT, "javascript", 28, 28),
        (JAVASCRIPT, "javascript", 0, 3),
        (PYTHON, None, 6, 6),
        ("", "python", 0, 0),
        (PYTHON, "python", 500, 501),
    ],
)
def test_ranges_outside_any_definition_or_language_stay(
    text: str, language: str | None, first: int, last: int
) -> None:
    assert snap_lines(text, language, first, last) == (first, last)


def test_lines_count_crlf_cr_and_multibyte_text_like_the_document() -> None:
    text = "x = '😀'\r\ndef f():\r    y = 'é'\r\n    return y\r\nz = 1\r\n"
    assert snap_lines(text, "python", 2, 2) == (1, 3)


def test_broken_syntax_still_snaps_the_intact_definitions() -> None:
    text = "def good():\n    return 1\n\n\ndef bad(:\n    pass\n"
    assert snap_lines(text, "python", 1, 1) == (0, 1)


@pytest.mark.parametrize(
    ("language_id", "uri", "expected"),
    [
        ("python", "file:///a/b.txt", "python"),
        ("javascriptreact", "file:///a/b", "javascript"),
        ("", "file:///a/b.py", "python"),
        (None, "file:///a/My%20Module.MJS", "javascript"),
        ("plaintext", "untitled:Untitled-1", None),
        ("rust", "file:///a/lib.rs", None),
    ],
)
def test_language_comes_from_the_language_id_then_the_extension(
    language_id: str | None, uri: str, expected: str | None
) -> None:
    assert language_of(language_id, uri) == expected
