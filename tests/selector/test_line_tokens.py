"""Copies of lines read off the document's tokens equal the tokenizer's tokens of their text:
on real files and on hypothesis-made documents full of blank lines, white space of every
kind, line-break kinds and added tokens; tokenizers that do not cut at line starts are
refused."""

from __future__ import annotations

import copy
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad.grammar import ProgramTokenIndex
from cad.resolver import CopyLines, Document, op_text, oracle
from cad.selector.decoder import replay_forced
from cad.selector.line_tokens import BLANK, LineTokens, is_solid, splits_at_line_starts
from cad.selector.program_tokens import DocumentTokens
from tests.conftest import heval_pairs

REPOSITORY = Path(__file__).resolve().parents[2]
REAL_FILES = ("resolver/document.py", "selector/rewrite.py", "README.md", "extension/package.json")


def _encoder(tokenizer):
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


def _line_tokens(tokenizer, index, document: Document, ids: list[int]) -> LineTokens | None:
    return LineTokens.of(tokenizer, index, document, DocumentTokens.of(index, document, ids))


def _lines_of(tokenizer, text: str) -> tuple[Document, LineTokens | None]:
    document = Document(text)
    index = ProgramTokenIndex.for_tokenizer(tokenizer, len(tokenizer))
    return document, _line_tokens(tokenizer, index, document, _encoder(tokenizer)(text))


def _assert_every_copy_exact(tokenizer, text: str, *, longest: int = 0) -> None:
    """Every copy of ``text``'s lines (of at most ``longest`` lines, 0: any) is exact."""
    encode = _encoder(tokenizer)
    document, lines = _lines_of(tokenizer, text)
    if lines is None:
        assert tokenizer.backend_tokenizer.normalizer, "only unnormalized text is refused"
        assert not unicodedata.is_normalized("NFC", text)
        return
    n = document.n_lines
    for first in range(1, n + 1):
        for last in range(first, min(n, first + longest - 1 if longest else n) + 1):
            expected = encode(op_text(CopyLines(first, last), document))
            assert lines.copy_tokens(first, last, encode) == expected, (first, last)


@pytest.fixture(scope="module")
def nfc_tokenizer(qwen2_tokenizer):
    """Qwen2's tokenizer with the NFC normalizer some of its releases ship."""
    from tokenizers import normalizers

    nfc = copy.deepcopy(qwen2_tokenizer)
    nfc.backend_tokenizer.normalizer = normalizers.NFC()
    return nfc


@pytest.fixture(params=["qwen2", "llama3", "qwen2-nfc"])
def tokenizer(request, qwen2_tokenizer, llama3_tokenizer, nfc_tokenizer):
    return {"qwen2": qwen2_tokenizer, "llama3": llama3_tokenizer, "qwen2-nfc": nfc_tokenizer}[
        request.param
    ]


def test_both_fixture_tokenizers_cut_at_line_starts(tokenizer) -> None:
    assert splits_at_line_starts(tokenizer)


@pytest.mark.parametrize("name", REAL_FILES)
def test_copies_of_real_files_equal_their_text_tokenized(tokenizer, name: str) -> None:
    text = (REPOSITORY / name).read_text()
    _assert_every_copy_exact(tokenizer, text, longest=12)


def test_copies_of_heval_documents_equal_their_text_tokenized(tokenizer) -> None:
    for before, after in heval_pairs("python")[:8] + heval_pairs("js")[:4]:
        _assert_every_copy_exact(tokenizer, before)
        _assert_every_copy_exact(tokenizer, after)


PIECES = st.sampled_from(
    [
        " ", "    ", "\t", "\x0b", "\x0c", "\xa0", "\u3000", "\x85", "\u2028", "\u200b", "\ufeff",
        "\x1c", "def", " f", "(x):", "  return", " 42", "1234567", "'s", "'ll", "\"\"\"", "}", "{",
        ")", ";", "é", "e\u0301", "\u0301x", "日本", "😀",
    ]
)  # fmt: skip
LINES = st.builds(
    lambda pieces, end: "".join(pieces) + end,
    st.lists(PIECES, max_size=6),
    st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"]),
)
"""Lines of code-like pieces and every kind of white space, blank ones often."""


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, min_size=1, max_size=14), st.lists(PIECES, max_size=3))
def test_copies_of_made_up_documents_equal_their_text_tokenized(
    qwen2_tokenizer, llama3_tokenizer, nfc_tokenizer, lines: list[str], last: list[str]
) -> None:
    text = "".join(lines) + "".join(last)
    for tokenizer in (qwen2_tokenizer, llama3_tokenizer, nfc_tokenizer):
        _assert_every_copy_exact(tokenizer, text)


