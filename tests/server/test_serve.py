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

    def open(self, text: str, uri: str = URI, version: int = 1) -> None:
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id="python", version=version, text=text
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
    assert result.applied is True if hasattr(result, "applied") else result["applied"]
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
    data = result if isinstance(result, dict) else result.__dict__
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
