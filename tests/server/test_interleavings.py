"""Random interleavings of edits, ``didChange`` and cancels against one in-process server,
checked against a model of LSP semantics.

The client holds the document and its version, changes it at random, asks for program edits
of the version it holds, cancels some of them (``$/cancelRequest`` or cancelling their
progress) and applies the server's ``workspace/applyEdit`` only when the edit names the
version it holds, as VS Code and Neovim do. Messages in each direction arrive in order, with
random delays between them, from none to a few milliseconds. Every schedule must satisfy:

- every request is answered exactly once;
- every edit the client applied is the request's program resolved against the text of the
  version the request was sent for, and carries that version;
- no edit is sent after the server handled the request's cancel;
- a request answered RequestCancelled (or ``applied: false``) applied nothing, and one
  answered ``applied: true`` applied exactly one edit;
- at the end the server's copy of the document is the client's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types as lsp

from cad.resolver import Document, parse, resolve
from cad.server.lsp_adapter import CadProtocol, dispatch
from cad.server.serve import build_server
from cad.server.text_edits import apply_text_edits, position

SCHEDULES = int(os.environ.get("CAD_INTERLEAVINGS", "10000"))
REQUEST_CANCELLED = -32800


@dataclass
class Sent:
    """One ``cad.applyEdit`` the client sent: the version and text it was for, what the
    document must become, whether (and when) the server handled its cancel, its answer and
    the edits the client applied for it."""

    version: int
    text: str
    expected: str
    token: str | None
    cancel_handled_at: int | None = None
    answer: dict[str, Any] | None = None
    applied: list[int] = field(default_factory=list)
    sent_edits: list[int] = field(default_factory=list)


class Harness:
    """One server and one client on one event loop; messages go through the server's own
    ``dispatch`` and its writer, as JSON bodies."""

    def __init__(self, seed: int) -> None:
        self.ls, self.cad = build_server()
        self.protocol: CadProtocol = self.ls.protocol  # type: ignore[assignment]
        self.protocol.set_writer(self, include_headers=False)
        self.random = random.Random(seed)
        self.loop = asyncio.get_running_loop()
        self.clock = itertools.count()
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.problems: list[str] = []
        self.uri = ""
        self.text = ""
        self.version = 0
        self.sent: dict[int, Sent] = {}

    # the wire
    def to_server(self, message: dict[str, Any], on_handled: Any = None) -> None:
        """Deliver ``message`` to the server after every message sent before it."""
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()

        def deliver() -> None:
            if on_handled is not None:
                on_handled(next(self.clock))
            dispatch(self.protocol, body)

        self.loop.call_soon(deliver)

    def write(self, data: bytes) -> None:
        """The server's writer: handle what it sends, as the client."""
        message = json.loads(data)
        if "method" not in message:
            future = self.pending.get(message["id"])
            if future is None:
                self.problems.append(f"an answer to no request: {message}")
            elif future.done():
                self.problems.append(f"a second answer to request {message['id']}")
            else:
                future.set_result(message)
        elif message["method"] == "workspace/applyEdit":
            self.apply(message)
        elif "id" in message:
            self.to_server({"id": message["id"], "result": None})

    def close(self) -> None:
        """The writer interface's close."""

    async def request(self, method: str, params: Any) -> int:
        request_id = next(self.ids)
        self.pending[request_id] = self.loop.create_future()
        self.to_server({"id": request_id, "method": method, "params": params})
        return request_id

    # the client
    async def start(self, uri: str, text: str) -> None:
        answer = await self.answer(
            await self.request(
                "initialize",
                {"processId": None, "capabilities": {"window": {"workDoneProgress": True}}},
            )
        )
        assert "result" in answer, answer
        self.to_server({"method": "initialized", "params": {}})
        self.open(uri, text)

    def open(self, uri: str, text: str) -> None:
        self.uri, self.text, self.version = uri, text, 1
        self.sent = {}
        self.to_server(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "plaintext",
                        "version": 1,
                        "text": text,
                    }
                },
            }
        )

    async def answer(self, request_id: int) -> dict[str, Any]:
        future = self.pending.get(request_id)
        if future is None:
            raise AssertionError(f"request {request_id} is not pending")
        return await asyncio.wait_for(asyncio.shield(future), 10)

    def change(self) -> None:
        """Replace a random run of lines with random lines, as one incremental change."""
        document = Document(self.text)
        first = self.random.randint(0, document.n_lines)
        last = self.random.randint(first, min(document.n_lines, first + 2))
        start, end = document.line_starts[first], document.line_starts[last]
        new_lines = "".join(f"c{self.version}.{i}\n" for i in range(self.random.randint(0, 2)))
        self.send_change(start, end, new_lines)

    def send_change(self, start: int, end: int, new: str) -> None:
        document = Document(self.text)
        change = {
            "range": {
                "start": _position(document, start),
                "end": _position(document, end),
            },
            "text": new,
        }
        self.text = self.text[:start] + new + self.text[end:]
        self.version += 1
        self.to_server(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": self.uri, "version": self.version},
                    "contentChanges": [change],
                },
            }
        )

    async def edit(self, with_progress: bool | None = None) -> int:
        """Ask for a program edit of the version the client holds: keep a random prefix and
        suffix of lines and write a line naming the request between them. The request
        carries a progress token ``with_progress`` (``None``: at random)."""
        document = Document(self.text)
        request_number = len(self.sent) + 1
        keep_to = self.random.randint(0, document.n_lines)
        keep_from = self.random.randint(keep_to, document.n_lines)
        ops = []
        if keep_to:
            ops.append(f'<copy lines="1-{keep_to}"/>')
        ops.append(f"<gen>R{request_number} of v{self.version}\n</gen>")
        if keep_from < document.n_lines:
            ops.append(f'<copy lines="{keep_from + 1}-{document.n_lines}"/>')
        program = "\n".join(ops) + "\n</program>"
        if with_progress is None:
            with_progress = self.random.random() < 0.3
        token = f"progress-{next(self.ids)}" if with_progress else None
        params: dict[str, Any] = {
            "command": "cad.applyEdit",
            "arguments": [{"uri": self.uri, "instruction": "", "program": program}],
        }
        if token is not None:
            params["workDoneToken"] = token
        expected = resolve(parse(program), self.text)
        request_id = await self.request("workspace/executeCommand", params)
        self.sent[request_id] = Sent(self.version, self.text, expected, token)
        return request_id

    def cancel(self, request_id: int) -> None:
        """``$/cancelRequest``, or cancelling the request's progress when it has some."""
        sent = self.sent[request_id]

        def handled(at: int) -> None:
            if sent.cancel_handled_at is None:
                sent.cancel_handled_at = at

        if sent.token is not None and self.random.random() < 0.5:
            self.to_server(
                {"method": "window/workDoneProgress/cancel", "params": {"token": sent.token}},
                on_handled=handled,
            )
        else:
            self.to_server({"method": "$/cancelRequest", "params": {"id": request_id}}, handled)

    def apply(self, message: dict[str, Any]) -> None:
        """``workspace/applyEdit``: applied when it names the version the client holds."""
        now = next(self.clock)
        change = message["params"]["edit"]["documentChanges"][0]
        version = change["textDocument"]["version"]
        edits = [lsp_text_edit(edit) for edit in change["edits"]]
        owners = [
            request_id
            for request_id, sent in self.sent.items()
            if sent.version == version and apply_text_edits(sent.text, edits) == sent.expected
        ]
        if len(owners) != 1:
            self.problems.append(f"an edit for v{version} that no request asked for: {edits}")
            self.to_server({"id": message["id"], "result": {"applied": False}})
            return
        owner = self.sent[owners[0]]
        owner.sent_edits.append(now)
        if version != self.version:
            self.to_server({"id": message["id"], "result": {"applied": False}})
            return
        owner.applied.append(now)
        new_text = apply_text_edits(self.text, edits)
        self.send_full(new_text)
        self.to_server({"id": message["id"], "result": {"applied": True}})

    def send_full(self, new_text: str) -> None:
        self.text = new_text
        self.version += 1
        self.to_server(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": self.uri, "version": self.version},
                    "contentChanges": [{"text": new_text}],
                },
            }
        )

    async def pause(self) -> None:
        """No delay, a few turns of the loop, or a short sleep (the decoding thread runs)."""
        choice = self.random.random()
        if choice < 0.3:
            return
        if choice < 0.8:
            for _ in range(self.random.randint(1, 4)):
                await asyncio.sleep(0)
            return
        await asyncio.sleep(self.random.choice((0.0001, 0.0005, 0.002)))

    async def schedule(self, number: int) -> None:
        """One random schedule on a fresh document; every problem is kept."""
        self.open(f"file:///interleaving/{number}.txt", "alpha\nbeta\ngamma\n")
        for _ in range(self.random.randint(2, 8)):
            action = self.random.random()
            if action < 0.35:
                self.change()
            elif action < 0.75 or not self.sent:
                await self.edit()
            else:
                self.cancel(self.random.choice(list(self.sent)))
            await self.pause()
        for request_id, sent in self.sent.items():
            sent.answer = await self.answer(request_id)
        await self.settle()
        self.check(number)

    async def settle(self) -> None:
        """Wait until the server has handled everything sent so far."""
        request_id = await self.request("shutdown_probe", None)
        await self.answer(request_id)

    def check(self, number: int) -> None:
        where = f"schedule {number}"
        for request_id, sent in self.sent.items():
            answer = sent.answer or {}
            cancelled = answer.get("error", {}).get("code") == REQUEST_CANCELLED
            result = answer.get("result") or {}
            if "error" in answer and not cancelled:
                self.problems.append(f"{where}: request {request_id} failed: {answer}")
            if cancelled or result.get("applied") is False:
                if sent.applied:
                    self.problems.append(f"{where}: request {request_id} {answer} yet applied")
            elif result.get("applied") is True and len(sent.applied) != 1:
                self.problems.append(f"{where}: request {request_id} applied {sent.applied}")
            if sent.cancel_handled_at is not None and any(
                at > sent.cancel_handled_at for at in sent.sent_edits
            ):
                self.problems.append(
                    f"{where}: request {request_id} sent its edit after its cancel: {sent}"
                )
        server_copy = self.protocol.documents.get(self.uri)
        if server_copy is None or (server_copy.text, server_copy.version) != (
            self.text,
            self.version,
        ):
            self.problems.append(f"{where}: the server's copy differs from the client's")


