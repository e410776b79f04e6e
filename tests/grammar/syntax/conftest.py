"""Shared fixtures for the language grammars: a small vocabulary (every byte plus tokens
that matter for Python, JSON and the program language, so masks are cheap to compare with
brute force) and the real Qwen2 vocabulary."""

from __future__ import annotations

import sys

import pytest

from cad.grammar.syntax.python_syntax import SUPPORTED_VERSIONS
from cad.grammar.vocab import Vocabulary

RUNNING = sys.version_info[:2] if sys.version_info[:2] in SUPPORTED_VERSIONS else (3, 13)
"""The Python version whose ``ast.parse`` is the reference in these tests."""

_WORDS = [
    "def", " def", "return", " return", "class", " class", "import", " import", "from",
    " from", "if", " if", " else", "else", "elif", "for", " for", " in", "while", "with",
    " as", "try", "except", "finally", "lambda", " lambda", "async", "await", "yield",
    "pass", "match", "case", "type", "_", " _", "self", "(self", ".append", "x", " x", "y",
    " y", "é", "π", "None", "True", " not", " and", " or", " is",
]  # fmt: skip
_SYMBOLS = [
    "    ", "        ", "\n", "\n    ", "\n        ", "\n\n", "\n\n\n", "\r\n", "\t", "\n\t",
    "):", "):\n", "()", "())", "(", ")", "[", "]", "{", "}", "[]", "{}", ":", ":\n", ",",
    ", ", " =", "=", " ==", " +", " -", "*", "**", "//", "->", ":=", "...", "..", ".", ";",
    "'", '"', '"""', "'''", 'f"', "f'", 'f"{', "rb'", 'b"', "{x}", "!r", "1", "0", "12",
    "123", "1e", "1j", "0x", "0x1f", "#", "# note", "\\\n", " \\\n", "\\", "@", "%", "~",
    '": ', '",', '{"', '"}', "[1", "true", "false", "null", " 1", "-1", "2.5",
]  # fmt: skip
_PROGRAM = [
    '<copy lines="', "<copy", " lines", '="', '"/>', '"/>\n', "<gen>", "</gen>", "</gen>\n",
    "</program>", "</", "<", "gen", ">", "/gen>", "1-", "-1", "<\\/", "<\\", "<gen>def",
    "x</gen>\n", "program", "/", "-",
]  # fmt: skip


def small_vocabulary() -> Vocabulary:
    """Every single byte, then the tokens above, then an end-of-sequence id."""
    pieces: list[bytes | None] = [bytes([b]) for b in range(256)]
    seen = set(pieces)
    for text in _WORDS + _SYMBOLS + _PROGRAM:
        data = text.encode()
        if data not in seen:
            seen.add(data)
            pieces.append(data)
    pieces.append(None)
    return Vocabulary(tuple(pieces), len(pieces) - 1)


@pytest.fixture(scope="session")
def small_vocab() -> Vocabulary:
    return small_vocabulary()


@pytest.fixture(scope="session")
def qwen2_vocab(qwen2_tokenizer) -> Vocabulary:
    return Vocabulary.from_tokenizer(qwen2_tokenizer)
