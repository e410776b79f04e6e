"""The request body: read up to a size limit (413 past it, the rest drained and dropped),
measured for nesting and values before the parser sees it, and parsed without NaN, Infinity
or endless numbers; every refusal one line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable

import pytest

from cad.engine.body import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    MAX_JSON_VALUES,
    decode_body,
    read_body,
)
from cad.engine.protocol import EditError, parse_edit_request


class Chunks:
    """A body arriving in ``chunks``; counts what the reader consumed."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = list(chunks)
        self.consumed = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.consumed += 1
            yield chunk


def read(chunks: Chunks, declared: str | None = None, **limits: int) -> bytes:
    return asyncio.run(read_body(chunks, declared, **limits))


def refusal(call, *args, **kwargs) -> EditError:
    with pytest.raises(EditError) as caught:
        call(*args, **kwargs)
    assert "\n" not in caught.value.message
    return caught.value


def test_a_body_within_the_limit_is_read_whole() -> None:
    assert read(Chunks([b"ab", b"cd", b""]), "4", limit=4) == b"abcd"


def test_a_body_over_the_limit_is_drained_then_refused() -> None:
    chunks = Chunks([b"x" * 3] * 4)
    error = refusal(read, chunks, limit=5, drain=100)
    assert (error.status, error.code) == (413, "too_large")
    assert chunks.consumed == 4  # read to its end, so the client gets the answer
    assert "is 12 bytes, over the engine's limit of 5 bytes" in error.message


def test_a_body_far_over_the_limit_is_refused_without_reading_it() -> None:
    chunks = Chunks([b"x" * 3] * 4)
    error = refusal(read, chunks, "1000000", limit=5, drain=100)
    assert error.status == 413 and "is 1.0 MB" in error.message and chunks.consumed == 0
    chunks = Chunks([b"x" * 60] * 4)
    error = refusal(read, chunks, limit=5, drain=100)  # no declared length: stops at the drain
    assert error.status == 413 and chunks.consumed == 2 and "is over" in error.message


def test_the_default_limit_holds_a_document_at_the_text_limit() -> None:
    from cad.files import MAX_TEXT_BYTES

    body = json.dumps({"document": "\U0001f600" * (MAX_TEXT_BYTES // 4), "instruction": "x"})
    assert len(body) < MAX_BODY_BYTES
    assert parse_edit_request(decode_body(body.encode())).document.startswith("\U0001f600")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[" * 100_000, "more than"),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "deeper than"),
        (b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1), "deeper than"),
        (b"[" + b"0," * MAX_JSON_VALUES + b"0]", f"more than {MAX_JSON_VALUES}"),
        (b'{"document": "a", "x": NaN}', "NaN, which is not a JSON number"),
        (b'{"temperature": Infinity}', "Infinity"),
        (b'{"temperature": -Infinity}', "-Infinity"),
        (b'{"temperature": 1e999}', "too large for a number"),
        (b'{"seed": ' + b"9" * 5000 + b"}", "5000 digits"),
        (b'{"document": "\xff"}', "not UTF-8 (byte 14)"),
        (b'\xef\xbb\xbf{"document": "a"}', "not valid JSON"),
        (b'{"document": "a"', "not valid JSON"),
        (b"", "not valid JSON"),
        (b'"' + b'\\"' * 1000, "not valid JSON"),
        (b'{"a": "\\', "not valid JSON"),
    ],
)
def test_bodies_the_parser_never_sees(body: bytes, says: str) -> None:
    error = refusal(decode_body, body)
    assert error.status == 400 and error.code == "invalid_request" and says in error.message


def test_brackets_and_commas_inside_strings_do_not_count() -> None:
    text = "[{" * 5000 + "," * 5000 + '\\"[' * 100
    body = json.dumps({"document": text, "instruction": "x", "range": [1, 1], "extra": {"a": []}})
    assert decode_body(body.encode())["document"] == text


def test_nesting_up_to_the_limit_parses() -> None:
    value = decode_body(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)
    for _ in range(MAX_JSON_DEPTH - 1):
        value = value[0]
    assert value == []
