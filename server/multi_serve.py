"""``cad.applyEdit`` over several documents: a multi-file program as one ``WorkspaceEdit``.

The documents to edit are numbered from 1 in the order of ``uris``, then the ``context``
documents, which the program may copy from but not change. Created files (``<create
path>``) are placed relative to ``root`` (by default the folder of the first document).
The program is given (``program``) or decoded by the server's model from ``instruction``
(``decode``, run on the server's worker thread); either way it is resolved against the
documents as they were when the request arrived (the snapshot of ``ReceivedCommand``), and the edit goes out as one ``workspace/applyEdit``
whose ``documentChanges`` hold a versioned text edit per changed document, ``CreateFile``
(then the new text) per created file and ``DeleteFile`` per deleted one; nothing is sent
when any of the documents changed meanwhile.
"""

from __future__ import annotations

import asyncio
import posixpath
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlparse

from lsprotocol import types as lsp
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcInvalidParams

from cad.resolver import (
    Changes,
    CreateFile,
    DeleteFile,
    EditFile,
    MultiProgram,
    ProgramError,
    format_multi,
    parse_multi,
    resolve_multi,
    section_header,
)
from cad.server.documents import OpenDocument
from cad.server.lsp_adapter import CadProtocol, ReceivedCommand
from cad.server.text_edits import text_edits

CONVERTER = get_converter()
CHANGED_MESSAGE = (
    "cad: {uri} changed while the edit was being made; nothing was applied. Run the edit again."
)


@dataclass(frozen=True)
class MultiRequest:
    """A validated ``cad.applyEdit`` over several documents."""

    uris: tuple[str, ...]
    context: tuple[str, ...]
    program: str | None
    root: str | None
    dry_run: bool
    instruction: str = ""

    @property
    def all_uris(self) -> tuple[str, ...]:
        """Every document the program addresses, in file-id order."""
        return (*self.uris, *self.context)


def _uri_list(arguments: dict[str, Any], key: str) -> tuple[str, ...]:
    value = arguments.get(key, [])
    if not isinstance(value, list) or not all(isinstance(uri, str) and uri for uri in value):
        raise JsonRpcInvalidParams(f"cad.applyEdit: '{key}' must be a list of document URIs")
    return tuple(value)


def parse_multi_request(arguments: dict[str, Any]) -> MultiRequest:
    """Validate the argument of an edit of several documents; bad input is InvalidParams.
    ``uri`` may stand for a one-document ``uris`` (a program with sections)."""
    if "uris" in arguments:
        if "uri" in arguments:
            raise JsonRpcInvalidParams("cad.applyEdit: give 'uri' or 'uris', not both")
        uris = _uri_list(arguments, "uris")
        if not uris:
            raise JsonRpcInvalidParams("cad.applyEdit: 'uris' names no document")
    else:
        uris = (arguments["uri"],)
    context = _uri_list(arguments, "context")
    for key in ("range", "snap"):
        if arguments.get(key) not in (None, False):
            raise JsonRpcInvalidParams(
                f"cad.applyEdit: '{key}' applies to one document; a multi-file program edits "
                "whole documents"
            )
    program = arguments.get("program")
    instruction = arguments.get("instruction", "")
    if program is None and (not isinstance(instruction, str) or not instruction.strip()):
        raise JsonRpcInvalidParams(
            "cad.applyEdit: several documents need an 'instruction' saying what to change (or "
            "a multi-file 'program')"
        )
    if program is not None and not isinstance(program, str):
        raise JsonRpcInvalidParams("cad.applyEdit: 'program' must be program text")
    root = arguments.get("root")
    if root is not None and (not isinstance(root, str) or not root):
        raise JsonRpcInvalidParams("cad.applyEdit: 'root' must be the URI of a folder")
    dry_run = arguments.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise JsonRpcInvalidParams("cad.applyEdit: 'dryRun' must be true or false")
    seen: set[str] = set()
    for uri in (*uris, *context):
        if uri in seen:
            raise JsonRpcInvalidParams(
                f"cad.applyEdit: {uri} is given twice; give each document once, in 'uris' or "
                "'context'"
            )
        seen.add(uri)
    return MultiRequest(uris, context, program, root, dry_run, instruction)


