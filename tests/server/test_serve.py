"""``cad serve`` end to end: pygls's LanguageClient drives the server as a subprocess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

from cad.resolver import format, oracle
from cad.server.serve import Settings, splice
from cad.server.text_edits import apply_text_edits, text_edits

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
        self, options: dict | None = None, prelude: str = "", args: tuple[str, ...] = ()
    ) -> None:
        """Start ``cad serve`` with ``args`` (after ``prelude``, Python run first in the
        server process)."""
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


def test_model_edit_reports_progress_and_status(slow_model: str) -> None:
    async def scenario():
        c = Client()
        await c.start(model_options(slow_model, budget=40))
        c.open(LONG)
        result = await c.try_edit({"uri": URI, "instruction": "rename"})
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
    import json

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
    if expected.stats.truncated:
        assert "budget of 12 tokens" in result["error"] and "cad.maxNewTokens" in result["error"]
        assert c.applied == [] and "error" in c.statuses
    else:
        assert text_after(c, REGION_DOCUMENT) == expected.text


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


def test_preloaded_model_serves_the_first_edit_without_loading(slow_model: str) -> None:
    async def scenario():
        c = Client()
        preload = ("--preload", "--model", slow_model, "--device", "cpu", "--dtype", "float32")
        await c.start({"maxNewTokens": 16, "mode": "program"}, args=preload)
        c.open(BEFORE)
        result = await c.try_edit({"uri": URI, "instruction": "fix it"})
        await c.stop()
        return c, result

    c, result = run(scenario())
    assert "editing" in c.statuses and "loading" not in c.statuses
    if "error" in result:
        assert "budget" in result["error"]
        assert c.applied == []
    else:
        assert result["stats"]
        assert len(c.applied) == 1


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


class RawServer:
    """``cad serve`` over stdio read byte by byte: every byte on stdout must belong to an
    LSP frame (headers, blank line, JSON body of the announced length)."""

    def __init__(self, prelude: str, stderr_path) -> None:
        self.stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"{prelude}\nfrom cad.server.cli import main; main()", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self.watchdog = threading.Timer(120, self.process.kill)
        self.watchdog.start()
        self.next_id = 0

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def frame(self) -> dict | None:
        """The next frame, or None at the end of the stream; anything else fails the test."""
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

    def request(self, method: str, params: dict | None) -> dict:
        """Send a request; answer the server's own requests until its response arrives."""
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.frame()
            assert message is not None, "the server closed stdout before answering"
            if message.get("id") == self.next_id and "method" not in message:
                return message
            if message.get("method") == "workspace/applyEdit":
                self.send({"id": message["id"], "result": {"applied": True}})

    def close(self) -> tuple[int, list[dict]]:
        """Exit the server; its return code and the frames it sent after ``exit``."""
        self.send({"method": "exit"})
        self.process.stdin.close()
        rest = []
        while (message := self.frame()) is not None:
            rest.append(message)
        code = self.process.wait(timeout=60)
        self.watchdog.cancel()
        self.stderr.close()
        return code, rest


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
    server = RawServer(NOISE, tmp_path / "stderr.log")
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
    shut = server.request("shutdown", None)
    code, _ = server.close()
    assert initialized["result"]["capabilities"]["executeCommandProvider"]
    assert edited["result"]["applied"] is True
    assert "budget of 4 tokens" in decoded["error"]["message"]
    assert "expected" in broken["error"]["message"]
    assert shut["result"] is None and code == 0
    log = (tmp_path / "stderr.log").read_text()
    assert "stray print from the edit" in log and "stray native write" in log
