"""The ``/v1/cad/edit`` request: every field checked, every problem one HTTP 400 that names
the field; ranges split and splice the document like the language server does."""

from __future__ import annotations

import pytest

from cad.engine.protocol import MAX_NEW_TOKENS, MAX_SEED, EditError, parse_edit_request, splice
from cad.files import MAX_TEXT_BYTES
from cad.resolver import CopyLines, Gen
from cad.selector import Sampling

DOCUMENT = "a\nb\nc\nd\n"


def test_a_full_request() -> None:
    request = parse_edit_request(
        {
            "document": DOCUMENT,
            "instruction": "swap",
            "mode": "program",
            "range": [2, 3],
            "program": '<copy lines="2-2"/>\n<gen>x\n</gen>\n</program>',
            "max_new_tokens": 64,
            "draft_budget": 32,
            "subline": True,
            "temperature": 0.5,
            "top_p": 0.9,
            "seed": 7,
            "model": "m",
            "adapter": "selector",
            "stream": True,
        }
    )
    assert request.lines == (2, 3)
    assert request.program is not None and request.program.ops == (CopyLines(2, 2), Gen("x\n"))
    assert request.sampling == Sampling(0.5, 0.9, 7)
    assert (request.max_new_tokens, request.subline, request.stream) == (64, True, True)
    assert request.draft_budget == 32
    assert (request.model, request.adapter) == ("m", "selector")
    assert request.region() == ("a\n", "b\nc\n", "d\n")


def test_defaults() -> None:
    request = parse_edit_request({"document": DOCUMENT, "instruction": "x"})
    assert request.mode == "program" and request.lines is None and request.program is None
    assert request.region() == ("", DOCUMENT, "")
    assert request.sampling == Sampling() and not request.stream
    assert request.draft_budget is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([], "JSON object"),
        ({"instruction": "x"}, "'document'"),
        ({"document": DOCUMENT}, "'instruction'"),
        ({"document": DOCUMENT, "instruction": " "}, "'instruction'"),
        ({"document": DOCUMENT, "instruction": "x", "mode": "fast"}, "'mode'"),
        ({"document": DOCUMENT, "instruction": "x", "range": [3, 2]}, "'range'"),
        ({"document": DOCUMENT, "instruction": "x", "range": [1, 9]}, "has 4 lines"),
        ({"document": DOCUMENT, "instruction": "x", "range": "1-2"}, "'range'"),
        ({"document": DOCUMENT, "instruction": "x", "max_new_tokens": 0}, "'max_new_tokens'"),
        ({"document": DOCUMENT, "instruction": "x", "max_new_tokens": True}, "'max_new_tokens'"),
        ({"document": DOCUMENT, "instruction": "x", "top_p": 0}, "'top_p'"),
        ({"document": DOCUMENT, "instruction": "x", "stream": "yes"}, "'stream'"),
        ({"document": DOCUMENT, "program": "<copy"}, "fix the program"),
        ({"document": DOCUMENT, "mode": "rewrite", "program": "</program>"}, "program mode"),
        ({"document": DOCUMENT, "instruction": "x", "temperature": float("nan")}, "finite"),
        ({"document": DOCUMENT, "instruction": "x", "temperature": float("inf")}, "finite"),
        ({"document": DOCUMENT, "instruction": "x", "top_p": float("nan")}, "finite"),
        ({"document": DOCUMENT, "instruction": "x", "temperature": 10**400}, "finite"),
        ({"document": DOCUMENT, "instruction": "x", "temperature": "hot"}, "'temperature'"),
        ({"document": DOCUMENT, "instruction": "x", "temperature": 2.5}, "from 0 to 2 .* not 2.5"),
        ({"document": DOCUMENT, "instruction": "x", "temperature": -0.1}, "from 0 to 2"),
        ({"document": DOCUMENT, "instruction": "x", "seed": 2**70}, "'seed' must be an integer"),
        ({"document": DOCUMENT, "instruction": "x", "seed": -1}, "'seed'"),
        ({"document": DOCUMENT, "instruction": "x", "seed": 1.5}, "'seed' must be int"),
        ({"document": DOCUMENT, "instruction": "x", "max_new_tokens": 2**70}, "'max_new_tokens'"),
        ({"document": DOCUMENT, "instruction": "x", "range": [1, 2**70]}, "has 4 lines"),
        ({"document": DOCUMENT, "instruction": "x", "range": [1, 2.0]}, "'range'"),
        ({"document": DOCUMENT, "instruction": ["x"]}, "'instruction' must be str"),
        ({"document": DOCUMENT, "instruction": "x", "subline": 1}, "'subline' must be bool"),
        ({"document": DOCUMENT, "instruction": "x", "model": {"name": "m"}}, "'model'"),
        ({"document": 7, "instruction": "x"}, "'document'"),
        ({"document": "a\ud800b\n", "instruction": "x"}, "surrogate on line 1"),
        ({"document": "a\nb\udfff\n", "instruction": "x"}, "surrogate on line 2"),
        ({"document": DOCUMENT, "instruction": "\ud800"}, "'instruction' holds a lone"),
        ({"document": DOCUMENT, "instruction": "x", "mode": "f" * 10**6}, "'mode' is 'fff"),
        ({"document": DOCUMENT, "instruction": "x", "draft_budget": 8}, "given 'program' only"),
        ({"document": DOCUMENT, "program": "</program>", "draft_budget": -1}, "'draft_budget'"),
        ({"document": DOCUMENT, "program": "</program>", "draft_budget": 5000}, "0 to 4096"),
        ({"document": DOCUMENT, "program": "</program>", "draft_budget": 1.5}, "'draft_budget'"),
    ],
)
def test_bad_requests_name_the_field(body, says: str) -> None:
    with pytest.raises(EditError, match=says) as caught:
        parse_edit_request(body)
    assert caught.value.status == 400
    assert caught.value.to_json()["error"]["message"] == caught.value.message


def test_limits_are_inclusive() -> None:
    request = parse_edit_request(
        {
            "document": "a" * MAX_TEXT_BYTES,
            "instruction": "x",
            "seed": MAX_SEED,
            "max_new_tokens": MAX_NEW_TOKENS,
        }
    )
    assert request.sampling.seed == 2**63 - 1 and request.max_new_tokens == 2**31 - 1


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("document", "a" * (MAX_TEXT_BYTES + 1)),
        ("document", "\u00e9" * (MAX_TEXT_BYTES // 2 + 1)),  # under the limit in characters
        ("program", "x" * (MAX_TEXT_BYTES + 1)),
        ("instruction", "x" * (MAX_TEXT_BYTES + 1)),
        ("adapter", "x" * 5000),
    ],
)
def test_text_over_the_size_limit_is_413(field: str, text: str) -> None:
    with pytest.raises(EditError, match=f"'{field}' is .* over the engine's limit") as caught:
        parse_edit_request({"document": "a\n", "instruction": "x", field: text})
    assert (caught.value.status, caught.value.code) == (413, "too_large")
    assert "\n" not in caught.value.message


def test_splice_keeps_the_line_break_of_the_range() -> None:
    assert splice("a\n", "b\n", "B", "c\n") == "a\nB\nc\n"
    assert splice("a\n", "b\r\n", "B", "c\n") == "a\nB\r\nc\n"
    assert splice("a\n", "b\n", "", "c\n") == "a\nc\n"
    assert splice("a\n", "b", "B", "") == "a\nB"
