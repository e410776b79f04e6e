"""The request body of the ``/v1/cad`` routes, read and decoded within fixed bounds.

A body is read in chunks, never holding more than :data:`MAX_BODY_BYTES` of it, and one
over that size is refused (413) before anything parses it. Its JSON is then measured by a linear scan that skips strings: a body
nested deeper than :data:`MAX_JSON_DEPTH` or holding more than :data:`MAX_JSON_VALUES` values
is refused (400) before the parser sees it, since the parser recurses once per level and
builds one object per value. ``NaN``, ``Infinity``, numbers too large for a float and
integers longer than :data:`MAX_NUMBER_DIGITS` digits are refused while parsing. Every refusal
is one line. Nothing here imports vLLM.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterable
from typing import Any, NoReturn

from cad.engine.protocol import EditError, bad_request
from cad.files import MAX_TEXT_BYTES, describe_size

MAX_BODY_BYTES = 6 * MAX_TEXT_BYTES + 64 * 1024
"""Room for a document and a program at the text limit each, JSON-escaped (``\\uXXXX``
escapes at most triple the UTF-8 size of text without control characters), and the other
fields."""

MAX_DRAINED_BYTES = 4 * MAX_BODY_BYTES
"""A body over the limit is still read (and dropped) up to this size before the refusal, since
HTTP clients send the whole body before they read the answer."""

MAX_JSON_DEPTH = 16
"""An edit is a flat object with one list in it; nesting this deep is never an edit."""

MAX_JSON_VALUES = 1024
"""An edit has about a dozen fields; this leaves room for fields a newer client adds."""

MAX_NUMBER_DIGITS = 64
"""No field takes a number this long; longer ones would only cost time to convert."""

# A JSON string, or an unterminated one running to the end: every byte is scanned once.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class _BadNumber(ValueError):
    """A number the body may not hold; the message says which and why."""


def too_large(size: int | None, limit: int) -> EditError:
    """The 413 answer for a body over ``limit`` bytes (``size``: how large, when known)."""
    how_large = "is over" if size is None else f"is {describe_size(size)}, over"
    return EditError(
        413,
        "too_large",
        f"the request body {how_large} the engine's limit of {describe_size(limit)}; "
        "edit a smaller part of the file",
    )


async def read_body(
    chunks: AsyncIterable[bytes],
    declared_length: str | None,
    limit: int = MAX_BODY_BYTES,
    drain: int = MAX_DRAINED_BYTES,
) -> bytes:
    """The body from its ``chunks``, never holding more than ``limit`` bytes of it. A larger
    body is refused (413) once read to its end, up to ``drain`` bytes and without keeping
    them, so that a client still sending gets the answer rather than a reset connection; a
    body declared or found larger than that is refused at once."""
    declared = int(declared_length) if (declared_length or "").strip().isdigit() else None
    if declared is not None and declared > drain:
        raise too_large(declared, limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size <= limit:
            parts.append(chunk)
        elif size > drain:
            raise too_large(None, limit)
        else:
            parts.clear()
    if size > limit:
        raise too_large(size, limit)
    return b"".join(parts)


def check_shape(data: bytes) -> None:
    """Refuse a body nested deeper than :data:`MAX_JSON_DEPTH` or holding more than
    :data:`MAX_JSON_VALUES` values, without parsing it: strings are cut out first (one pass),
    and only what remains is counted. A body within the limits holds at most two strings per
    value, so cutting stops after that many and whatever follows counts as values."""
    skeleton = _STRING.sub(b'""', data, count=2 * MAX_JSON_VALUES + 2)
    values = skeleton.count(b",") + skeleton.count(b"[") + skeleton.count(b"{")
    if values > MAX_JSON_VALUES:
        raise bad_request(
            f"the body holds more than {MAX_JSON_VALUES} JSON values; send one edit object "
            "{document, instruction, ...}"
        )
    depth = 0
    for bracket in _BRACKET.finditer(skeleton):
        depth += 1 if bracket.group() in b"[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise bad_request(
                f"the body nests JSON deeper than {MAX_JSON_DEPTH} levels; send one edit "
                "object {document, instruction, ...}"
            )
        if depth < 0:
            return  # unbalanced: the parser names the error


def _constant(name: str) -> NoReturn:
    """``NaN`` and ``Infinity``, which Python's parser takes and JSON does not."""
    raise _BadNumber(f"the body holds {name}, which is not a JSON number; send a finite number")


def _float(text: str) -> float:
    """A float, refused when long or beyond a float's range (``1e999`` parses as infinity)."""
    if len(text) > MAX_NUMBER_DIGITS:
        raise _BadNumber(f"the body holds a number of {len(text)} characters; send a shorter one")
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(f"the body holds {text}, too large for a number; send a finite number")
    return value


def _int(text: str) -> int:
    """An integer of at most :data:`MAX_NUMBER_DIGITS` digits."""
    if len(text) > MAX_NUMBER_DIGITS:
        raise _BadNumber(f"the body holds a number of {len(text)} digits; send a shorter one")
    return int(text)


def decode_body(data: bytes) -> Any:
    """The JSON value of a body; every problem is one HTTP 400 line."""
    check_shape(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(
            f"the body is not UTF-8 (byte {exc.start}); send JSON encoded as UTF-8"
        ) from None
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _BadNumber as exc:
        raise bad_request(str(exc)) from None
    except ValueError as exc:
        raise bad_request(
            f"the body is not valid JSON ({exc}); send one JSON object {{document, "
            "instruction, ...}"
        ) from None
