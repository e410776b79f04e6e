"""``cad serve`` end to end: pygls's LanguageClient drives the server as a subprocess."""

from __future__ import annotations

import asyncio
import sys

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

from resolver import format, oracle
from server.text_edits import apply_text_edits

URI = "file:///tmp/cad-test/mean.py"
BEFORE = "def mean(values):\r\n    return sum(values) / len(values) + 1\r\n\r\n# 😀 done\r\n"
AFTER = "def mean(values):\r\n    return sum(values) / len(values)\r\n\r\n# 😀 done\r\n"


class Client:
    """A pygls client that records (and accepts) every workspace/applyEdit."""

    def __init__(self) -> None:
        self.client = LanguageClient("cad-test", "1.0")
        self.applied: list[lsp.ApplyWorkspaceEditParams] = []
        self.messages: list[str] = []
        self.progress_tokens: list = []
        self.progress: list = []
        self.statuses: list[str] = []

        @self.client.feature(lsp.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
            self.applied.append(params)
            return lsp.ApplyWorkspaceEditResult(applied=True)

        @self.client.feature(lsp.WINDOW_SHOW_MESSAGE)
        def show_message(params: lsp.ShowMessageParams) -> None:
            self.messages.append(params.message)

        @self.client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create_progress(params: lsp.WorkDoneProgressCreateParams) -> None:
            self.progress_tokens.append(params.token)

        @self.client.feature(lsp.PROGRESS)
        def progress(params: lsp.ProgressParams) -> None:
            self.progress.append(params.value)

        @self.client.feature("cad/status")
        def status(params) -> None:
            self.statuses.append(params.state)

    async def start(self, options: dict | None = None) -> None:
        await self.client.start_io(
            sys.executable, "-c", "from server.cli import main; main()", "serve"
        )
        await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(
                    window=lsp.WindowClientCapabilities(work_done_progress=True)
                ),
                initialization_options=options or {},
            )
        )
        self.client.initialized(lsp.InitializedParams())

    def open(
        self, text: str, uri: str = URI, version: int = 1, language_id: str = "python"
    ) -> None:
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id=language_id, version=version, text=text
                )
            )
        )

    async def edit(self, argument) -> dict:
        return await self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="cad.applyEdit", arguments=[argument])
        )

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def reported(client: Client) -> bool:
    """Whether the server has sent a progress report (values arrive as plain dicts)."""
    return any(
        (v.get("kind") if isinstance(v, dict) else getattr(v, "kind", None)) == "report"
        for v in client.progress
    )


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def text_after(client: Client, before: str) -> str:
    (params,) = client.applied
    (change,) = params.edit.document_changes
    return apply_text_edits(before, list(change.edits))


def test_program_edit_arrives_as_minimal_versioned_edit() -> None:
    async def scenario():
        c = Client()
        await c.start()
        c.open(BEFORE, version=7)
        result = await c.edit(
            {"uri": URI, "instruction": "drop + 1", "program": format(oracle(BEFORE, AFTER))}
        )
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert result["applied"] is True
    assert result["program"] == format(oracle(BEFORE, AFTER))
    (params,) = c.applied
    (change,) = params.edit.document_changes
    assert change.text_document.version == 7
    (edit,) = change.edits
    assert edit.range.start.line == edit.range.end.line == 1
    assert edit.new_text == ""
    assert text_after(c, BEFORE) == AFTER


def test_range_edit_never_touches_outside_lines() -> None:
    before = "".join(f"line {i}\n" for i in range(1, 21))

    async def scenario():
        c = Client()
        await c.start()
        c.open(before)
        program = '<gen>changed\n</gen>\n<copy lines="2-2"/>\n</program>'
        rng = {"start": {"line": 9, "character": 0}, "end": {"line": 11, "character": 0}}
        result = await c.edit({"uri": URI, "instruction": "x", "program": program, "range": rng})
        await c.stop()
        return c, result

    c, _ = run(scenario())
    after = text_after(c, before)
    assert after == before.replace("line 10\n", "changed\n")


SNAP_CASES = [
    (
        "file:///tmp/cad-test/area.py",
        "python",
        "import math\n\n\n@cache\ndef area(r):\n    pi = 3\n    return pi * r * r\n\n\nx = 1\n",
        "import math\n\n\n@cache\ndef area(r):\n    pi = 3.14159\n    return pi * r * r\n\n\nx = 1\n",
        (3, 7),
    ),
    (
        "file:///tmp/cad-test/area.js",
        "plaintext",
        "const k = 1;\nconst area = (r) => {\n  pi = 3;\n  return pi * r * r;\n};\n",
        "const k = 1;\nconst area = (r) => {\n  pi = 3.14159;\n  return pi * r * r;\n};\n",
        (1, 5),
    ),
]


@pytest.mark.parametrize(("uri", "language_id", "before", "after", "lines"), SNAP_CASES)
def test_snap_widens_the_range_to_the_enclosing_definition(
    uri: str, language_id: str, before: str, after: str, lines: tuple[int, int]
) -> None:
    inside = before.splitlines().index(next(x for x in before.splitlines() if "pi = 3" in x))
    snapped = "".join(before.splitlines(keepends=True)[lines[0] : lines[1]])
    wanted = "".join(after.splitlines(keepends=True)[lines[0] : lines[1]])

    async def scenario():
        c = Client()
        await c.start()
        c.open(before, uri=uri, language_id=language_id)
        rng = {"start": {"line": inside, "character": 2}, "end": {"line": inside, "character": 4}}
        argument = {"uri": uri, "instruction": "precise pi", "range": rng, "snap": True}
        result = await c.edit({**argument, "program": format(oracle(snapped, wanted))})
        with pytest.raises(JsonRpcException) as unsnapped:
            await c.edit({**argument, "snap": False, "program": format(oracle(snapped, wanted))})
        await c.stop()
        return c, result, unsnapped.value

    c, result, unsnapped = run(scenario())
    assert result["applied"] is True
    assert result["range"] == {
        "start": {"line": lines[0], "character": 0},
        "end": {"line": lines[1], "character": 0},
    }
    assert text_after(c, before) == after
    assert "out of range" in str(unsnapped)