def test_blank_holds_every_character_python_calls_white_space() -> None:
    spaces = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert spaces <= set(BLANK)
    assert not any(c.isalnum() for c in BLANK)


def test_solid_lines() -> None:
    assert is_solid("x\n") and is_solid("  \t}\r\n") and is_solid("   ")
    assert not is_solid("\n") and not is_solid(" \t\u3000\r\n") and not is_solid("\u200b\r")


def test_copies_across_blank_lines_only_tokenize_the_blank_ends(qwen2_tokenizer) -> None:
    text = "a = 1\n\n\nb = 2\nc = 3\n\n\n\nd = 4\n"
    calls: list[str] = []

    def encode(piece: str) -> list[int]:
        calls.append(piece)
        return qwen2_tokenizer.encode(piece, add_special_tokens=False)

    document, lines = _lines_of(qwen2_tokenizer, text)
    assert lines is not None
    expected = encode(op_text(CopyLines(2, 7), document))
    calls.clear()
    assert lines.copy_tokens(2, 7, encode) == expected
    assert calls == ["\n\n", "c = 3\n\n\n"]
    calls.clear()
    lines.copy_tokens(4, 8, encode)
    assert calls == []


def test_other_tokenizers_and_documents_are_refused(qwen2_tokenizer) -> None:
    from tokenizers import normalizers, pre_tokenizers

    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))
    document = Document("x = 1\ny = 2\n")
    ids = _encoder(qwen2_tokenizer)(document.text)
    byte_level = copy.deepcopy(qwen2_tokenizer)
    byte_level.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(use_regex=True)
    lowered = copy.deepcopy(qwen2_tokenizer)
    lowered.backend_tokenizer.normalizer = normalizers.Lowercase()
    for other in (byte_level, lowered, object()):
        assert not splits_at_line_starts(other)
        assert _line_tokens(other, index, document, ids) is None
    assert _line_tokens(qwen2_tokenizer, index, document, ids[:-1]) is None
    special = Document("x = 1\n<|endoftext|>\ny = 2\n")
    special_ids = _encoder(qwen2_tokenizer)(special.text)
    assert _line_tokens(qwen2_tokenizer, index, special, special_ids) is None
    assert _line_tokens(qwen2_tokenizer, index, Document(""), []) is None


def test_replays_read_copies_off_the_document_without_changing_a_forward(qwen2_tokenizer) -> None:
    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))
    encode = _encoder(qwen2_tokenizer)
    for before, after in heval_pairs("python")[:12]:
        program = oracle(before, after)
        plain = replay_forced(index, encode, before, program, budget=96)
        read = replay_forced(index, encode, before, program, budget=96, tokenizer=qwen2_tokenizer)
        assert read == plain


def test_multi_file_tapes_read_copies_off_each_file_without_changing_a_token(
    qwen2_tokenizer,
) -> None:
    from cad.resolver import Workspace, oracle_multi
    from cad.selector import follow_multi_program
    from tests.selector.test_multi_decoder import moves

    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))
    encode = _encoder(qwen2_tokenizer)
    for before, after in moves("python", 4):
        workspace = Workspace(before)
        lines = [
            _line_tokens(qwen2_tokenizer, index, doc, encode(doc.text))
            for doc in workspace.documents
        ]
        for granularity in ("line", "subline"):
            program = oracle_multi(before, after, granularity=granularity)
            plain = follow_multi_program(index, encode, workspace, program)
            read = follow_multi_program(index, encode, workspace, program, lines=lines)
            assert read.tokens == plain.tokens
            assert read.decided == plain.decided
            assert read.stats == plain.stats


def test_the_python_tape_reads_copies_off_the_document_without_changing_a_token(
    qwen2_tokenizer,
) -> None:
    from cad.resolver import format_program
    from cad.selector.tape import ProgramTape

    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))
    encode = _encoder(qwen2_tokenizer)
    for before, after in heval_pairs("python")[:8]:
        document, lines = _lines_of(qwen2_tokenizer, before)
        target = format_program(oracle(before, after)).encode("utf-8")
        tapes = [
            ProgramTape(index, encode, document),
            ProgramTape(index, encode, document, lines=lines),
        ]
        for tape in tapes:
            tape.take_forced()
            while not tape.finished:
                tape.decide(tape.target_token(target))
                tape.take_forced()
        assert tapes[1].tokens == tapes[0].tokens
        assert tapes[1].stats == tapes[0].stats
