"""A server that always answers, through LSP frames over stdio: bad headers, oversized and
unparsable messages, parameters that do not fit; and the pygls internals the adapter uses."""

from __future__ import annotations

import hashlib
import inspect
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.protocol import json_rpc, language_server

from cad.server import lsp_adapter
from cad.server.serve import build_server
from tests.server.lsp_stdio import RawServer

URI = "file:///tmp/cad-test/mean.py"
TEXT = "def mean(values):\n    return sum(values) / len(values)\n"
EMPTY = {"uri": URI, "instruction": "x", "program": "</program>", "dryRun": True}


def body(message: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def ask(server: RawServer, request_id: int) -> dict:
    """A request ``server`` must answer: a dry-run edit with id ``request_id``."""
    server.send(
        {
            "id": request_id,
            "method": "workspace/executeCommand",
            "params": {"command": "cad.applyEdit", "arguments": [EMPTY]},
        }
    )
    return server.answer(request_id)


BAD_FRAMES = {
    "not a number": b"Content-Length: abc\r\n\r\n" + body({"method": "initialized", "params": {}}),
    "negative": b"Content-Length: -5\r\n\r\n" + body({"method": "initialized", "params": {}}),
    "missing": b"Content-Type: application/json\r\n\r\n" + body({"method": "initialized"}),
    "shorter than the body": b"Content-Length: 5\r\n\r\n" + body({"id": 99, "method": "shutdown"}),
    "no header at all": b"garbage without a line end",
    "over the limit": b"Content-Length: 1000000000000\r\n\r\n",
    "thousands of digits": b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n",
}


def test_bad_frames_are_skipped_and_every_later_request_is_answered(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    server.open(URI, TEXT)
    answers = {}
    for request_id, (name, frame) in enumerate(BAD_FRAMES.items(), 100):
        server.send_bytes(frame)
        answers[name] = ask(server, request_id)
    code, rest = server.close()
    assert code == 0 and rest == []
    for name, answer in answers.items():
        assert answer["result"]["edits"], name
    log = server.log()
    assert "Content-Length 'abc' is not a length; skipped to the next message" in log
    assert "Content-Length '-5' is not a length" in log
    assert "has no Content-Length header" in log
    assert "a message of 1000000000000 bytes is over the limit of 33554432" in log
    assert "a Content-Length of 5000 digits is over the limit" in log
    assert "Traceback" not in log


def test_a_deeply_nested_request_is_answered_with_its_id(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    server.open(URI, TEXT)
    deep = b"[" * 100_000 + b"]" * 100_000
    frames = {
        41: b'{"jsonrpc": "2.0", "method": "workspace/executeCommand", "params": {"command": '
        b'"cad.applyEdit", "arguments": ' + deep + b'}, "id": 41}',
        "s": b'{"id": "s", "jsonrpc": "2.0", "method": "cad.x", "params": ' + deep + b"}",
    }
    for request_id, frame in frames.items():
        server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(frame) + frame)
        assert server.answer(request_id)["error"] == {
            "code": -32600,
            "message": "the message is nested too deeply to read",
        }
    assert ask(server, 42)["result"]["edits"]
    code, _ = server.close()
    assert code == 0
    assert "Traceback" not in server.log()


def test_a_large_message_is_skipped_without_holding_it(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    huge = body({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": URI, "languageId": "python", "version": 1, "text": "x" * (40 * 1024 * 1024),
    }}})  # fmt: skip
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(huge) + huge)
    server.open("file:///tmp/cad-test/small.py", TEXT)
    answer = server.edit({**EMPTY, "uri": "file:///tmp/cad-test/small.py"})
    not_open = server.edit(EMPTY)
    code, _ = server.close()
    assert code == 0
    assert answer["result"]["edits"]
    assert "is not open in the editor" in not_open["error"]["message"]
    assert "over the limit of 33554432" in server.log()


