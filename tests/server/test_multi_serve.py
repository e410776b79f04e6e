"""``cad.applyEdit`` over several documents, against one in-process server: one versioned
``WorkspaceEdit`` with file creation and deletion, built from the documents as they were
when the request arrived, and nothing applied when any of them changed meanwhile."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from cad.resolver import Document, apply_changes, parse_multi, resolve_multi
from cad.server.lsp_adapter import CadProtocol, dispatch
from cad.server.multi_serve import created_uri, default_root
from cad.server.serve import build_server
from cad.server.text_edits import apply_text_edits
from tests.server.test_interleavings import REQUEST_CANCELLED, lsp_text_edit

APP = "file:///work/pkg/app.py"
UTIL = "file:///work/pkg/util.py"
OLD = "file:///work/pkg/old.py"
CTX = "file:///work/pkg/ctx.py"
TEXTS = {
    APP: "import os\n\ndef helper(x):\n    return x + 1\n\ndef main():\n    return helper(2)\n",
    UTIL: "X = 1\n",
    OLD: "gone\n",
    CTX: "CTX = 3\n",
}
PROGRAM = """<edit file="1">
<copy lines="1-2"/>
<gen>from util import helper
</gen>
<copy lines="5-7"/>
</edit>
<edit file="2">
<copy lines="1-1"/>
<copy file="1" lines="2-4"/>
<copy file="4" lines="1-1"/>
</edit>
<create path="helpers/new.py">
<copy file="1" lines="3-4"/>
</create>
<delete file="3"/>
</program>
"""
NEW = "file:///work/pkg/helpers/new.py"
RESOURCE_OPERATIONS = {
    "documentChanges": True,
    "resourceOperations": ["create", "rename", "delete"],
}


@dataclass
class Client:
    """One server and one client on one event loop (as in ``test_interleavings``): the
    client holds every document with its version and applies a ``workspace/applyEdit``
    only when every versioned document edit names the version it holds."""

    capabilities: dict[str, Any] = field(
        default_factory=lambda: {"workspace": {"workspaceEdit": RESOURCE_OPERATIONS}}
    )
    documents: dict[str, tuple[int, str]] = field(default_factory=dict)
    sent_edits: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    applied: int = 0
    history: list[tuple[dict[str, str], dict[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ls, self.cad = build_server()
        self.protocol: CadProtocol = self.ls.protocol  # type: ignore[assignment]
        self.protocol.set_writer(self, include_headers=False)
        self.loop = asyncio.get_running_loop()
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}

    def to_server(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.loop.call_soon(dispatch, self.protocol, body)

    def write(self, data: bytes) -> None:
        message = json.loads(data)
        if "method" not in message:
            self.pending[message["id"]].set_result(message)
        elif message["method"] == "workspace/applyEdit":
            self.sent_edits.append(message["params"])
            applied = self.apply(message["params"]["edit"])
            self.to_server({"id": message["id"], "result": {"applied": applied}})
        elif message["method"] == "window/showMessage":
            self.messages.append(message["params"]["message"])
        elif "id" in message:
            self.to_server({"id": message["id"], "result": None})

    def close(self) -> None:
        """The writer interface's close."""

    def apply(self, edit: dict[str, Any]) -> bool:
        """Apply every operation, or none when a versioned edit names another version or a
        created file exists or a deleted one does not."""
        before = self.texts()
        documents = dict(self.documents)
        for change in edit["documentChanges"]:
            kind = change.get("kind")
            if kind == "create":
                if change["uri"] in documents:
                    return False
                documents[change["uri"]] = (0, "")
            elif kind == "delete":
                if change["uri"] not in documents:
                    return False
                del documents[change["uri"]]
            else:
                uri = change["textDocument"]["uri"]
                version = change["textDocument"]["version"]
                if uri not in documents or version not in (None, documents[uri][0]):
                    return False
                edits = [lsp_text_edit(item) for item in change["edits"]]
                documents[uri] = (documents[uri][0], apply_text_edits(documents[uri][1], edits))
        for uri in set(self.documents) | set(documents):
            if uri not in documents:
                self.to_server(
                    {"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}}
                )
            elif self.documents.get(uri) != documents[uri]:
                version, text = documents[uri]
                if uri in self.documents:
                    self.change(uri, text)
                else:
                    self.documents[uri] = (version, text)
                    self.open(uri, text)
        self.documents = {uri: self.documents[uri] for uri in documents}
        self.applied += 1
        self.history.append((before, self.texts()))
        return True

    async def request(self, method: str, params: Any) -> int:
        request_id = next(self.ids)
        self.pending[request_id] = self.loop.create_future()
        self.to_server({"id": request_id, "method": method, "params": params})
        return request_id

    async def answer(self, request_id: int) -> dict[str, Any]:
        return await asyncio.wait_for(self.pending[request_id], 10)

    async def start(self, texts: dict[str, str]) -> None:
        initialize = {"processId": None, "capabilities": self.capabilities}
        answer = await self.answer(await self.request("initialize", initialize))
        assert "result" in answer, answer
        self.to_server({"method": "initialized", "params": {}})
        for uri, text in texts.items():
            self.open(uri, text)

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.documents[uri] = (version, text)
        item = {"uri": uri, "languageId": "python", "version": version, "text": text}
        self.to_server({"method": "textDocument/didOpen", "params": {"textDocument": item}})

    def change(self, uri: str, text: str) -> None:
        version = self.documents[uri][0] + 1
        self.documents[uri] = (version, text)
        self.to_server(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": text}],
                },
            }
        )

    async def edit(self, argument: dict[str, Any]) -> int:
        params = {"command": "cad.applyEdit", "arguments": [argument]}
        return await self.request("workspace/executeCommand", params)

    async def settle(self) -> None:
        await self.answer(await self.request("settle_probe", None))

    def texts(self) -> dict[str, str]:
        return {uri: text for uri, (_, text) in self.documents.items()}