def _same_file_key(uri: str) -> tuple[str, str, str]:
    """What two URIs of one file share (percent-encoding and ``.`` segments aside)."""
    parsed = urlparse(uri)
    return parsed.scheme, parsed.netloc, posixpath.normpath(unquote(parsed.path))


def created_uri(root: str, path: str) -> str:
    """The URI of ``path`` (a program's relative POSIX path) under the folder URI ``root``."""
    return root.rstrip("/") + "/" + quote(path, safe="/")


def default_root(uri: str) -> str:
    """The folder of the document at ``uri``, as a URI."""
    parsed = urlparse(uri)
    folder = posixpath.dirname(parsed.path) or "/"
    return parsed._replace(path=folder, params="", query="", fragment="").geturl()


@dataclass(frozen=True)
class MultiPlan:
    """What the request reads: its documents as they arrived (in file-id order), the parsed
    program, the URI of each created path, and how many of the documents it may write (the
    rest are context)."""

    documents: tuple[OpenDocument, ...]
    program: MultiProgram
    created: dict[str, str]
    editable: int


def _program_error(exc: ProgramError) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(
        f"{exc}; fix the program (files are numbered from 1 in the order of 'uris', then 'context')"
    )


def snapshot(request: MultiRequest, received: ReceivedCommand) -> tuple[OpenDocument, ...]:
    """The request's documents as they were when it arrived, every one open and in step with
    the editor; raises InvalidParams."""
    documents = []
    for uri in request.all_uris:
        document = received.documents.get(uri)
        if document is None:
            raise JsonRpcInvalidParams(f"cad.applyEdit: {uri} is not open in the editor")
        if document.out_of_step is not None:
            raise JsonRpcInvalidParams(
                f"cad.applyEdit: the server's copy of {uri} is out of step with the editor "
                f"({document.out_of_step}); close and reopen the document"
            )
        documents.append(document)
    return tuple(documents)


def plan(
    request: MultiRequest,
    received: ReceivedCommand,
    documents: tuple[OpenDocument, ...],
    program_text: str,
) -> MultiPlan:
    """Check the program against the documents as they were when the request arrived: no
    section writing a context document, no created file that is open or one of the
    documents. Raises InvalidParams."""
    try:
        program = parse_multi(program_text)
    except ProgramError as exc:
        raise _program_error(exc) from None
    root = request.root or default_root(request.uris[0])
    open_files = {_same_file_key(uri): uri for uri in received.documents}
    created: dict[str, str] = {}
    editable = len(request.uris)
    for section in program.sections:
        header = section_header(section)
        if isinstance(section, CreateFile):
            uri = created_uri(root, section.path)
            existing = open_files.get(_same_file_key(uri))
            if existing is not None:
                raise JsonRpcInvalidParams(
                    f"cad.applyEdit: {header}: {existing} is open in the editor; give it in "
                    "'uris' and edit it instead"
                )
            created[section.path] = uri
        elif editable < section.file <= len(documents):
            raise JsonRpcInvalidParams(
                f"cad.applyEdit: {header}: file {section.file} ({documents[section.file - 1].uri}) "
                "is a 'context' document, which the program may copy from but not change; give "
                "it in 'uris' to edit it"
            )
    return MultiPlan(documents, program, created, editable)


def resolve_plan(plan: MultiPlan) -> Changes:
    """What the program writes, by URI (``None``: deleted); a bad program is InvalidParams."""
    files = [(document.uri, document.text) for document in plan.documents]
    try:
        changes = resolve_multi(plan.program, files)
    except ProgramError as exc:
        raise _program_error(exc) from None
    return {plan.created.get(path, path): text for path, text in changes.items()}


@dataclass(frozen=True)
class FileChange:
    """One document (or new file) the edit writes: its URI, ``modified``, ``unchanged``,
    ``created`` or ``deleted``, and its LSP operations."""

    uri: str
    status: str
    operations: tuple[Any, ...]


