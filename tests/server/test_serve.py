"""``cad serve`` end to end: pygls's LanguageClient drives the server as a subprocess."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

from cad.resolver import format, oracle
from cad.server.serve import Settings, splice
from cad.server.text_edits import apply_text_edits, text_edits
from tests.server.lsp_stdio import RawServer

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
        self.progress_on: list = []
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
            self.progress_on.append(params.token)

        @self.client.feature("cad/status")
        def status(params) -> None:
            self.statuses.append(params.state)

    async def start(
        self,
        options: dict | None = None,
        prelude: str = "",
        args: tuple[str, ...] = (),
        workspace: lsp.WorkspaceClientCapabilities | None = None,
    ) -> None:
        """Start ``cad serve`` with ``args`` (after ``prelude``, Python run first in the
        server process); ``workspace``: the client's workspace capabilities."""
        await self.client.start_io(
            sys.executable,
            "-c",
            f"{prelude}\nfrom cad.server.cli import main; main()",
            "serve",
            *args,
        )
        await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(
                    window=lsp.WindowClientCapabilities(work_done_progress=True),
                    workspace=workspace,
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

    async def edit(self, argument, work_done_token: str | None = None) -> dict:
        return await self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command="cad.applyEdit", arguments=[argument], work_done_token=work_done_token
            )
        )

    async def try_edit(self, argument) -> dict:
        """The edit's result, or ``{"error": message}`` when the server answers an error."""
        try:
            return await self.edit(argument)
        except JsonRpcException as exc:
            return {"error": str(exc)}

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


def test_a_multi_file_program_is_byte_exact_through_a_pygls_client() -> None:
    """Several documents, CRLF and an emoji included: one versioned WorkspaceEdit with a
    created and a deleted file, whose edits give exactly the resolved files."""
    from cad.resolver import parse_multi, resolve_multi

    uris = [URI, "file:///tmp/cad-test/util.py", "file:///tmp/cad-test/old.py"]
    texts = [BEFORE, "X = 1\r\nY = 2", "gone\n"]
    program = (
        '<edit file="1">\n<copy lines="1-1"/>\n<copy file="2" lines="2-2"/>\n</edit>\n'
        '<edit file="2">\n<copy file="1" lines="3-4"/>\n</edit>\n'
        '<create path="new.py">\n<copy file="1" lines="2-2"/>\n</create>\n'
        '<delete file="3"/>\n</program>'
    )
    resource_operations = lsp.WorkspaceEditClientCapabilities(
        document_changes=True,
        resource_operations=[lsp.ResourceOperationKind.Create, lsp.ResourceOperationKind.Delete],
    )

    async def scenario():
        c = Client()
        await c.start(workspace=lsp.WorkspaceClientCapabilities(workspace_edit=resource_operations))
        for version, (uri, text) in enumerate(zip(uris, texts, strict=True), 3):
            c.open(text, uri=uri, version=version)
        result = await c.try_edit({"uris": uris[:2], "context": uris[2:], "program": program})
        refused = await c.try_edit({"uris": uris, "program": program.replace("new.py", "util.py")})
        result_all = await c.edit({"uris": uris, "program": program})
        await c.stop()
        return c, result, refused, result_all

    c, result, refused, result_all = run(scenario())
    assert "file 3 (file:///tmp/cad-test/old.py) is a 'context' document" in result["error"]
    assert "is open in the editor" in refused["error"]
    assert result_all["applied"] is True
    (params,) = c.applied
    changes = params.edit.document_changes
    expected = resolve_multi(parse_multi(program), list(zip(uris, texts, strict=True)))
    created = "file:///tmp/cad-test/new.py"
    after = dict(zip(uris, texts, strict=True))
    for change in changes:
        if isinstance(change, lsp.CreateFile):
            after[change.uri] = ""
        elif isinstance(change, lsp.DeleteFile):
            del after[change.uri]
        else:
            uri = change.text_document.uri
            assert change.text_document.version == (None if uri == created else uris.index(uri) + 3)
            after[uri] = apply_text_edits(after[uri], list(change.edits))
    assert after == {
        uris[0]: expected[uris[0]],
        uris[1]: expected[uris[1]],
        created: expected["new.py"],
    }


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


