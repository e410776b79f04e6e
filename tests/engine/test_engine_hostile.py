"""The real engine against hostile requests: oversized bodies and documents, programs and
budgets beyond the model's length, invalid numbers, deep nesting, and a fuzz over every
field. Each is answered with one line (4xx, or 422 for an edit that ran out of room), never a
5xx, and the engine still serves an exact edit afterwards."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad.engine.body import MAX_BODY_BYTES, MAX_JSON_DEPTH
from cad.files import MAX_TEXT_BYTES
from cad.resolver import CopyLines, Program, format_program, oracle
from tests.conftest import heval_pairs

pytestmark = pytest.mark.engine
EDIT = "/v1/cad/edit"
LINES = "".join(f"line {i}\n" for i in range(1, 201))
MB = 1 << 20
SMALL = {"document": "a\nb\n", "program": '<copy lines="1-2"/>\n</program>', "max_new_tokens": 64}


def assert_serves_exact_edits(engine) -> None:
    """A forced edit of real code comes back byte-exact, and nothing is left running."""
    before, after = heval_pairs("python")[3]
    body = {"document": before, "instruction": "Fix the bug.", "program": ""}
    body["program"] = format_program(oracle(before, after))
    status, answer = engine.post(EDIT, body)
    assert status == 200 and answer["text"] == after
    assert json.loads(engine.get("/v1/cad/info"))["running_edits"] == 0


def assert_one_line_error(status: int, answer: dict, code: str | None = None) -> None:
    """A 4xx whose answer is one error: a code and a message of one line."""
    assert 400 <= status < 500, (status, answer)
    assert_answered(status, answer)
    assert "error" in answer and (code is None or answer["error"]["code"] == code), answer


def assert_answered(status: int, answer: dict) -> None:
    """Never a 5xx: an edit's result, or one error of one line (a streamed answer's last line
    comes with status 200)."""
    assert status < 500, (status, answer)
    if "error" not in answer:
        assert status == 200 and ("text" in answer or "result" in answer), answer
        return
    assert set(answer) == {"error"} and isinstance(answer["error"]["code"], str), answer
    message = answer["error"]["message"]
    assert isinstance(message, str) and message and "\n" not in message, message


def test_oversized_documents_and_bodies_are_refused(engine) -> None:
    huge = {"document": "x" * 23_000_000, "instruction": "x"}
    status, answer = engine.post(EDIT, huge)
    assert_one_line_error(status, answer, "too_large")
    assert answer["error"]["message"].startswith("'document' is 23.0 MB, over")
    over = b'{"document": "' + b"x" * MAX_BODY_BYTES + b'", "instruction": "x"}'
    status, answer = engine.post_bytes(EDIT, over)
    assert_one_line_error(status, answer, "too_large")
    assert answer["error"]["message"].startswith("the request body is 25.2 MB, over")
    chunks = (over[start : start + MB] for start in range(0, len(over), MB))
    status, answer = engine.post_bytes(EDIT, chunks, {"Transfer-Encoding": "chunked"})
    assert_one_line_error(status, answer, "too_large")
    at_limit = {"document": "x" * MAX_TEXT_BYTES, "instruction": "x", "mode": "rewrite"}
    status, answer = engine.post(EDIT, at_limit)
    assert_one_line_error(status, answer, "context_too_long")
    assert_serves_exact_edits(engine)


def test_programs_beyond_the_model_length_are_refused(engine) -> None:
    copies = format_program(Program((CopyLines(1, 200),) * 8))
    status, answer = engine.post(EDIT, {"document": LINES, "program": copies})
    assert_one_line_error(status, answer, "context_too_long")
    message = answer["error"]["message"]
    assert message.startswith("the edit needs ") and "copied" in message
    assert "the model's context is 4096 tokens; edit a smaller range" in message
    endless = format_program(Program((CopyLines(1, 200),) * 100_000))
    status, answer = engine.post(EDIT, {"document": LINES, "program": endless})
    assert_one_line_error(status, answer, "context_too_long")
    assert_serves_exact_edits(engine)


@pytest.mark.parametrize("stream", [False, True])
def test_free_decoding_with_a_huge_budget_stays_in_the_context(engine, stream: bool) -> None:
    document = "".join(f"value_{i} = compute({i})\n" for i in range(1, 151))  # ~340 decisions
    body = {"document": document, "instruction": "x", "max_new_tokens": 2**31 - 1}
    status, answer = engine.post(EDIT, {**body, "stream": stream})
    assert_answered(status, answer)
    assert status in (200, 422) and answer.get("error", {}).get("code", "budget_spent") == (
        "budget_spent"
    )
    status, answer = engine.post(EDIT, {**body, "mode": "rewrite"})
    assert_answered(status, answer)
    assert status in (200, 422)
    assert_serves_exact_edits(engine)


@pytest.mark.parametrize("mode", ["program", "rewrite"])
def test_the_extreme_valid_values_reach_vllm(engine, mode: str) -> None:
    body = {"document": "a\nfix me\n", "instruction": "x", "mode": mode, "max_new_tokens": 8}
    extremes = {"temperature": 2, "top_p": 1e-9, "seed": 2**63 - 1}
    status, answer = engine.post(EDIT, {**body, **extremes})
    assert_answered(status, answer)
    assert status in (200, 422)


NESTED = b"[" * 100_000 + b"]" * 100_000
INVALID_BODIES = [
    (b'{"document": "a\\n", "instruction": "x", "temperature": NaN}', "NaN"),
    (b'{"document": "a\\n", "instruction": "x", "temperature": Infinity}', "Infinity"),
    (b'{"document": "a\\n", "instruction": "x", "top_p": -Infinity}', "-Infinity"),
    (b'{"document": "a\\n", "instruction": "x", "temperature": 1e999}', "finite"),
    (b'{"document": "a\\n", "instruction": "x", "seed": 1180591620717411303424}', "'seed'"),
    (b'{"document": "a\\n", "instruction": "x", "seed": -1}', "'seed'"),
    (b'{"document": "a\\n", "instruction": "x", "max_new_tokens": 1e3}', "'max_new_tokens'"),
    (b'{"document": "a\\n", "instruction": "x", "max_new_tokens": 4294967296}', "from 1 to"),
    (b'{"document": "a\\n", "instruction": "x", "range": [1, 99999999999999999999]}', "'range'"),
    (b'{"document": "a\\n", "instruction": "x", "seed": ' + b"7" * 5000 + b"}", "digits"),
    (b'{"document": "a\\n", "instruction": "x", "x": ' + NESTED + b"}", "more than"),
    (
        b'{"document": "a\\n", "instruction": "x", "x": '
        + b"[" * (MAX_JSON_DEPTH + 1)
        + b"]" * (MAX_JSON_DEPTH + 1)
        + b"}",
        "deeper than",
    ),
    (b'{"document": "a\\ud800\\n", "instruction": "x"}', "surrogate"),
    (b'{"document": "a\\n", "instruction": "x", "adapter": "a\\u0000b"}', "adapter"),
    (b'{"document": "\xff\\n", "instruction": "x"}', "UTF-8"),
    (json.dumps({"document": "a\n", "instruction": "x"}).encode("utf-16"), "UTF-8"),
    (b"[]", "JSON object"),
    (b"", "not valid JSON"),
]


@pytest.mark.parametrize(("body", "says"), INVALID_BODIES)
def test_invalid_values_are_one_line_400s(engine, body: bytes, says: str) -> None:
    status, answer = engine.post_bytes(EDIT, body)
    assert_one_line_error(status, answer)
    assert status == 400 and says in answer["error"]["message"], answer


def test_the_engine_serves_after_every_invalid_value(engine) -> None:
    for body, _ in INVALID_BODIES:
        engine.post_bytes(EDIT, body)
    assert_serves_exact_edits(engine)


FIELDS = (
    "document",
    "instruction",
    "mode",
    "range",
    "program",
    "max_new_tokens",
    "subline",
    "temperature",
    "top_p",
    "seed",
    "model",
    "adapter",
    "stream",
)
UNICODE = st.text(st.characters(categories=None)) | st.text(  # lone surrogates included
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | UNICODE
    | st.sampled_from(["program", "rewrite", '<copy lines="1-1"/>\n</program>'])
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(UNICODE, inner, max_size=3),
    max_leaves=12,
)


def _with(field: str, value: object) -> bytes:
    return json.dumps({**SMALL, field: value}).encode()


BODIES = st.one_of(
    st.builds(_with, st.sampled_from(FIELDS), VALUES),  # one field of any JSON type
    st.builds(  # numbers of any length
        lambda field, digits: _with(field, 0).replace(b": 0", b": " + b"9" * digits),
        st.sampled_from(("max_new_tokens", "seed", "temperature", "top_p")),
        st.integers(1, 6000),
    ),
    st.builds(  # nesting of any depth
        lambda field, depth: _with(field, 0).replace(b": 0", b": " + b"[" * depth + b"]" * depth),
        st.sampled_from(FIELDS),
        st.integers(1, 3000),
    ),
    st.builds(  # documents of any size around the limit
        lambda size: _with("document", "x" * size),
        st.sampled_from((0, 1, MAX_TEXT_BYTES - 1, MAX_TEXT_BYTES, MAX_TEXT_BYTES + 1)),
    ),
    st.builds(  # other encodings and byte noise
        lambda encoding, noise: (
            json.dumps({**SMALL, "document": "é\n" * 2}, ensure_ascii=False)
            .encode(encoding, "surrogatepass")
            .replace(b"a", noise, 1)
        ),
        st.sampled_from(("utf-8", "utf-16", "utf-32", "latin-1", "utf-8-sig")),
        st.binary(max_size=8),
    ),
    st.binary(max_size=64),
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(body=BODIES)
def test_fuzzed_requests_get_one_line_answers(engine, body: bytes) -> None:
    assert_answered(*engine.post_bytes(EDIT, body))


def test_the_engine_serves_after_the_fuzz(engine) -> None:
    assert_serves_exact_edits(engine)
    assert engine.metric("vllm:num_requests_running") == 0