def version_check(document: OpenDocument) -> lsp.TextDocumentEdit:
    """A versioned ``TextDocumentEdit`` with no edits: the editor refuses the whole
    ``WorkspaceEdit`` when the document no longer has that version, so a document the edit
    deletes, leaves as it is or only copies from is checked like one it changes."""
    identifier = lsp.OptionalVersionedTextDocumentIdentifier(
        uri=document.uri, version=document.version
    )
    return lsp.TextDocumentEdit(text_document=identifier, edits=[])


def file_changes(plan: MultiPlan, changes: Changes) -> list[FileChange]:
    """The LSP operations of each section, in section order: a versioned
    ``TextDocumentEdit`` of minimal edits per changed document (with no edits when it stays
    as it is), ``CreateFile`` then the new text (a ``TextDocumentEdit`` with no version) per
    created file, a version check then ``DeleteFile`` per deleted document."""
    by_uri = {document.uri: document for document in plan.documents}
    found = []
    for section, (uri, new) in zip(plan.program.sections, changes.items(), strict=True):
        if isinstance(section, DeleteFile):
            delete = lsp.DeleteFile(uri=uri, options=lsp.DeleteFileOptions(recursive=False))
            found.append(FileChange(uri, "deleted", (version_check(by_uri[uri]), delete)))
            continue
        assert new is not None
        if isinstance(section, CreateFile):
            create = lsp.CreateFile(
                uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=False)
            )
            operations: tuple[Any, ...] = (create,)
            if new:
                start = lsp.Position(line=0, character=0)
                insert = lsp.TextEdit(range=lsp.Range(start=start, end=start), new_text=new)
                identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None)
                operations += (lsp.TextDocumentEdit(text_document=identifier, edits=[insert]),)
            found.append(FileChange(uri, "created", operations))
            continue
        assert isinstance(section, EditFile)
        document = by_uri[uri]
        edits = text_edits(document.text, new)
        if not edits:
            found.append(FileChange(uri, "unchanged", (version_check(document),)))
            continue
        identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=document.version)
        edit = lsp.TextDocumentEdit(text_document=identifier, edits=list(edits))
        found.append(FileChange(uri, "modified", (edit,)))
    return found


def workspace_edit(plan: MultiPlan, found: list[FileChange]) -> lsp.WorkspaceEdit:
    """One ``WorkspaceEdit``: first every versioned text edit (a version check of each
    context document, the edits of the documents that stay, the version check of each
    document to delete), then the created files, then the deletions. An editor checks the
    versions before it changes anything, so a stale edit fails before any file is created
    or deleted."""
    operations = [version_check(document) for document in plan.documents[plan.editable :]]
    for group in (
        lambda op: isinstance(op, lsp.TextDocumentEdit) and op.text_document.version is not None,
        lambda op: (
            isinstance(op, lsp.CreateFile)
            or (isinstance(op, lsp.TextDocumentEdit) and op.text_document.version is None)
        ),
        lambda op: isinstance(op, lsp.DeleteFile),
    ):
        operations += [op for change in found for op in change.operations if group(op)]
    return lsp.WorkspaceEdit(document_changes=operations)


def check_client_support(protocol: CadProtocol, found: list[FileChange]) -> None:
    """Refuse an edit that creates or deletes files when the editor does not say it can
    apply such operations (``workspace.workspaceEdit.resourceOperations``)."""
    needed = {
        {"created": "create", "deleted": "delete"}[change.status]
        for change in found
        if change.status in ("created", "deleted")
    }
    if not needed:
        return
    workspace = protocol.client_capabilities.workspace
    edits = workspace.workspace_edit if workspace is not None else None
    offered = (
        {str(getattr(kind, "value", kind)) for kind in (edits.resource_operations or [])}
        if (edits is not None and edits.document_changes)
        else set()
    )
    missing = sorted(needed - offered)
    if missing:
        raise JsonRpcInvalidParams(
            f"cad.applyEdit: the editor cannot {' or '.join(missing)} files in an edit "
            "(its workspaceEdit.resourceOperations); use dryRun and apply the edit yourself, "
            "or write the program without those sections"
        )