def run(scenario: Any) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 60))


def expected_after(texts: dict[str, str], program: str, uris: list[str]) -> dict[str, str]:
    """Every file after the program, by URI (created paths under the first one's folder)."""
    changes = resolve_multi(parse_multi(program), [(uri, texts[uri]) for uri in uris])
    root = default_root(uris[0])
    named = {
        (path if path in texts else created_uri(root, path)): text for path, text in changes.items()
    }
    return apply_changes(texts, named)


ARGUMENT = {"uris": [APP, UTIL, OLD], "context": [CTX], "program": PROGRAM}


def test_a_multi_file_program_arrives_as_one_versioned_workspace_edit() -> None:
    async def scenario() -> tuple[Client, dict[str, Any]]:
        client = Client()
        await client.start(TEXTS)
        client.change(APP, TEXTS[APP])  # version 2
        answer = await client.answer(await client.edit(ARGUMENT))
        await client.settle()
        return client, answer

    client, answer = run(scenario)
    result = answer["result"]
    assert result["applied"] is True
    assert result["program"] == PROGRAM.rstrip("\n")
    assert [(f["uri"], f["status"]) for f in result["files"]] == [
        (APP, "modified"),
        (UTIL, "modified"),
        (NEW, "created"),
        (OLD, "deleted"),
    ]
    (params,) = client.sent_edits
    changes = params["edit"]["documentChanges"]
    kinds = [change.get("kind") for change in changes]
    assert kinds == [None, None, None, None, "create", None, "delete"]
    # versioned edits first (the context document and the deleted one: version checks without
    # edits), then the created file and its text, then the deletion
    assert changes[0] == {"textDocument": {"uri": CTX, "version": 1}, "edits": []}
    assert changes[1]["textDocument"] == {"uri": APP, "version": 2}
    assert changes[2]["textDocument"] == {"uri": UTIL, "version": 1}
    assert changes[3] == {"textDocument": {"uri": OLD, "version": 1}, "edits": []}
    assert changes[4]["options"] == {"overwrite": False, "ignoreIfExists": False}
    assert changes[5]["textDocument"] == {"uri": NEW, "version": None}
    assert changes[6] == {"kind": "delete", "uri": OLD, "options": {"recursive": False}}
    assert client.texts() == expected_after(TEXTS, PROGRAM, [APP, UTIL, OLD, CTX])
    assert client.texts()[NEW] == "def helper(x):\n    return x + 1\n"
    # the server's copies follow the client's (the deleted one closed, the new one opened)
    assert {uri: doc.text for uri, doc in client.protocol.documents.snapshot().items()} == (
        client.texts()
    )


