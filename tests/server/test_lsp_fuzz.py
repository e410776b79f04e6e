"""Hostile values in every field a client sends: each request is answered once, with a
one-line error or a result, and the server still makes an exact edit afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from cad.server.text_edits import apply_text_edits
from tests.server.lsp_stdio import RawServer

URI = "file:///tmp/cad-fuzz/mean.py"
TEXT = "def mean(values):\n    return sum(values) / len(values) + 1\n"
FIXED = "def mean(values):\n    return sum(values) / len(values)\n"
FIX = '<copy lines="1-1"/>\n<gen>    return sum(values) / len(values)\n</gen>\n</program>'
DIGITS = "9" * 5000
DEEP = "[" * 5000 + "]" * 5000

HOSTILE_VALUES: list[str] = [
    DIGITS,
    "-" + DIGITS,
    "1e999999",
    "-1",
    "1.5",
    "NaN",
    "Infinity",
    "true",
    "null",
    '"' + "x" * 100_000 + '"',
    '"\\ud800"',
    '"\\u0000"',
    '"' + "\\ud83d" * 3 + '"',
    "{}",
    "[]",
    DEEP,
    '{"line": ' + DIGITS + ', "character": 0}',
]
"""JSON texts put in place of a field's value (written by hand: Python's json cannot write
all of them)."""

MARKER = "@@HOSTILE@@"
EDIT_FIELDS = ["uri", "instruction", "program", "range", "snap", "dryRun"]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def with_value(method: str, params: dict[str, Any], field: str, value: str) -> bytes:
    """The body of a request (id 0) of ``method`` with ``params``, its ``field`` (a dotted
    path) set to the JSON text ``value``."""
    target = params
    *path, last = field.split(".")
    for key in path:
        target = target[key]
    target[last] = MARKER
    text = json.dumps({"jsonrpc": "2.0", "id": 0, "method": method, "params": params})
    return text.replace(json.dumps(MARKER), value).encode("utf-8", "surrogatepass")


def edit_params() -> dict[str, Any]:
    return {
        "command": "cad.applyEdit",
        "arguments": [{"uri": URI, "instruction": "fix", "program": FIX, "dryRun": True}],
    }


def test_hostile_fields_get_one_line_answers_and_the_server_keeps_editing(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    server.open(URI, TEXT)
    messages: list[tuple[str, bytes]] = []
    for field in EDIT_FIELDS:
        messages += [(f"arguments[0].{field} = {value[:30]}", _edit_field(field, value))
                     for value in HOSTILE_VALUES]  # fmt: skip
    for field in ("command", "arguments", "workDoneToken"):
        messages += [
            (f"{field} = {value[:30]}", with_value("workspace/executeCommand", edit_params(), field, value))
            for value in HOSTILE_VALUES
        ]  # fmt: skip
    notifications: list[bytes] = []
    for value in HOSTILE_VALUES:
        for field in ("textDocument.version", "contentChanges", "textDocument.uri"):
            change = {
                "textDocument": {"uri": URI, "version": 2},
                "contentChanges": [{"text": TEXT}],
            }
            notifications.append(with_value("textDocument/didChange", change, field, value))
        for key in ("maxNewTokens", "mode", "syntax", "engine", "model", "device"):
            settings = {"settings": {"cad": {key: 0}}}
            notifications.append(
                with_value(
                    "workspace/didChangeConfiguration", settings, f"settings.cad.{key}", value
                )
            )
    answers = {}
    for request_id, (case, message) in enumerate(messages, 1000):
        server.send_bytes(frame(message.replace(b'"id": 0', b'"id": %d' % request_id)))
        answers[case] = server.answer(request_id)
    for number, message in enumerate(notifications):
        server.send_bytes(frame(message.replace(b'"id": 0, ', b"")))
        if number % 10 == 0:
            answers[f"after notification {number}"] = server.request("cad/probe", None)
    server.notify("workspace/didChangeConfiguration", {"settings": {"cad": {"mode": "auto"}}})
    server.open(URI, TEXT, version=7)
    done = server.edit({"uri": URI, "instruction": "fix", "program": FIX})
    code, _ = server.close()

    for case, answer in answers.items():
        error = answer.get("error")
        if error is not None:
            assert "\n" not in error["message"] and "data" not in error, (case, error)
            assert len(error["message"]) < 1000, case
        else:
            assert isinstance(answer["result"], dict), (case, answer)
    assert done["result"]["applied"] is True, done
    changes = server.applied[-1]["edit"]["documentChanges"][0]
    assert changes["textDocument"]["version"] == 7
    edits = [
        lsp.TextEdit(
            range=lsp.Range(
                start=lsp.Position(**edit["range"]["start"]),
                end=lsp.Position(**edit["range"]["end"]),
            ),
            new_text=edit["newText"],
        )
        for edit in changes["edits"]
    ]
    assert apply_text_edits(TEXT, edits) == FIXED
    assert code == 0
    assert "Traceback" not in server.log()


def _edit_field(field: str, value: str) -> bytes:
    params = edit_params()
    return with_value(
        "workspace/executeCommand",
        params,
        "arguments",
        json.dumps([{**params["arguments"][0], field: MARKER}]).replace(json.dumps(MARKER), value),
    )