def lsp_text_edit(edit: dict[str, Any]) -> lsp.TextEdit:
    return lsp.TextEdit(
        range=lsp.Range(
            start=lsp.Position(**edit["range"]["start"]), end=lsp.Position(**edit["range"]["end"])
        ),
        new_text=edit["newText"],
    )


def _position(document: Document, offset: int) -> dict[str, int]:
    where = position(document, offset)
    return {"line": where.line, "character": where.character}


def test_random_interleavings_never_apply_a_wrong_or_cancelled_edit() -> None:
    async def run() -> list[str]:
        harness = Harness(seed=20261127)
        await harness.start("file:///interleaving/0.txt", "")
        for number in range(SCHEDULES):
            await harness.schedule(number)
            if harness.problems:
                break
        return harness.problems

    problems = asyncio.run(run())
    assert not problems, problems[:5]


def test_a_program_edit_ignores_a_change_sent_right_behind_it() -> None:
    """The edit is computed for the version the request names: a ``didChange`` handled
    before the edit reads the document neither corrupts it nor lets it through."""

    async def run() -> tuple[dict[str, Any], list[str], str]:
        harness = Harness(seed=1)
        await harness.start("file:///race.txt", "alpha\nbeta\ngamma\n")
        program = '<copy lines="1-1"/>\n<gen>BETA\n</gen>\n<copy lines="3-3"/>\n</program>'
        request_id = await harness.request(
            "workspace/executeCommand",
            {
                "command": "cad.applyEdit",
                "arguments": [{"uri": harness.uri, "instruction": "", "program": program}],
            },
        )
        harness.sent[request_id] = Sent(1, harness.text, "alpha\nBETA\ngamma\n", token=None)
        harness.send_change(0, 0, "new first line\n")
        answer = await harness.answer(request_id)
        await harness.settle()
        return answer, harness.problems, harness.text

    answer, problems, text = asyncio.run(run())
    assert not problems, problems
    assert answer["result"]["applied"] is False
    assert answer["result"]["reason"] == "document changed"
    assert text == "new first line\nalpha\nbeta\ngamma\n"


def test_a_cancel_right_behind_a_program_edit_applies_nothing() -> None:
    async def run() -> tuple[list[dict[str, Any]], list[Sent], list[str]]:
        harness = Harness(seed=2)
        await harness.start("file:///cancel.txt", "alpha\nbeta\ngamma\n")
        answers, sent = [], []
        for _ in range(50):
            request_id = await harness.edit(with_progress=False)
            harness.cancel(request_id)
            answers.append(await harness.answer(request_id))
            sent.append(harness.sent[request_id])
        await harness.settle()
        return answers, sent, harness.problems

    answers, sent, problems = asyncio.run(run())
    assert not problems, problems
    for answer, request in zip(answers, sent, strict=True):
        assert answer["error"]["code"] == REQUEST_CANCELLED
        assert request.applied == [] and request.sent_edits == []
