"""``cad serve --engine URL`` against a stand-in engine (a local HTTP server speaking the
``/v1/cad`` protocol): results, progress, cancel by closing the connection, and one line with
the next step for an unreachable, overloaded or mismatched engine. The real engine is tested
in ``tests/engine``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from lsprotocol import types as lsp

from cad.server.remote import (
    EngineBudgetSpent,
    EngineError,
    RemoteProgress,
    engine_info,
    remote_edit,
)
from tests.server.test_serve import URI, Client, run, text_after

PROGRESS = {"ops": 1, "lines_copied": 2, "lines_generated": 0, "tokens_generated": 3}


class FakeEngine:
    """Answers ``POST /v1/cad/edit`` with ``self.answer(body)``: ``(status, lines)``; a line
    ``"forever"`` sends heartbeats until the client goes away."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.client_left = threading.Event()
        self.answer = lambda body: (200, [{"progress": PROGRESS}, {"result": result(body)}])
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, [{"model": "m", "modes": ["program", "rewrite"]}])

            def do_POST(self) -> None:
                if self.path != "/v1/cad/edit":
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.bodies.append(body)
                self._send(*engine.answer(body))

            def _send(self, status: int, lines: list) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                try:
                    for line in lines:
                        if line == "forever":
                            while True:
                                self.wfile.write(b'{"heartbeat": true}\n')
                                self.wfile.flush()
                                time.sleep(0.05)
                        self.wfile.write(json.dumps(line).encode() + b"\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    engine.client_left.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def result(body: dict) -> dict:
    return {"program": "", "text": body["document"].upper(), "stats": {"mode": body["mode"]}}


@pytest.fixture
def engine():
    fake = FakeEngine()
    yield fake
    fake.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_result_and_progress(engine) -> None:
    seen: list[RemoteProgress] = []
    answer = remote_edit(
        engine.url + "/", "a\n", "up", mode="rewrite", max_new_tokens=9, on_progress=seen.append
    )
    assert answer is not None and answer.text == "A\n" and answer.stats == {"mode": "rewrite"}
    assert seen == [RemoteProgress(**PROGRESS)]
    assert engine.bodies == [
        {
            "document": "a\n",
            "instruction": "up",
            "mode": "rewrite",
            "max_new_tokens": 9,
            "stream": True,
        }
    ]
    assert engine_info(engine.url)["model"] == "m"


def test_cancel_closes_the_connection(engine) -> None:
    engine.answer = lambda body: (200, [{"progress": PROGRESS}, "forever"])
    cancel = threading.Event()
    answer = remote_edit(
        engine.url,
        "a\n",
        "x",
        mode="program",
        max_new_tokens=9,
        on_progress=lambda _: cancel.set(),
        cancel=cancel,
    )
    assert answer is None
    assert engine.client_left.wait(10)


@pytest.mark.parametrize(
    ("status", "lines", "says"),
    [
        (
            503,
            [{"error": {"code": "overloaded", "message": "limit of 4 edits"}}],
            "is overloaded: limit of 4",
        ),
        (400, [{"error": {"code": "model_mismatch", "message": "serves 'm'"}}], "set cad.model"),
        (
            400,
            [{"error": {"code": "mode_unavailable", "message": "no processor"}}],
            "set cad.mode to rewrite",
        ),
        (200, [{"heartbeat": True}, {"error": {"code": "internal", "message": "boom"}}], ": boom"),
        (200, [{"heartbeat": True}], "closed the connection"),
        (500, ["not json"], "answered HTTP 500"),
    ],
)
def test_engine_errors_are_one_line(engine, status, lines, says: str) -> None:
    engine.answer = lambda body: (status, lines)
    with pytest.raises(EngineError, match=says) as caught:
        remote_edit(engine.url, "a\n", "x", mode="program", max_new_tokens=9, model="other")
    assert "\n" not in str(caught.value)


def test_budget_spent_is_its_own_error(engine) -> None:
    engine.answer = lambda body: (422, [{"error": {"code": "budget_spent", "message": "spent"}}])
    with pytest.raises(EngineBudgetSpent):
        remote_edit(engine.url, "a\n", "x", mode="program", max_new_tokens=9)


def test_unreachable_and_wrong_servers(engine) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match=r"cannot reach the engine at .*start it with cad-engine"):
        remote_edit(url, "a\n", "x", mode="program", max_new_tokens=9)
    with pytest.raises(EngineError, match="does not serve cad edits"):
        remote_edit(engine.url + "/elsewhere", "a\n", "x", mode="program", max_new_tokens=9)
    with pytest.raises(EngineError, match="set it to the engine's URL"):
        remote_edit("localhost:8000", "a\n", "x", mode="program", max_new_tokens=9)


def test_language_server_edits_through_the_engine(engine) -> None:
    document = "keep\nfix me\nkeep too\n"

    async def scenario():
        c = Client()
        await c.start(args=("--engine", engine.url))
        c.open(document, version=3)
        range_ = {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}
        applied = await c.edit({"uri": URI, "instruction": "shout", "range": range_})
        c.client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(
                settings={"cad": {"model": "team/coder", "adapter": "selector", "mode": "program"}}
            )
        )
        engine.answer = lambda body: (503, [{"error": {"code": "overloaded", "message": "busy"}}])
        refused = await c.try_edit({"uri": URI, "instruction": "again"})
        await c.stop()
        return c, applied, refused

    c, applied, refused = run(scenario())
    assert applied["applied"] is True and applied["stats"] == {"mode": "rewrite"}
    assert text_after(c, document) == "keep\nFIX ME\nkeep too\n"
    assert engine.bodies[0]["document"] == "fix me\n"
    assert "model" not in engine.bodies[0] and "adapter" not in engine.bodies[0]
    assert engine.bodies[1]["model"] == "team/coder" and engine.bodies[1]["adapter"] == "selector"
    assert engine.bodies[1]["mode"] == "program"
    assert "is overloaded: busy" in refused["error"] and "\n" not in refused["error"]


def test_cli_refuses_a_bad_engine_url() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cad.server.cli import main; main()",
            "serve",
            "--engine",
            "localhost:8000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.strip().startswith("error: --engine 'localhost:8000'")