@pytest.mark.parametrize(
    ("uri", "language_id", "before", "after", "lines"), SNAP_CASES, ids=["python", "javascript"]
)
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


def model_options(model: str, budget: int = 100000, mode: str = "program") -> dict:
    return {
        "model": model,
        "device": "cpu",
        "dtype": "float32",
        "maxNewTokens": budget,
        "mode": mode,
    }


LONG = "".join(f"value_{i} = {i}\n" for i in range(200))


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


def kinds(client: Client) -> list[str]:
    """The kinds of the progress values received, in order."""
    return [v["kind"] if isinstance(v, dict) else v.kind for v in client.progress]


def test_progress_goes_to_the_clients_own_token() -> None:
    async def scenario():
        c = Client()
        await c.start()
        c.open(BEFORE)
        program = format(oracle(BEFORE, AFTER))
        first = await c.edit({"uri": URI, "instruction": "-", "program": program}, "client-7")
        c.open(BEFORE, version=2)
        second = await c.edit({"uri": URI, "instruction": "-", "program": program}, "client-7")
        await c.stop()
        return c, first, second

    c, first, second = run(scenario())
    assert first["applied"] is True and second["applied"] is True
    assert c.progress_tokens == []
    assert set(c.progress_on) == {"client-7"}
    assert kinds(c) == ["begin", "end", "begin", "end"]


def test_cancel_on_the_clients_token_applies_nothing(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model))
        c.open(LONG)
        task = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "rename"}, "mine"))
        while not reported(c):
            await asyncio.sleep(0.05)
        c.client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token="mine"))
        result = await task
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert c.progress_tokens == [] and set(c.progress_on) == {"mine"}
    assert result["applied"] is False and result["reason"] == "cancelled"
    assert c.applied == []


def test_cancel_request_ends_the_request_and_stops_decoding(slow_model: str) -> None:
    """``$/cancelRequest`` answers the request with RequestCancelled and stops the decode:
    with its budget of 100000 tokens it would hold the one worker for minutes, yet the next
    edit (which needs that worker too) is answered."""

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
        with pytest.raises(JsonRpcException) as cancelled:
            await asyncio.wrap_future(future)
        answer = await c.edit(
            {"uri": URI, "instruction": "x", "program": "</program>", "dryRun": True}
        )
        await c.stop()
        return c, cancelled.value, answer

    c, cancelled, answer = run(scenario())
    assert cancelled.code == -32800
    assert c.applied == []
    assert answer["applied"] is False and answer["edits"]


BLOCKING_RESOLVE = (
    "import pathlib, time\n"
    "from cad.server import serve\n"
    "_resolve = serve.resolve\n"
    "def resolve_when_released(*args):\n"
    "    marker = pathlib.Path({marker!r})\n"
    "    for _ in range(1200):\n"
    "        if marker.exists():\n"
    "            break\n"
    "        time.sleep(0.05)\n"
    "    return _resolve(*args)\n"
    "serve.resolve = resolve_when_released"
)


def test_version_conflict_and_superseded_edits_apply_nothing(slow_model: str, tmp_path) -> None:
    """A newer edit of the same document supersedes a running one; an edit whose document
    changes while it runs (its program is held until the change has arrived) applies
    nothing and says so."""
    marker = tmp_path / "release"

    async def scenario():
        c = Client()
        await c.start(
            model_options(slow_model), prelude=BLOCKING_RESOLVE.format(marker=str(marker))
        )
        c.open(LONG)
        first = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "one"}))
        while not reported(c):
            await asyncio.sleep(0.05)
        program = format(oracle(LONG, LONG.replace("value_1 = 1", "value_1 = 2")))
        second = asyncio.ensure_future(c.edit({"uri": URI, "instruction": "-", "program": program}))
        superseded = await first
        while kinds(c).count("begin") < 2:
            await asyncio.sleep(0.05)
        c.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=2),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=LONG + "x = 1\n")],
            )
        )
        await asyncio.sleep(0.2)
        marker.touch()
        later = await second
        await c.stop()
        return c, superseded, later

    c, superseded, later = run(scenario())
    assert superseded == {"applied": False, "program": "", "stats": {}, "reason": "superseded"}
    assert later["applied"] is False and later["reason"] == "document changed"
    assert c.applied == []
    assert any("changed while the edit was being decoded" in m for m in c.messages)


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