def test_a_dry_run_returns_the_workspace_edit_and_sends_nothing() -> None:
    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str], bool]:
        client = Client(capabilities={})
        await client.start(TEXTS)
        answer = await client.answer(await client.edit({**ARGUMENT, "dryRun": True}))
        sent, before = list(client.sent_edits), client.texts()
        applied = client.apply(answer["result"]["edit"])
        await client.settle()
        return answer, sent, before, applied and client.texts() == expected

    expected = expected_after(TEXTS, PROGRAM, [APP, UTIL, OLD, CTX])
    answer, sent, before, applied_exactly = run(scenario)
    result = answer["result"]
    assert result["applied"] is False and "reason" not in result
    assert sent == [] and before == TEXTS
    assert applied_exactly


@pytest.mark.parametrize("changed", [APP, UTIL, OLD, CTX])
def test_a_change_to_any_document_right_behind_the_request_applies_nothing(changed) -> None:
    """The race fix holds for every document: a ``didChange`` of any of them (edited,
    deleted or only copied from) sent right behind the request leaves everything as it is,
    and the answer names the document."""

    async def scenario() -> tuple[Client, dict[str, Any]]:
        client = Client()
        await client.start(TEXTS)
        request_id = await client.edit(ARGUMENT)
        client.change(changed, "changed meanwhile\n" + TEXTS[changed])
        answer = await client.answer(request_id)
        await client.settle()
        return client, answer

    client, answer = run(scenario)
    result = answer["result"]
    assert result["applied"] is False
    assert result["reason"] == "document changed" and result["changed"] == changed
    assert client.sent_edits == [] and client.applied == 0
    assert client.texts() == {**TEXTS, changed: "changed meanwhile\n" + TEXTS[changed]}
    (message,) = client.messages
    assert changed in message and "nothing was applied" in message


def test_a_cancel_right_behind_a_multi_file_edit_applies_nothing() -> None:
    async def scenario() -> tuple[Client, dict[str, Any]]:
        client = Client()
        await client.start(TEXTS)
        request_id = await client.edit(ARGUMENT)
        client.to_server({"method": "$/cancelRequest", "params": {"id": request_id}})
        answer = await client.answer(request_id)
        await client.settle()
        return client, answer

    client, answer = run(scenario)
    assert answer["error"]["code"] == REQUEST_CANCELLED
    assert client.sent_edits == [] and client.texts() == TEXTS


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ({"uris": [APP, UTIL]}, "need an 'instruction'"),
        ({"uris": [APP, UTIL], "instruction": " "}, "need an 'instruction'"),
        ({"uris": [APP, "file:///not/open.py"], "program": "</program>"}, "not open"),
        ({"uris": [APP, APP], "program": "</program>"}, "given twice"),
        ({"uris": [APP], "context": [APP], "program": "</program>"}, "given twice"),
        ({"uris": [], "program": "</program>"}, "names no document"),
        ({"uris": APP, "program": "</program>"}, "'uris' must be a list"),
        ({"uri": APP, "uris": [APP], "program": "</program>"}, "not both"),
        (
            {"uris": [APP, UTIL], "program": "</program>", "range": {"start": {"line": 0}}},
            "'range' applies to one document",
        ),
        (
            {"uris": [APP], "context": [CTX], "program": '<edit file="2">\n</edit>\n</program>'},
            "'context' document",
        ),
        (
            {"uris": [APP], "context": [CTX], "program": '<delete file="2"/>\n</program>'},
            "'context' document",
        ),
        (
            {
                "uris": [APP, UTIL],
                "program": '<edit file="2">\n<copy file="3" lines="1-1"/>\n</edit>\n</program>',
            },
            "expected a file from 1 to 2",
        ),
        (
            {"uris": [APP], "program": '<create path="util.py">\n</create>\n</program>'},
            "is open in the editor",
        ),
        ({"uris": [APP], "program": "<edit oops"}, "expected"),
    ],
)
def test_bad_multi_file_requests_are_one_line_errors(argument, message: str) -> None:
    async def scenario() -> tuple[Client, dict[str, Any], dict[str, Any]]:
        client = Client()
        await client.start(TEXTS)
        answer = await client.answer(await client.edit(argument))
        after = await client.answer(await client.edit(ARGUMENT))
        return client, answer, after

    _, answer, after = run(scenario)
    assert answer["error"]["code"] == -32602
    assert message in answer["error"]["message"]
    assert "\n" not in answer["error"]["message"]
    assert after["result"]["applied"] is True  # the server keeps serving