def test_every_request_gets_a_one_line_answer(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    server.open(URI, TEXT)
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    requests = {
        "hover with bad params": ("textDocument/hover", {"textDocument": 5, "position": "x"}),
        "executeCommand with a list": ("workspace/executeCommand", []),
        "codeAction without a range": (
            "textDocument/codeAction",
            {"textDocument": {"uri": URI}, "context": {"diagnostics": []}},
        ),
        "dryRun as text": (
            "workspace/executeCommand",
            {"command": "cad.applyEdit", "arguments": [{**EMPTY, "dryRun": "false"}]},
        ),
        "a negative line": (
            "workspace/executeCommand",
            {
                "command": "cad.applyEdit",
                "arguments": [{**EMPTY, "range": {**rng, "start": {"line": -1, "character": 0}}}],
            },
        ),
    }
    answers = {name: server.request(method, params) for name, (method, params) in requests.items()}
    server.next_id += 1
    infinite = body({
        "id": server.next_id,
        "method": "workspace/executeCommand",
        "params": {"command": "cad.applyEdit", "arguments": [{**EMPTY, "range": rng}]},
    }).replace(b'"line": 1', b'"line": Infinity')  # fmt: skip
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(infinite) + infinite)
    answers["a line of Infinity"] = server.answer(server.next_id)
    server.send_bytes(b"Content-Length: 9\r\n\r\n{not json")
    answers["not JSON"] = server.answer(None)
    server.notify("workspace/didChangeConfiguration", {"settings": {"cad": {"model": 5}}})
    answers["model: 5"] = server.edit({"uri": URI, "instruction": "rename"})
    code, _ = server.close()
    assert code == 0
    for name, answer in answers.items():
        error = answer.get("error")
        assert error is not None, (name, answer)
        expected = -32700 if name == "not JSON" else -32602
        assert error["code"] == expected, (name, error)
        assert "\n" not in error["message"] and "data" not in error, (name, error)
    assert (
        "textDocument/hover: invalid params" in answers["hover with bad params"]["error"]["message"]
    )
    assert "'dryRun' must be true or false" in answers["dryRun as text"]["error"]["message"]
    assert (
        "range.end.line' must be a whole number, not inf"
        in (answers["a line of Infinity"]["error"]["message"])
    )
    assert "cad.model is 5" in answers["model: 5"]["error"]["message"]
    assert "Traceback" not in server.log()