HANGING_RESOLVE = (
    "import threading\n"
    "from cad.server import serve\n"
    "serve.resolve = lambda *args: threading.Event().wait()"
)


def test_an_edit_that_hangs_does_not_keep_the_server_alive_after_exit() -> None:
    """A worker stuck where no cancel flag reaches it (here: resolving a given program that
    never returns) must not keep the process alive once the client has left: it ends within
    the grace period, with the status the protocol gives (0 after shutdown), and says why."""
    program = format(oracle(LONG, LONG))

    async def scenario():
        c = Client()
        await c.start(prelude=HANGING_RESOLVE)
        c.open(LONG)
        pending = asyncio.ensure_future(
            c.edit({"uri": URI, "instruction": "-", "program": program})
        )
        while "editing" not in c.statuses:
            await asyncio.sleep(0.05)
        await c.client.shutdown_async(None)
        c.client.exit(None)
        await c.client.stop()
        pending.cancel()
        return c.client._server.returncode, await c.client._server.stderr.read()

    code, stderr = run(scenario())
    assert code == 0
    assert b"still running 10 s after the client left; exiting now" in stderr


@pytest.mark.parametrize(
    ("values", "mode"),
    [
        ({}, "rewrite"),
        ({"adapter": "/adapters/cad"}, "program"),
        ({"cad": {"adapter": "/adapters/cad"}}, "program"),
        ({"adapter": ""}, "rewrite"),
        ({"adapter": "/adapters/cad", "mode": "rewrite"}, "rewrite"),
        ({"mode": "program"}, "program"),
    ],
)
def test_auto_mode_is_program_with_an_adapter_else_rewrite(values: dict, mode: str) -> None:
    settings = Settings()
    settings.update(values)
    assert settings.edit_mode() == mode


@pytest.mark.parametrize(
    ("values", "message"),
    [({"mode": "fast"}, "cad.mode"), ({"maxNewTokens": 0}, "cad.maxNewTokens")],
)
def test_bad_settings_are_reported_when_an_edit_needs_them(values: dict, message: str) -> None:
    settings = Settings()
    settings.update(values)
    with pytest.raises(JsonRpcException, match=message):
        settings.edit_mode()
        settings.budget()


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), (0, 0), (8, 8), (16.0, 16), (-1, None), ("8", None)]
)
def test_the_draft_budget_setting_is_a_number_of_tokens_or_the_default(value, expected) -> None:
    settings = Settings()
    settings.update({"cad": {"draftBudget": value}})
    if expected is None and value is not None:
        with pytest.raises(JsonRpcException, match=r"cad\.draftBudget is"):
            settings.draft_budget()
    else:
        assert settings.draft_budget() == expected
    settings.update({"draftBudget": None})
    assert settings.draft_budget() is None


@pytest.mark.parametrize(
    ("text", "start", "end", "new", "expected"),
    [
        ("a\nb\nc\n", 2, 4, "B", "a\nB\nc\n"),
        ("a\r\nb\r\nc\r\n", 3, 6, "B", "a\r\nB\r\nc\r\n"),
        ("a\nb\nc\n", 2, 4, "B\n", "a\nB\nc\n"),
        ("a\nb\nc\n", 2, 4, "", "a\nc\n"),
        ("a\nb\nc", 4, 5, "C", "a\nb\nC"),
        ("a\nb\nc\n", 0, 6, "x", "x"),
    ],
)
def test_splice_keeps_the_line_break_before_the_text_after_a_region(
    text: str, start: int, end: int, new: str, expected: str
) -> None:
    assert splice(text, start, end, new) == expected


REGION_BEFORE = "".join(f"line {i}\n" for i in range(1, 5))
REGION = "    y = x + 1\n    z = y * 2\n"
REGION_DOCUMENT = REGION_BEFORE + REGION + "    return z\n"
REWRITE_INSTRUCTION = "double it"