def test_an_editor_that_cannot_create_files_is_told_before_anything_is_sent() -> None:
    async def scenario() -> tuple[Client, dict[str, Any], dict[str, Any]]:
        client = Client(capabilities={"workspace": {"workspaceEdit": {"documentChanges": True}}})
        await client.start(TEXTS)
        refused = await client.answer(await client.edit(ARGUMENT))
        program = '<edit file="2">\n<copy file="1" lines="1-1"/>\n</edit>\n</program>'
        edited = await client.answer(await client.edit({"uris": [APP, UTIL], "program": program}))
        await client.settle()
        return client, refused, edited

    client, refused, edited = run(scenario)
    assert "cannot create or delete files" in refused["error"]["message"]
    assert edited["result"]["applied"] is True
    assert client.texts()[UTIL] == "import os\n"
    assert len(client.sent_edits) == 1


def test_one_document_with_a_sectioned_program_creates_a_file_beside_it_or_under_root() -> None:
    async def scenario() -> tuple[Client, list[dict[str, Any]]]:
        client = Client()
        await client.start({UTIL: TEXTS[UTIL]})
        program = '<create path="copy.py">\n<copy file="1" lines="1-1"/>\n</create>\n</program>'
        beside = await client.answer(await client.edit({"uri": UTIL, "program": program}))
        rooted = await client.answer(
            await client.edit({"uris": [UTIL], "program": program, "root": "file:///work"})
        )
        await client.settle()
        return client, [beside, rooted]

    client, answers = run(scenario)
    assert all(answer["result"]["applied"] for answer in answers)
    assert client.texts()["file:///work/pkg/copy.py"] == "X = 1\n"
    assert client.texts()["file:///work/copy.py"] == "X = 1\n"