def test_user_errors_are_logged_in_one_line(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    answer = server.edit(EMPTY)
    code, _ = server.close()
    assert code == 0 and "is not open" in answer["error"]["message"]
    lines = [line for line in server.log().splitlines() if line.strip()]
    assert len(lines) == 1 and "is not open in the editor" in lines[0], lines


def test_positions_are_utf16_whatever_encodings_the_client_offers(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    capabilities = server.initialize(general={"positionEncodings": ["utf-8", "utf-32"]})
    server.open(URI, "s = '😀é'\nt = 1\n")
    server.change(
        URI,
        2,
        [{"range": {"start": {"line": 0, "character": 7}, "end": {"line": 0, "character": 7}}, "text": "!"}],
    )  # fmt: skip
    swapped = server.edit(
        {**EMPTY, "program": '<copy lines="2-2"/>\n<copy lines="1-1"/>\n</program>'}
    )
    code, _ = server.close()
    assert code == 0
    assert capabilities["result"]["capabilities"]["positionEncoding"] == "utf-16"
    (first, *_) = swapped["result"]["edits"]
    assert swapped["result"]["edits"] and first["range"]["start"] == {"line": 0, "character": 0}
    from tests.server.test_documents import reference_apply

    assert reference_apply("s = '😀!é'\nt = 1\n", swapped["result"]["edits"]) == (
        "t = 1\ns = '😀!é'\n"
    )


def test_exit_without_shutdown_returns_one(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "log")
    server.initialize()
    code, _ = server.exit()
    assert code == 1


def test_a_client_that_goes_away_ends_the_server_with_one_line(tmp_path: Path) -> None:
    """The first answer that cannot be written (the client closed its end) ends the server
    with status 1 and one line in the log: no traceback, no attempt to tell the client."""
    log = tmp_path / "log"
    server = subprocess.Popen(
        [sys.executable, "-c", "from cad.server.cli import main; main()", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
    )
    try:
        data = body({"id": 1, "method": "initialize", "params": {"capabilities": {}}})
        server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        server.stdin.flush()
        assert server.stdout.readline().startswith(b"Content-Length")
        server.stdout.close()
        data = body({"id": 2, "method": "shutdown"})
        server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        server.stdin.flush()
        code = server.wait(timeout=60)
    finally:
        server.kill()
    text = log.read_text()
    assert code == 1
    assert text.count("the connection to the client is lost") == 1
    assert "Traceback" not in text


def test_messages_after_the_connection_closed_are_dropped() -> None:
    sent: list[bytes] = []

    class Inner:
        def write(self, data: bytes) -> None:
            sent.append(data)

        def close(self) -> None:
            sent.append(b"<closed>")

    writer = lsp_adapter.ClientWriter(Inner())
    writer.write(b"one")
    writer.close()
    writer.write(b"two")
    writer.close()
    assert sent == [b"one", b"<closed>"]


PYGLS_CLASSES = {
    "JsonRPCProtocol": json_rpc.JsonRPCProtocol,
    "LanguageServerProtocol": language_server.LanguageServerProtocol,
}


@pytest.mark.parametrize("name", sorted(lsp_adapter.RELIES_ON))
def test_pygls_methods_the_adapter_relies_on_are_unchanged(name: str) -> None:
    owner, _, method = name.partition(".")
    assert (
        str(inspect.signature(getattr(PYGLS_CLASSES[owner], method))) == lsp_adapter.RELIES_ON[name]
    )


@pytest.mark.parametrize("name", sorted(lsp_adapter.COPIED_FROM_PYGLS))
def test_pygls_methods_the_adapter_repeats_are_unchanged(name: str) -> None:
    owner, _, method = name.partition(".")
    source = inspect.getsource(getattr(PYGLS_CLASSES[owner], method))
    assert hashlib.sha256(source.encode()).hexdigest()[:16] == lsp_adapter.COPIED_FROM_PYGLS[name]


def test_pygls_attributes_and_builtin_features_are_the_adapters() -> None:
    ls, _ = build_server()
    protocol = ls.protocol
    for attribute, kind in lsp_adapter.RELIES_ON_ATTRIBUTES.items():
        assert isinstance(getattr(protocol, attribute), kind), attribute
    overridden = {
        lsp.INITIALIZE: "lsp_initialize",
        lsp.SHUTDOWN: "lsp_shutdown",
        lsp.TEXT_DOCUMENT_DID_OPEN: "lsp_text_document__did_open",
        lsp.TEXT_DOCUMENT_DID_CHANGE: "lsp_text_document__did_change",
        lsp.TEXT_DOCUMENT_DID_CLOSE: "lsp_text_document__did_close",
        lsp.WORKSPACE_EXECUTE_COMMAND: "lsp_workspace__execute_command",
        lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL: "lsp_work_done_progress_cancel",
    }
    for method, attribute in overridden.items():
        handler = protocol.fm.builtin_features[method]
        assert handler.__func__ is getattr(lsp_adapter.CadProtocol, attribute), method


def test_tcp_serves_one_client_and_exits_with_it(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = "from cad.server.cli import main; main()"
    server = subprocess.Popen(
        [sys.executable, "-c", command, "serve", "--tcp", f"127.0.0.1:{port}"],
        stderr=(tmp_path / "log").open("wb"),
    )
    try:
        for _ in range(600):
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=60)
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        else:
            raise AssertionError("cad serve --tcp never listened")
        with connection, connection.makefile("rb") as stream:

            def exchange(message: dict) -> dict | None:
                data = body(message)
                connection.sendall(b"Content-Length: %d\r\n\r\n" % len(data) + data)
                if "id" not in message:
                    return None
                while True:
                    headers = {}
                    while line := stream.readline().strip():
                        name, _, value = line.partition(b":")
                        headers[name] = value.strip()
                    answer = json.loads(stream.read(int(headers[b"Content-Length"])))
                    if answer.get("id") == message["id"] and "method" not in answer:
                        return answer

            exchange({"id": 1, "method": "initialize", "params": {"capabilities": {}}})
            exchange({"method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": URI, "languageId": "python", "version": 1, "text": TEXT}}})  # fmt: skip
            edit = exchange({"id": 2, "method": "workspace/executeCommand",
                             "params": {"command": "cad.applyEdit", "arguments": [EMPTY]}})  # fmt: skip
            shut = exchange({"id": 3, "method": "shutdown"})
            exchange({"method": "exit"})
        code = server.wait(timeout=60)
    finally:
        server.kill()
    assert edit is not None and edit["result"]["edits"]
    assert shut == {"jsonrpc": "2.0", "id": 3, "result": None}
    assert code == 0