@pytest.fixture(scope="module")
def stopping_model(tmp_path_factory) -> str:
    """A tiny random model that finishes its reply to the region test: its generation
    config declares, besides the tokenizer's end-of-sequence, the first token of its greedy
    reply that differs from the reply's first token."""

    import torch

    from cad.resolver import Document
    from cad.selector import load_model
    from cad.selector.prompt import rewrite_prompt
    from tests.tiny_model import make_tiny_model

    folder = make_tiny_model(tmp_path_factory.mktemp("stopping-model"), "qwen2", seed=3)
    loaded = load_model(str(folder), device="cpu", dtype="float32")
    prompt = rewrite_prompt(loaded.tokenizer, Document(REGION), REWRITE_INSTRUCTION)
    with torch.inference_mode():
        reply = loaded.model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False)[
            0, len(prompt) :
        ].tolist()
    stop = next(token for token in reply if token != reply[0])
    config_path = folder / "generation_config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config["eos_token_id"] = [loaded.tokenizer.eos_token_id, stop]
    config_path.write_text(json.dumps(config))
    return str(folder)


def decoded_rewrite(model: str, region: str, budget: int):
    """What the rewrite decoder itself returns for ``region`` (the expectation)."""
    from cad.selector import load_model
    from cad.selector.rewrite import rewrite

    loaded = load_model(model, device="cpu", dtype="float32")
    return rewrite(loaded, region, REWRITE_INSTRUCTION, max_new_tokens=budget)


def test_rewrite_of_a_range_is_applied_exactly_as_decoded(stopping_model: str) -> None:
    expected = decoded_rewrite(stopping_model, REGION, 64)
    assert not expected.stats.truncated

    async def scenario():
        c = Client()
        options = model_options(stopping_model, budget=64)
        del options["mode"]
        await c.start(options)
        c.open(REGION_DOCUMENT, version=5)
        rng = {"start": {"line": 4, "character": 0}, "end": {"line": 6, "character": 0}}
        result = await c.edit({"uri": URI, "instruction": REWRITE_INSTRUCTION, "range": rng})
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert result["applied"] is True
    assert result["stats"]["mode"] == "rewrite" and result["program"] == ""
    assert len(c.progress_tokens) == 1 and set(c.progress_on) == set(c.progress_tokens)
    assert kinds(c)[0] == "begin" and kinds(c)[-1] == "end" and "report" in kinds(c), kinds(c)
    assert c.statuses == ["editing", "loading", "editing", "ready"], c.statuses
    kept = (
        expected.text if expected.text.endswith("\n") or not expected.text else expected.text + "\n"
    )
    after = REGION_BEFORE + kept + "    return z\n"
    (params,) = c.applied
    (change,) = params.edit.document_changes
    assert change.text_document.version == 5
    assert list(change.edits) == text_edits(REGION_DOCUMENT, after)
    assert all(e.range.start.line >= 4 and e.range.end.line <= 6 for e in change.edits)
    assert apply_text_edits(REGION_DOCUMENT, list(change.edits)) == after


def test_rewrite_that_spends_its_budget_is_refused(slow_model: str) -> None:
    budget = 12
    expected = decoded_rewrite(slow_model, REGION_DOCUMENT, budget)

    async def scenario():
        c = Client()
        await c.start(model_options(slow_model, budget=budget, mode="rewrite"))
        c.open(REGION_DOCUMENT)
        result = await c.try_edit({"uri": URI, "instruction": REWRITE_INSTRUCTION})
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert expected.stats.truncated, "the random model must not finish within 12 tokens"
    assert "budget of 12 tokens" in result["error"] and "cad.maxNewTokens" in result["error"]
    assert c.applied == [] and c.statuses[-1] == "error"


OOM = (
    "from cad import selector\n"
    "def out_of_memory(*args, **kwargs):\n"
    "    raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
    "selector.Decoder.edit = out_of_memory"
)