def test_random_multi_file_edits_and_changes_never_apply_a_stale_edit() -> None:
    """Edits over three documents, ``didChange`` of any of them and cancels in random
    order: every edit the client applied is the request's program resolved against the
    texts the request was sent for, and an edit answered ``applied: false`` or cancelled
    applied nothing."""

    outcomes: collections.Counter[str] = collections.Counter()

    async def scenario() -> list[str]:
        rng = random.Random(31)
        problems: list[str] = []
        client = Client()
        uris = [APP, UTIL, CTX]
        await client.start({uri: TEXTS[uri] for uri in uris})
        for round_number in range(150):
            sent: dict[int, tuple[dict[str, str], dict[str, str]]] = {}
            for step in range(rng.randint(2, 6)):
                action = rng.random()
                if action < 0.4:
                    uri = rng.choice(uris)
                    client.change(uri, f"r{round_number}.{step}\n" + client.texts()[uri])
                elif action < 0.85 or not sent:
                    texts = client.texts()
                    program = (
                        f'<edit file="1">\n<copy file="3" lines="1-1"/>\n'
                        f'<copy lines="1-{Document(texts[APP]).n_lines}"/>\n</edit>\n'
                        f'<edit file="2">\n<gen>e{round_number}.{step}\n</gen>\n'
                        f'<copy file="1" lines="1-1"/>\n</edit>\n</program>'
                    )
                    argument = {"uris": [APP, UTIL], "context": [CTX], "program": program}
                    request_id = await client.edit(argument)
                    sent[request_id] = (texts, expected_after(texts, program, [APP, UTIL, CTX]))
                else:
                    request_id = rng.choice(list(sent))
                    client.to_server({"method": "$/cancelRequest", "params": {"id": request_id}})
                for _ in range(rng.randint(0, 3)):
                    await asyncio.sleep(0)
            answers = {request_id: await client.answer(request_id) for request_id in sent}
            await client.settle()
            for request_id, answer in answers.items():
                result = answer.get("result") or {}
                outcomes[str(result.get("applied") or result.get("reason") or "error")] += 1
                if answer.get("error", {}).get("code") not in (None, REQUEST_CANCELLED):
                    problems.append(f"round {round_number}: {answer}")
                done = client.history.count(sent[request_id])
                if done != (1 if result.get("applied") else 0):
                    problems.append(f"round {round_number}: {answer} applied {done} times")
            server = {uri: doc.text for uri, doc in client.protocol.documents.snapshot().items()}
            if server != client.texts():
                problems.append(f"round {round_number}: the server's copies differ")
            if problems:
                break
        return problems

    problems = run(scenario)
    assert not problems, problems[:3]
    assert min(outcomes[key] for key in ("True", "document changed", "error")) >= 10, outcomes


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from tests.tiny_model import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


def configured(client: Client, model, budget: int = 2048) -> None:
    """Point the server at the tiny model, on the CPU."""
    settings = client.cad.settings
    settings.model, settings.device, settings.dtype = str(model), "cpu", "float32"
    settings.maxNewTokens = budget


def test_an_instruction_over_several_documents_is_decoded_and_applied(
    tiny_model_dir, monkeypatch
) -> None:
    from functools import partialmethod

    from cad.selector import MultiDecoder

    monkeypatch.setattr(
        MultiDecoder, "edit", partialmethod(MultiDecoder.edit, program=parse_multi(PROGRAM))
    )

    async def scenario() -> tuple[Client, dict[str, Any]]:
        client = Client()
        await client.start(TEXTS)
        configured(client, tiny_model_dir)
        argument = {"uris": [APP, UTIL, OLD], "context": [CTX], "instruction": "Move helper"}
        answer = await client.answer(await client.edit(argument))
        await client.settle()
        return client, answer

    client, answer = run(scenario)
    result = answer["result"]
    assert result["applied"] is True, result
    assert result["program"] == PROGRAM.rstrip("\n")
    assert result["stats"]["forwards"] > 0 and result["stats"]["copied_tokens"] > 0
    assert client.texts() == expected_after(TEXTS, PROGRAM, [APP, UTIL, OLD, CTX])


def test_a_decode_that_spends_its_budget_applies_nothing(tiny_model_dir) -> None:
    async def scenario() -> tuple[Client, dict[str, Any], dict[str, Any]]:
        client = Client()
        await client.start(TEXTS)
        configured(client, tiny_model_dir, budget=3)
        argument = {"uris": [APP, UTIL], "instruction": "Move helper"}
        answer = await client.answer(await client.edit(argument))
        after = await client.answer(await client.edit(ARGUMENT))
        return client, answer, after

    client, answer, after = run(scenario)
    assert answer["error"]["code"] == -32603
    assert "whole budget of 3 tokens" in answer["error"]["message"]
    assert after["result"]["applied"] is True  # the server keeps serving
    assert len(client.sent_edits) == 1