def changed_document(protocol: CadProtocol, plan: MultiPlan) -> str | None:
    """The first document of the request that changed since it arrived (or was closed)."""
    for document in plan.documents:
        current = protocol.documents.get(document.uri)
        if current is None or (current.version, current.text) != (document.version, document.text):
            return document.uri
    return None


Decode = Callable[
    [list[tuple[str, str]], int, str, threading.Event], tuple[str, dict[str, Any]] | None
]
"""Decodes an edit of several documents on the server's worker: ``(files as (uri, text),
how many may be written, instruction, cancel flag) -> (program text, decode stats)``,
``None`` when cancelled; raises ``JsonRpcException`` for a failure to report."""


async def run_multi_edit(
    ls: Any,
    running: dict[str, Any],
    request: MultiRequest,
    received: ReceivedCommand,
    decode: tuple[Executor, Decode] | None = None,
) -> dict[str, Any]:
    """Resolve a multi-file program (given, or decoded from the instruction by ``decode`` on
    its executor) against the documents as they arrived and apply it as one
    ``WorkspaceEdit``, if no document changed meanwhile and the request was not cancelled
    before the edit was sent. ``running`` holds each document's running edit (a newer edit
    of any of the documents supersedes this one)."""
    protocol: CadProtocol = ls.protocol
    documents = snapshot(request, received)
    if request.program is None and decode is None:
        raise JsonRpcInvalidParams(
            "cad.applyEdit: this server has no model to decode an edit of several documents; "
            "give a multi-file 'program'"
        )
    checked = (
        None if request.program is None else plan(request, received, documents, request.program)
    )
    decoded: dict[str, Any] = {}
    flag = received.cancelled
    for uri in request.uris:
        previous = running.get(uri)
        if previous is not None:
            previous.set()
        running[uri] = flag
    try:
        loop = asyncio.get_running_loop()
        if checked is None:
            assert decode is not None
            executor, decoder = decode
            files = [(document.uri, document.text) for document in documents]
            outcome = await loop.run_in_executor(
                executor, decoder, files, len(request.uris), request.instruction, flag
            )
            if outcome is None or flag.is_set():
                superseded = any(running.get(uri) not in (None, flag) for uri in request.uris)
                reason = "superseded" if superseded else "cancelled"
                return {"applied": False, "program": "", "stats": {}, "reason": reason}
            program_text, decoded = outcome
            checked = plan(request, received, documents, program_text)
        changes = await loop.run_in_executor(None, resolve_plan, checked)
    finally:
        for uri in request.uris:
            if running.get(uri) is flag:
                del running[uri]
    found = file_changes(checked, changes)
    program = format_multi(checked.program)
    stats = {**decoded, "mode": "program", "ops": checked.program.op_count, "files": len(found)}
    result: dict[str, Any] = {
        "applied": False,
        "program": program,
        "stats": stats,
        "files": [{"uri": change.uri, "status": change.status} for change in found],
    }
    if flag.is_set():
        superseded = any(running.get(uri) not in (None, flag) for uri in request.uris)
        return {**result, "reason": "superseded" if superseded else "cancelled"}
    changed = changed_document(protocol, checked)
    if changed is not None:
        ls.window_show_message(
            lsp.ShowMessageParams(
                type=lsp.MessageType.Warning, message=CHANGED_MESSAGE.format(uri=changed)
            )
        )
        return {**result, "reason": "document changed", "changed": changed}
    edit = workspace_edit(checked, found)
    if request.dry_run:
        return {**result, "edit": CONVERTER.unstructure(edit)}
    changes_something = any(change.status != "unchanged" for change in found)
    if changes_something:
        check_client_support(protocol, found)
    if not received.commit():
        superseded = any(running.get(uri) not in (None, flag) for uri in request.uris)
        return {**result, "reason": "superseded" if superseded else "cancelled"}
    if not changes_something:
        return {**result, "applied": True}
    response = await ls.workspace_apply_edit_async(
        lsp.ApplyWorkspaceEditParams(label="cad edit", edit=edit)
    )
    if response.applied:
        return {**result, "applied": True}
    reason = response.failure_reason or (
        "document changed" if changed_document(protocol, checked) else "rejected by the editor"
    )
    return {**result, "reason": reason}
