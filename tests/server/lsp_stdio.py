"""``cad serve`` over stdio at the level of bytes: frames written and read by hand, so tests
can send what a well-behaved client never would (bad headers, bad JSON, bad parameters)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


class RawServer:
    """``cad serve`` as a subprocess. Every byte it writes to stdout must belong to an LSP
    frame (headers, blank line, JSON body of the announced length); its log goes to a file."""

    def __init__(self, stderr_path: Path, prelude: str = "", args: tuple[str, ...] = ()) -> None:
        self.stderr_path = stderr_path
        self.stderr = stderr_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"{prelude}\nfrom cad.server.cli import main; main()",
                "serve",
                *args,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self.watchdog = threading.Timer(120, self.process.kill)
        self.watchdog.start()
        self.next_id = 0
        self.applied: list[dict[str, Any]] = []
        """The parameters of every ``workspace/applyEdit`` the server sent (all accepted)."""

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        """Send one JSON-RPC message (non-finite floats written as JavaScript would not)."""
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def frame(self) -> dict[str, Any] | None:
        """The next frame, or None at the end of the stream; anything else fails the test."""
        assert self.process.stdout is not None
        headers = {}
        while True:
            line = self.process.stdout.readline()
            if not line and not headers:
                return None
            assert line.endswith(b"\r\n"), f"not an LSP header line: {line!r}"
            if line == b"\r\n":
                break
            name, _, value = line.decode("ascii").partition(": ")
            assert name in ("Content-Length", "Content-Type"), f"not an LSP header: {line!r}"
            headers[name] = value.strip()
        body = self.process.stdout.read(int(headers["Content-Length"]))
        message = json.loads(body)
        assert message["jsonrpc"] == "2.0"
        return message

    def answer(self, request_id: int | str) -> dict[str, Any]:
        """Read frames until the response to ``request_id``; the server's own requests are
        answered on the way (``workspace/applyEdit`` is accepted)."""
        while True:
            message = self.frame()
            assert message is not None, "the server closed stdout before answering"
            if message.get("id") == request_id and "method" not in message:
                return message
            if message.get("method") == "workspace/applyEdit":
                self.applied.append(message["params"])
                self.send({"id": message["id"], "result": {"applied": True}})
            elif "method" in message and "id" in message:
                self.send({"id": message["id"], "result": None})

    def request(self, method: str, params: Any) -> dict[str, Any]:
        """Send a request and return its response."""
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.answer(self.next_id)

    def initialize(self, options: dict[str, Any] | None = None, **capabilities: Any) -> dict:
        """``initialize`` (with ``initializationOptions``) and ``initialized``."""
        response = self.request(
            "initialize",
            {"processId": None, "capabilities": capabilities, "initializationOptions": options},
        )
        self.notify("initialized", {})
        return response

    def open(self, uri: str, text: str, version: int = 1, language_id: str = "python") -> None:
        self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": language_id,
                    "version": version,
                    "text": text,
                }
            },
        )

    def change(self, uri: str, version: int, changes: list[dict[str, Any]]) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes},
        )

    def edit(self, argument: dict[str, Any]) -> dict[str, Any]:
        """``cad.applyEdit`` with ``argument``; the whole response (``result`` or ``error``)."""
        return self.request(
            "workspace/executeCommand", {"command": "cad.applyEdit", "arguments": [argument]}
        )

    def close(self) -> tuple[int, list[dict[str, Any]]]:
        """``shutdown`` and ``exit``; the server's return code and any frames after exit."""
        shut = self.request("shutdown", None)
        assert shut.get("result", "missing") is None, shut
        return self.exit()

    def exit(self) -> tuple[int, list[dict[str, Any]]]:
        """``exit`` (after ``shutdown`` or not); the return code and the frames after it."""
        self.send({"method": "exit"})
        assert self.process.stdin is not None
        self.process.stdin.close()
        rest = []
        while (message := self.frame()) is not None:
            rest.append(message)
        code = self.process.wait(timeout=60)
        self.watchdog.cancel()
        self.stderr.close()
        return code, rest

    def log(self) -> str:
        """What the server logged so far."""
        return self.stderr_path.read_text(errors="replace")