@pytest.mark.parametrize(
    ("options", "prelude", "document", "messages"),
    [
        (
            {"model": "/nonexistent/cad-model", "device": "cpu"},
            "",
            BEFORE,
            ["does not exist", "cad.model"],
        ),
        ({"mode": "fast"}, "", BEFORE, ["cad.mode is 'fast'", "auto, program, rewrite"]),
        (None, "", "x = 1\n" * 3000, ["context is 8192", "smaller range"]),
        (None, OOM, BEFORE, ["out of memory", "cad.device to cpu"]),
    ],
    ids=["model-missing", "bad-mode", "document-too-long", "out-of-memory"],
)
def test_failures_reach_the_editor_with_a_next_step(
    slow_model: str, options: dict | None, prelude: str, document: str, messages: list[str]
) -> None:
    async def scenario():
        c = Client()
        await c.start(options or model_options(slow_model, budget=64), prelude=prelude)
        c.open(document)
        with pytest.raises(JsonRpcException) as info:
            await c.edit({"uri": URI, "instruction": "fix it"})
        c.open(BEFORE, uri="file:///tmp/cad-test/other.py")
        after = await c.edit(
            {
                "uri": "file:///tmp/cad-test/other.py",
                "instruction": "x",
                "program": format(oracle(BEFORE, AFTER)),
            }
        )
        await c.stop()
        return info.value, after

    error, after = run(scenario())
    for message in messages:
        assert message in str(error)
    assert after["applied"] is True


def test_preloaded_model_serves_the_first_edit_without_loading(stopping_model: str) -> None:
    expected = decoded_rewrite(stopping_model, REGION, 64)

    async def scenario():
        c = Client()
        preload = ("--preload", "--model", stopping_model, "--device", "cpu", "--dtype", "float32")
        await c.start({"maxNewTokens": 64, "mode": "rewrite"}, args=preload)
        c.open(REGION_DOCUMENT)
        rng = {"start": {"line": 4, "character": 0}, "end": {"line": 6, "character": 0}}
        result = await c.edit({"uri": URI, "instruction": REWRITE_INSTRUCTION, "range": rng})
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert "editing" in c.statuses and "loading" not in c.statuses
    assert result["applied"] is True and result["stats"]["mode"] == "rewrite"
    kept = (
        expected.text if expected.text.endswith("\n") or not expected.text else expected.text + "\n"
    )
    assert text_after(c, REGION_DOCUMENT) == REGION_BEFORE + kept + "    return z\n"


def test_failed_preload_keeps_serving_and_names_the_model_on_first_edit() -> None:
    async def scenario():
        c = Client()
        await c.start(args=("--preload", "--model", "/nonexistent/cad-model"))
        c.open(BEFORE)
        with pytest.raises(JsonRpcException) as info:
            await c.edit({"uri": URI, "instruction": "fix it"})
        program = format(oracle(BEFORE, AFTER))
        after = await c.edit({"uri": URI, "instruction": "x", "program": program})
        await c.stop()
        return c, info.value, after

    c, error, after = run(scenario())
    assert "/nonexistent/cad-model" in str(error) and "cad.model" in str(error)
    assert after["applied"] is True and text_after(c, BEFORE) == AFTER


NOISE = (
    "import os\n"
    "from cad import resolver\n"
    "resolve = resolver.resolve\n"
    "def noisy_resolve(*args):\n"
    "    print('stray print from the edit')\n"
    "    os.write(1, b'stray native write\\n')\n"
    "    return resolve(*args)\n"
    "resolver.resolve = noisy_resolve"
)