def test_dry_run_returns_edits_without_applying() -> None:
    async def scenario():
        c = Client()
        await c.start()
        c.open(BEFORE, version=3)
        result = await c.edit(
            {
                "uri": URI,
                "instruction": "x",
                "program": format(oracle(BEFORE, AFTER)),
                "dryRun": True,
            }
        )
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert c.applied == []
    data = result
    assert data["version"] == 3 and data["applied"] is False
    edits = [
        lsp.TextEdit(
            range=lsp.Range(
                start=lsp.Position(**e["range"]["start"]), end=lsp.Position(**e["range"]["end"])
            ),
            new_text=e["newText"],
        )
        for e in data["edits"]
    ]
    assert apply_text_edits(BEFORE, edits) == AFTER


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ({"instruction": "x"}, "'uri'"),
        ({"uri": URI, "instruction": " "}, "'instruction'"),
        ({"uri": "file:///not/open.py", "instruction": "x", "program": "</program>"}, "not open"),
        (
            {"uri": URI, "instruction": "x", "program": '<copy lines="1-99"/>\n</program>'},
            "out of range",
        ),
        ({"uri": URI, "instruction": "x", "program": "<oops"}, "expected"),
        (
            {"uri": URI, "instruction": "x", "range": {"start": 1}, "program": "</program>"},
            "'range'",
        ),
    ],
)
def test_malformed_arguments_get_an_error_and_the_server_stays_up(argument, message: str) -> None:
    async def scenario():
        c = Client()
        await c.start()
        c.open(BEFORE)
        with pytest.raises(JsonRpcException) as info:
            await c.edit(argument)
        after = await c.edit(
            {"uri": URI, "instruction": "x", "program": format(oracle(BEFORE, AFTER))}
        )
        await c.stop()
        return info.value, after, c

    error, _, c = run(scenario())
    assert message in str(error)
    assert len(c.applied) == 1


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory) -> str:
    """A tiny random model folder; with a large budget its decoding runs for a while."""
    from tests.tiny_model import make_tiny_model

    return str(make_tiny_model(tmp_path_factory.mktemp("serve-model"), "qwen2"))


def model_options(model: str, budget: int = 100000) -> dict:
    return {"model": model, "device": "cpu", "dtype": "float32", "maxNewTokens": budget}


LONG = "".join(f"value_{i} = {i}\n" for i in range(200))


def test_model_edit_reports_progress_and_status(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model, budget=40))
        c.open(LONG)
        try:
            result = await c.edit({"uri": URI, "instruction": "rename"})
        except JsonRpcException as exc:
            result = {"error": str(exc)}
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert c.progress_tokens
    assert "loading" in c.statuses and "editing" in c.statuses
    if "error" in result:
        assert "budget" in result["error"]
        assert c.applied == []
    else:
        assert result["stats"]["generated_tokens"] <= 40


def test_progress_cancel_applies_nothing(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model))
        c.open(LONG)
        task = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "rename everything"}))
        while not reported(c):
            await asyncio.sleep(0.05)
        c.client.window_work_done_progress_cancel(
            lsp.WorkDoneProgressCancelParams(token=c.progress_tokens[0])
        )
        result = await task
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert result["applied"] is False and result["reason"] == "cancelled"
    assert c.applied == []


def test_cancel_request_applies_nothing(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model))
        c.open(LONG)
        future = c.client.protocol.send_request(
            lsp.WORKSPACE_EXECUTE_COMMAND,
            lsp.ExecuteCommandParams(
                command="cad.applyEdit", arguments=[{"uri": URI, "instruction": "x"}]
            ),
        )
        while not reported(c):
            await asyncio.sleep(0.05)
        message_id = next(iter(c.client.protocol._request_futures))
        c.client.protocol.notify("$/cancelRequest", lsp.CancelParams(id=message_id))
        await asyncio.sleep(1.0)
        answer = await c.edit(
            {"uri": URI, "instruction": "x", "program": "</program>", "dryRun": True}
        )
        await c.stop()
        return c, future, answer

    c, future, answer = run(scenario())
    assert c.applied == []
    assert answer["applied"] is False and answer["edits"]
    assert future.cancelled() or future.done()


def test_version_conflict_and_superseded_edits_apply_nothing(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model, budget=60))
        c.open(LONG)
        first = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "one"}))
        while not c.progress:
            await asyncio.sleep(0.05)
        second = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "two"}))
        superseded = await first
        c.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=2),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=LONG + "x = 1\n")],
            )
        )
        try:
            later = await second
        except JsonRpcException as exc:
            later = {"applied": False, "reason": str(exc)}
        await c.stop()
        return c, superseded, later

    c, superseded, later = run(scenario())
    assert superseded == {"applied": False, "program": "", "stats": {}, "reason": "superseded"}
    assert later["applied"] is False
    assert c.applied == []
    if later.get("reason") == "document changed":
        assert any("changed" in m for m in c.messages)


def test_shutdown_during_an_edit_exits_cleanly(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model))
        c.open(LONG)
        pending = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "x"}))
        while not reported(c):
            await asyncio.sleep(0.05)
        await c.client.shutdown_async(None)
        c.client.exit(None)
        await c.client.stop()
        pending.cancel()
        return c, c.client._server.returncode if c.client._server else None

    c, code = run(scenario())
    assert c.applied == []
    assert code == 0
