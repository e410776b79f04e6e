"""Load: 200 mixed ``cad.applyEdit`` requests against ONE ``cad serve`` process over stdio.

The client keeps its own versioned copy of every document, applies each
``workspace/applyEdit`` only at the version it was computed for (sending the edits back as
incremental ``didChange`` events, as an editor does) and refuses it otherwise. Requests come
in rounds; in each round every document gets one scenario: a plain edit, an edit that is
cancelled, an edit racing a change typed in the editor, or overlapping edits. After each
round every document must be its text before the round or the exact result of one complete
edit (with the typed change on top where there was one), never a partial edit.
"""

from __future__ import annotations

import asyncio
import random
import sys
from dataclasses import dataclass, field

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

from cad.resolver import format, oracle
from cad.server.text_edits import apply_text_edits

pytestmark = pytest.mark.slow

REQUESTS = 200
DOCUMENTS = 6
SCENARIOS = ("edit", "cancel", "conflict", "overlap")


@dataclass(frozen=True)
class Edit:
    """One request: the document, the version and text it was made for, the text it asks for."""

    uri: str
    version: int
    before: str
    after: str


@dataclass
class Editor:
    """The client side: versioned document copies and every edit the server got applied."""

    client: LanguageClient = field(default_factory=lambda: LanguageClient("cad-load", "1.0"))
    texts: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    planned: set[Edit] = field(default_factory=set)
    applied: list[Edit] = field(default_factory=list)
    refused: int = 0
    next_id: int = 0

    def __post_init__(self) -> None:
        @self.client.feature(lsp.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
            (change,) = params.edit.document_changes
            uri, version = change.text_document.uri, change.text_document.version
            if version != self.versions[uri]:
                self.refused += 1
                return lsp.ApplyWorkspaceEditResult(applied=False, failure_reason="stale version")
            before = self.texts[uri]
            edits = sorted(
                change.edits, key=lambda e: (e.range.start.line, e.range.start.character)
            )
            after = apply_text_edits(before, edits)
            self.applied.append(Edit(uri, version, before, after))
            self.send_change(
                uri,
                after,
                [
                    lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
                    for e in reversed(edits)
                ],
            )
            return lsp.ApplyWorkspaceEditResult(applied=True)

        @self.client.feature(lsp.WINDOW_SHOW_MESSAGE)
        def show_message(params: lsp.ShowMessageParams) -> None:
            return None

        @self.client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create_progress(params: lsp.WorkDoneProgressCreateParams) -> None:
            return None

    def send_change(self, uri: str, text: str, changes: list) -> None:
        """Record the document's new text and version and tell the server."""
        self.texts[uri] = text
        self.versions[uri] += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(
                    uri=uri, version=self.versions[uri]
                ),
                content_changes=changes,
            )
        )

    def type_line(self, uri: str, line: str) -> None:
        """The user appends ``line`` to the document in the editor."""
        text = self.texts[uri]
        end = lsp.Position(line=text.count("\n"), character=0)
        self.send_change(
            uri,
            text + line,
            [lsp.TextDocumentContentChangePartial(range=lsp.Range(start=end, end=end), text=line)],
        )

    def open(self, uri: str, text: str) -> None:
        self.texts[uri], self.versions[uri] = text, 1
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )

    def plan(self, uri: str, rng: random.Random, tag: str) -> Edit:
        """An edit of the current text: one random line replaced by a line naming ``tag``."""
        lines = self.texts[uri].splitlines(keepends=True)
        index = rng.randrange(len(lines))
        lines[index] = f"edited_{tag} = {index}\n"
        edit = Edit(uri, self.versions[uri], self.texts[uri], "".join(lines))
        self.planned.add(edit)
        return edit

    def request(self, edit: Edit) -> tuple[str, asyncio.Future]:
        """Send ``cad.applyEdit`` with the edit's program; its message id and its answer."""
        self.next_id += 1
        msg_id = f"load-{self.next_id}"
        argument = {
            "uri": edit.uri,
            "instruction": "x",
            "program": format(oracle(edit.before, edit.after)),
        }
        future = self.client.protocol.send_request(
            lsp.WORKSPACE_EXECUTE_COMMAND,
            lsp.ExecuteCommandParams(command="cad.applyEdit", arguments=[argument]),
            msg_id=msg_id,
        )
        return msg_id, asyncio.wrap_future(future)

    def cancel(self, msg_id: str) -> None:
        self.client.protocol.notify("$/cancelRequest", lsp.CancelParams(id=msg_id))