def test_stdout_carries_only_lsp_frames(slow_model: str, tmp_path) -> None:
    server = RawServer(tmp_path / "stderr.log", prelude=NOISE)
    options = model_options(slow_model, budget=4)
    initialized = server.request(
        "initialize", {"processId": None, "capabilities": {}, "initializationOptions": options}
    )
    server.send({"method": "initialized", "params": {}})
    server.send(
        {
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": BEFORE}
            },
        }
    )
    command = "workspace/executeCommand"
    program = format(oracle(BEFORE, AFTER))
    edited = server.request(
        command,
        {
            "command": "cad.applyEdit",
            "arguments": [{"uri": URI, "instruction": "x", "program": program}],
        },
    )
    decoded = server.request(
        command, {"command": "cad.applyEdit", "arguments": [{"uri": URI, "instruction": "x"}]}
    )
    broken = server.request(
        command,
        {
            "command": "cad.applyEdit",
            "arguments": [{"uri": URI, "instruction": "x", "program": "<x"}],
        },
    )
    code, _ = server.close()
    assert initialized["result"]["capabilities"]["executeCommandProvider"]
    assert edited["result"]["applied"] is True
    assert "budget of 4 tokens" in decoded["error"]["message"]
    assert "expected" in broken["error"]["message"]
    assert code == 0
    log = (tmp_path / "stderr.log").read_text()
    assert "stray print from the edit" in log and "stray native write" in log


def test_an_adapter_runs_on_its_recorded_base_model(tmp_path) -> None:
    """Without a ``model`` setting the adapter's base model is loaded; another model is
    refused as a bad setting, naming both."""
    base = tmp_path / "base-model"
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "base_model_name_or_path": str(base)})
    )
    server = RawServer(tmp_path / "log")
    server.initialize({"adapter": str(adapter), "device": "cpu"})
    server.open(URI, BEFORE)
    chosen = server.edit({"uri": URI, "instruction": "fix it"})
    server.notify("workspace/didChangeConfiguration", {"settings": {"cad": {"model": "/m/other"}}})
    mismatch = server.edit({"uri": URI, "instruction": "fix it"})
    code, _ = server.close()
    assert code == 0
    assert f"model folder {base} does not exist" in chosen["error"]["message"]
    assert mismatch["error"]["code"] == -32602
    assert mismatch["error"]["message"] == (
        f"adapter {adapter} was trained on {base}, not /m/other; clear cad.model to run it on {base}"
    )


SYNTAX_PROBE = (
    "import cad.selector.rewrite as rewriting\n"
    "def probe(loaded, region, instruction, **options):\n"
    "    syntax = options['syntax']\n"
    "    raise RuntimeError('held to ' + ('nothing' if syntax is None else syntax.language))\n"
    "rewriting.rewrite = probe\n"
)
PARSING = "def mean(values):\n    return sum(values) / len(values)\n"


@pytest.mark.parametrize(
    ("syntax", "text", "held_to", "note"),
    [
        ("auto", PARSING, "python", False),
        ("none", PARSING, "nothing", False),
        ("auto", REGION_DOCUMENT, "nothing", True),
    ],
)
def test_the_syntax_setting_reaches_the_decoder(
    slow_model: str, syntax: str, text: str, held_to: str, note: bool
) -> None:
    async def scenario():
        c = Client()
        options = {**model_options(slow_model, budget=8, mode="rewrite"), "syntax": syntax}
        await c.start(options, prelude=SYNTAX_PROBE)
        c.open(text)
        result = await c.try_edit({"uri": URI, "instruction": REWRITE_INSTRUCTION})
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert f"held to {held_to}" in result["error"]
    noted = [m for m in c.messages if "editing without the syntax constraint" in m]
    assert bool(noted) == note and c.applied == []


LINE_2 = {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}


@pytest.mark.parametrize(
    ("syntax", "text", "message"),
    [
        ("python", REGION_DOCUMENT, 'set cad.syntax to "none"'),
        ("java", REGION_DOCUMENT, "cad.syntax is 'java'"),
        ("python", "x = '\ud83d'\ny = 1\n", "lone UTF-16 surrogate, so it is not python"),
    ],
)
def test_a_syntax_the_document_cannot_be_held_to_is_refused(
    slow_model: str, syntax: str, text: str, message: str
) -> None:
    async def scenario():
        c = Client()
        options = {**model_options(slow_model, budget=8, mode="rewrite"), "syntax": syntax}
        await c.start(options)
        c.open(text)
        argument = {"uri": URI, "instruction": REWRITE_INSTRUCTION, "range": LINE_2}
        result = await c.try_edit(argument)
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert message in result["error"] and "\n" not in result["error"]
    assert c.applied == []