async def answer(future: asyncio.Future) -> dict | None:
    """The command's result, or None when the server answered with an error (cancelled)."""
    try:
        return await future
    except JsonRpcException:
        return None


async def scenario(
    editor: Editor, uri: str, kind: str, rng: random.Random, tag: str
) -> tuple[set[str], list[dict | None], int]:
    """Run one scenario on ``uri``; the texts it may end in, the answers, requests sent."""
    base = editor.texts[uri]
    if kind == "edit":
        edit = editor.plan(uri, rng, tag)
        _, future = editor.request(edit)
        return {edit.after}, [await answer(future)], 1
    if kind == "cancel":
        edit = editor.plan(uri, rng, tag)
        msg_id, future = editor.request(edit)
        await asyncio.sleep(rng.uniform(0, 0.06))
        editor.cancel(msg_id)
        return {base, edit.after}, [await answer(future)], 1
    if kind == "conflict":
        edit = editor.plan(uri, rng, tag)
        _, future = editor.request(edit)
        await asyncio.sleep(rng.uniform(0, 0.06))
        typed = f"typed_{tag} = 0\n"
        editor.type_line(uri, typed)
        return {base + typed, edit.after + typed}, [await answer(future)], 1
    edits = [editor.plan(uri, rng, f"{tag}_{i}") for i in range(rng.randint(2, 3))]
    futures = [editor.request(edit)[1] for edit in edits]
    results = [await answer(future) for future in futures]
    return {base} | {edit.after for edit in edits}, results, len(edits)


def test_mixed_requests_never_leave_a_partial_edit() -> None:
    rng = random.Random(20240611)
    uris = [f"file:///tmp/cad-load/module_{n}.py" for n in range(DOCUMENTS)]

    async def main() -> tuple[Editor, dict[str, int], list[str]]:
        editor = Editor()
        await editor.client.start_io(
            sys.executable, "-c", "from cad.server.cli import main; main()", "serve"
        )
        await editor.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(
                    window=lsp.WindowClientCapabilities(work_done_progress=True)
                )
            )
        )
        editor.client.initialized(lsp.InitializedParams())
        for n, uri in enumerate(uris):
            editor.open(uri, "".join(f"value_{n}_{i} = {i}\n" for i in range(30)))
        sent, counts, problems = 0, dict.fromkeys(SCENARIOS, 0), []
        round_number = 0
        while sent < REQUESTS:
            round_number += 1
            kinds = [rng.choice(SCENARIOS) for _ in uris]
            outcomes = await asyncio.gather(
                *(
                    scenario(editor, uri, kind, rng, f"{round_number}_{n}")
                    for n, (uri, kind) in enumerate(zip(uris, kinds, strict=True))
                )
            )
            for uri, kind, (allowed, results, requests) in zip(uris, kinds, outcomes, strict=True):
                sent += requests
                counts[kind] += requests
                if editor.texts[uri] not in allowed:
                    problems.append(f"round {round_number}, {kind} on {uri}: unexpected text")
                applied = [r for r in results if r is not None and r["applied"]]
                if len(applied) > 1 or (kind == "edit" and not applied):
                    problems.append(f"round {round_number}, {kind} on {uri}: {results}")
        for n, uri in enumerate(uris):
            edit = editor.plan(uri, rng, f"final_{n}")
            _, future = editor.request(edit)
            result = await answer(future)
            if result is None or not result["applied"] or editor.texts[uri] != edit.after:
                problems.append(f"final edit of {uri} not applied exactly: {result}")
        await editor.client.shutdown_async(None)
        editor.client.exit(None)
        await editor.client.stop()
        return editor, counts, problems

    editor, counts, problems = asyncio.run(asyncio.wait_for(main(), 120))
    assert problems == []
    assert sum(counts.values()) >= REQUESTS and all(counts.values())
    assert all(edit in editor.planned for edit in editor.applied), "a partial edit was applied"
    assert len(set(editor.applied)) == len(editor.applied), "an edit was applied twice"
