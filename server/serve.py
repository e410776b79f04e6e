"""``cad serve``: the language server that applies edit programs as minimal, versioned edits.

Decoding runs in one worker thread per model (edits are serialised, the event loop never
blocks); every edit has a cancel flag that work-done-progress cancellation, ``$/cancelRequest``,
a newer edit of the same document and shutdown all set. An edit reads the document as it was
when its request arrived, and nothing is applied unless the edit finished, was not cancelled
before it was sent, and the document still has that version.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from cad.cli_text import plural
from cad.errors import UserError
from cad.files import MAX_TEXT_BYTES, describe_size
from cad.resolver import Document, ProgramError, format_program, parse, resolve
from cad.server.lsp_adapter import (
    CadProtocol,
    ReceivedCommand,
    post_to_loop,
    serve_stdio,
    serve_tcp,
    shorten,
)
from cad.server.modes import EditMode
from cad.server.multi_edit import has_sections
from cad.server.multi_serve import MultiRequest, parse_multi_request, run_multi_edit
from cad.server.snap import language_of, snap_lines
from cad.server.syntax_setting import SyntaxChoice, SyntaxPlan, choose_language, plan_syntax
from cad.server.text_edits import text_edits

log = logging.getLogger("cad.serve")
CONVERTER = get_converter()
APPLY_EDIT = "cad.applyEdit"
EDIT_SELECTION = "cad.editSelection"
APPLY_PROGRAM = "cad.applyProgram"
MAX_POSITION = 2**31 - 1
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
EXIT_GRACE_S = 10.0
"""How long the process may take to end after the client leaves (see ``leave_within``)."""
RESETTABLE_SETTINGS = frozenset({"draftBudget"})
"""Settings a null value resets to their default (``None``)."""


@dataclass
class Settings:
    """What the editor configures: ``initializationOptions`` or ``didChangeConfiguration``.
    An empty ``model`` means the adapter's base model, else the default model."""

    model: str = ""
    device: str = "auto"
    dtype: str = "auto"
    adapter: str | None = None
    maxNewTokens: int = 2048
    draftBudget: int | None = None
    mode: str = "auto"
    compile: bool = False
    graphs: bool = True
    engine: str | None = None
    syntax: str = "auto"

    def update(self, values: Any) -> None:
        """Take known keys from a flat dict or from ``{"cad": {...}}``; ignore the rest. An
        empty ``adapter`` means none, an empty ``engine`` decoding in this process, a null
        ``draftBudget`` the draft configuration's; other nulls leave a setting as it is.
        Values are checked when an edit needs them."""
        if not isinstance(values, dict):
            return
        values = values.get("cad", values) if isinstance(values.get("cad"), dict) else values
        for item in fields(self):
            if item.name in values and (
                values[item.name] is not None or item.name in RESETTABLE_SETTINGS
            ):
                setattr(self, item.name, values[item.name])
        if not self.adapter:
            self.adapter = None
        if not self.engine:
            self.engine = None

    def check(self) -> None:
        """Raise InvalidParams naming the first setting of the wrong type."""
        for name in ("model", "device", "dtype", "adapter", "mode", "engine", "syntax"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise JsonRpcInvalidParams(f"cad.{name} is {value!r}; set it to text")

    def edit_mode(self) -> EditMode:
        """``program`` (the model writes an edit program) or ``rewrite`` (it writes the new
        text, drafted from the old): ``auto`` is program when an adapter is set, since the
        trained adapter is what teaches a model the program language."""
        try:
            mode = EditMode(self.mode)
        except ValueError:
            raise JsonRpcInvalidParams(
                f"cad.mode is {self.mode!r}; set it to one of {', '.join(EditMode)}"
            ) from None
        return mode.resolved(program_given=self.adapter is not None)

    def syntax_choice(self) -> SyntaxChoice:
        """The language an edit is held to: ``auto`` (by the document's language or file
        type), ``python``, ``json`` or ``none``."""
        try:
            return SyntaxChoice(self.syntax)
        except ValueError:
            raise JsonRpcInvalidParams(
                f"cad.syntax is {self.syntax!r}; set it to one of {', '.join(SyntaxChoice)}"
            ) from None

    def budget(self) -> int:
        """``maxNewTokens`` as a positive whole number of tokens."""
        value = self.maxNewTokens
        whole = isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
        if isinstance(value, bool) or not whole or value < 1:
            raise JsonRpcInvalidParams(
                f"cad.maxNewTokens is {value!r}; set it to a positive number of tokens"
            )
        return int(value)

    def draft_budget(self) -> int | None:
        """``draftBudget``: draft tokens verified per forward (0: none), or ``None`` for the
        draft configuration's own."""
        value = self.draftBudget
        if value is None:
            return None
        whole = isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
        if isinstance(value, bool) or not whole or value < 0:
            raise JsonRpcInvalidParams(
                f"cad.draftBudget is {value!r}; set it to a number of tokens (0: no drafts) or "
                "clear it for the default"
            )
        return int(value)

    def model_key(self) -> tuple[str, str, str, str | None, bool, bool]:
        """What a loaded model depends on; a change means reloading."""
        return (
            self.model,
            self.device,
            self.dtype,
            self.adapter,
            self.compile is True,
            self.graphs is not False,
        )

    def model_name(self) -> str:
        """The model to load: ``model``, else the adapter's base model, else the default."""
        from cad.selector.adapters import choose_model

        return choose_model(self.model, self.adapter)


@dataclass
class CadServer:
    """State of the server: settings, the model (loaded lazily) and the running edits."""

    ls: LanguageServer
    settings: Settings = field(default_factory=Settings)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))
    running: dict[str, threading.Event] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop | None = None
    _loaded: Any = None
    _loaded_key: tuple[str, str, str, str | None, bool, bool] | None = None

    def status(self, state: str, message: str = "") -> None:
        """Tell the editor (status bar) what the server is doing; from the worker thread the
        message goes through the event loop, which owns the output stream."""
        send = partial(self.ls.protocol.notify, "cad/status", {"state": state, "message": message})
        loop = self.loop
        try:
            in_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            in_loop = False
        if loop is None or in_loop:
            send()
        else:
            post_to_loop(loop, send)

    def needs_loading(self) -> bool:
        """Whether the next edit loads a model first (none yet, or the settings changed)."""
        return self._loaded is None or self._loaded_key != self.settings.model_key()

    def model(self) -> Any:
        """The configured model, loading it first (worker thread) when it is not loaded yet
        or the model settings changed."""
        from cad.selector import load_model

        key = self.settings.model_key()
        if self.needs_loading():
            self._loaded = None
            self._loaded = load_model(
                self.settings.model_name(),
                device=self.settings.device,
                dtype=self.settings.dtype,
                adapter=self.settings.adapter,
                compile=self.settings.compile is True,
                graphs=None if self.settings.graphs is not False else False,
            )
            self._loaded.warm_up()
            self._loaded_key = key
        return self._loaded

    def cancel_all(self) -> None:
        """Set every running edit's cancel flag (shutdown)."""
        for flag in list(self.running.values()):
            flag.set()


@dataclass(frozen=True)
class EditRequest:
    """A validated ``cad.applyEdit`` argument."""

    uri: str
    instruction: str
    program: str | None
    first_line: int | None
    last_line: int | None
    dry_run: bool
    snap: bool = False

    def edited_range(self) -> dict[str, Any] | None:
        """The whole lines the edit may change, as an LSP Range (``None``: the whole document)."""
        if self.first_line is None or self.last_line is None:
            return None
        return {
            "start": {"line": self.first_line, "character": 0},
            "end": {"line": self.last_line + 1, "character": 0},
        }


def parse_request(arguments: Any) -> EditRequest | MultiRequest:
    """Validate the one object argument of ``cad.applyEdit``; bad input is InvalidParams.
    ``uris`` (or a program with sections) makes it an edit of several documents."""
    if isinstance(arguments, list | tuple):
        if len(arguments) != 1:
            raise JsonRpcInvalidParams(
                "cad.applyEdit takes one object argument {uri, instruction, range?, program?}"
            )
        arguments = arguments[0]
    if not isinstance(arguments, dict):
        raise JsonRpcInvalidParams(
            "cad.applyEdit takes one object argument {uri, instruction, range?, program?}"
        )
    uri = arguments.get("uri")
    instruction = arguments.get("instruction", "")
    program = arguments.get("program")
    if "uris" in arguments:
        return parse_multi_request(arguments)
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams("cad.applyEdit: 'uri' must be the document's URI")
    if program is not None and not isinstance(program, str):
        raise JsonRpcInvalidParams("cad.applyEdit: 'program' must be program text")
    if program is not None and arguments.get("range") is None and has_sections(program):
        return parse_multi_request(arguments)
    if not isinstance(instruction, str) or (program is None and not instruction.strip()):
        raise JsonRpcInvalidParams("cad.applyEdit: 'instruction' must say what to change")
    if _LONE_SURROGATE.search(instruction) is not None:
        raise JsonRpcInvalidParams(
            "cad.applyEdit: 'instruction' holds a lone UTF-16 surrogate, which is not text a "
            "model can read; fix that character"
        )
    if not isinstance(arguments.get("snap", False), bool):
        raise JsonRpcInvalidParams("cad.applyEdit: 'snap' must be true or false")
    dry_run = arguments.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise JsonRpcInvalidParams("cad.applyEdit: 'dryRun' must be true or false")
    first = last = None
    if arguments.get("range") is not None:
        first, last = _range_lines(arguments["range"])
    return EditRequest(
        uri, instruction, program, first, last, dry_run=dry_run, snap=arguments.get("snap", False)
    )


def _range_lines(value: Any) -> tuple[int, int]:
    """The first and last whole line of an LSP Range, where an end at character 0 of a later
    line leaves that line out; anything but a Range of non-negative whole numbers is
    InvalidParams."""
    shape = "cad.applyEdit: 'range' must be an LSP Range {start: {line, character}, end: {…}}"
    if not isinstance(value, dict):
        raise JsonRpcInvalidParams(shape)
    numbers = []
    for end in ("start", "end"):
        position = value.get(end)
        if not isinstance(position, dict):
            raise JsonRpcInvalidParams(shape)
        for key in ("line", "character"):
            number = position.get(key, 0 if key == "character" else None)
            if isinstance(number, bool) or not isinstance(number, int):
                raise JsonRpcInvalidParams(
                    f"cad.applyEdit: 'range.{end}.{key}' must be a whole number, not {number!r}"
                )
            if not 0 <= number <= MAX_POSITION:
                raise JsonRpcInvalidParams(
                    f"cad.applyEdit: 'range.{end}.{key}' is {number}; it must be 0 to {MAX_POSITION}"
                )
            numbers.append(number)
    first, _, last, end_character = numbers
    if end_character == 0 and last > first:
        last -= 1
    if last < first:
        raise JsonRpcInvalidParams("cad.applyEdit: 'range' ends before it starts")
    return first, last


def region(text: str, request: EditRequest) -> tuple[EditRequest, int, int]:
    """The request with its range clipped to the document, and the character offsets of the
    whole lines the edit may touch (all of them without a range)."""
    document = Document(text)
    if request.first_line is None or request.last_line is None:
        return request, 0, len(text)
    if request.first_line >= document.n_lines:
        lines = plural(document.n_lines, "line")
        raise JsonRpcInvalidParams(f"cad.applyEdit: the document has {lines}")
    last = min(request.last_line, document.n_lines - 1)
    start, end = document.line_starts[request.first_line], document.line_starts[last + 1]
    return replace(request, last_line=last), start, end


def build_server() -> tuple[LanguageServer, CadServer]:
    """The pygls server with every handler registered, and its state."""
    ls = LanguageServer("cad", "0.1.0", protocol_cls=CadProtocol)
    cad = CadServer(ls)

    @ls.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        cad.settings.update(params.initialization_options)

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(params: lsp.DidChangeConfigurationParams) -> None:
        cad.settings.update(params.settings)

    @ls.feature(lsp.SHUTDOWN)
    def shutdown(params: Any) -> None:
        cad.cancel_all()
        cad.executor.shutdown(wait=False, cancel_futures=True)

    @ls.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.RefactorRewrite]),
    )
    def code_action(params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        target = {"uri": params.text_document.uri, "range": CONVERTER.unstructure(params.range)}
        return [
            lsp.CodeAction(
                title="Edit with instruction…",
                kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(
                    title="Edit with instruction…", command=EDIT_SELECTION, arguments=[target]
                ),
            ),
            lsp.CodeAction(
                title="Apply program…",
                kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(
                    title="Apply program…", command=APPLY_PROGRAM, arguments=[target]
                ),
            ),
        ]

    @ls.command(APPLY_EDIT)
    async def apply_edit(*arguments: Any) -> dict[str, Any]:
        protocol: CadProtocol = ls.protocol  # type: ignore[assignment]
        received = protocol.received_command()
        try:
            request = parse_request(list(arguments))
            if isinstance(request, MultiRequest):
                cad.loop = asyncio.get_running_loop()
                decode = (cad.executor, partial(decode_several, cad))
                return await run_multi_edit(ls, cad.running, request, received, decode)
            return await run_edit(cad, request, received)
        except JsonRpcException as exc:
            log.warning("%s: %s", APPLY_EDIT, shorten(exc.message))
            raise
        except Exception as exc:  # never a traceback in a response; it goes to the log
            raise failure(exc, cad.settings) from None

    return ls, cad


async def run_edit(
    cad: CadServer, request: EditRequest, received: ReceivedCommand
) -> dict[str, Any]:
    """Decode (or take) the edit of the document's region as it was when the request
    arrived, and apply it as minimal edits for that version, if the document did not change
    meanwhile and the request was not cancelled before the edit was sent. Progress goes to
    the client's token when it sent one with its request, else to a token the server
    creates."""
    ls = cad.ls
    protocol: CadProtocol = ls.protocol  # type: ignore[assignment]
    document = received.documents.get(request.uri)
    if document is None:
        raise JsonRpcInvalidParams(f"cad.applyEdit: {request.uri} is not open in the editor")
    if document.out_of_step is not None:
        raise JsonRpcInvalidParams(
            f"cad.applyEdit: the server's copy of {request.uri} is out of step with the editor "
            f"({document.out_of_step}); close and reopen the document"
        )
    text, version = document.text, document.version
    if request.snap and request.first_line is not None and request.last_line is not None:
        language = language_of(document.language_id, request.uri)
        first, last = snap_lines(text, language, request.first_line, request.last_line)
        request = replace(request, first_line=first, last_line=last)
    request, start, end = region(text, request)
    if request.program is not None:
        job = Job(text[start:end], request, EditMode.program, budget=0)
    else:
        cad.settings.check()
        region_text = text[start:end]
        check_model_input(region_text, request.first_line or 0)
        job = Job(
            region_text,
            request,
            cad.settings.edit_mode(),
            cad.settings.budget(),
            _syntax_plan(ls, cad.settings, document.language_id, request.uri, text, start, end),
            text[:start],
            text[end:],
            cad.settings.draft_budget(),
        )

    previous = cad.running.get(request.uri)
    if previous is not None:
        previous.set()
    flag = received.cancelled
    cad.running[request.uri] = flag
    client_token = received.progress_token
    token = client_token if client_token is not None else str(uuid.uuid4())
    received.progress_token = token
    loop = cad.loop = asyncio.get_running_loop()
    progress = False
    try:
        progress = await _begin_progress(ls, token, flag, created=client_token is not None)
        cad.status("editing")
        report = _reporter(ls, loop, token, job.mode) if progress else None
        outcome = (
            None
            if flag.is_set()
            else await loop.run_in_executor(cad.executor, _decide, cad, job, flag, report)
        )
    finally:
        if cad.running.get(request.uri) is flag:
            del cad.running[request.uri]
        if progress:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message="done"))
            ls.work_done_progress.tokens.pop(token, None)
    if isinstance(outcome, JsonRpcException):
        cad.status("error", outcome.message)
        raise outcome
    cad.status("ready")
    if outcome is None:
        return {
            "applied": False,
            "program": "",
            "stats": {},
            "reason": _not_applied(cad, request.uri, flag),
        }
    new_text = splice(text, start, end, outcome.text)
    edits = text_edits(text, new_text)
    result: dict[str, Any] = {"applied": False, "program": outcome.program, "stats": outcome.stats}
    if (edited := request.edited_range()) is not None:
        result["range"] = edited
    current = protocol.documents.get(request.uri)
    if current is None or current.version != version or current.text != text:
        ls.window_show_message(
            lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message="cad: the document changed while the edit was being decoded; nothing was applied. Run the edit again.",
            )
        )
        return {**result, "reason": "document changed"}
    if request.dry_run:
        return {**result, "edits": [CONVERTER.unstructure(e) for e in edits], "version": version}
    if not received.commit():
        return {**result, "reason": _not_applied(cad, request.uri, flag)}
    if not edits:
        return {**result, "applied": True}
    response = await ls.workspace_apply_edit_async(
        lsp.ApplyWorkspaceEditParams(
            label="cad edit",
            edit=lsp.WorkspaceEdit(
                document_changes=[
                    lsp.TextDocumentEdit(
                        text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                            uri=request.uri, version=version
                        ),
                        edits=list(edits),
                    )
                ]
            ),
        )
    )
    if response.applied:
        return {**result, "applied": True}
    return {**result, "reason": _refusal(protocol, request.uri, version, response)}


def _not_applied(cad: CadServer, uri: str, flag: threading.Event) -> str:
    """Why a cancelled edit was not applied: a newer edit of the document superseded it, or
    it was cancelled."""
    return "superseded" if cad.running.get(uri) not in (None, flag) else "cancelled"


def _refusal(
    protocol: CadProtocol, uri: str, version: int, response: lsp.ApplyWorkspaceEditResult
) -> str:
    """Why the editor refused the edit: its own reason, else ``document changed`` when the
    document moved past the edit's version (a change was on its way to the server), else
    that the editor rejected it."""
    if response.failure_reason:
        return response.failure_reason
    current = protocol.documents.get(uri)
    if current is None or current.version != version:
        return "document changed"
    return "rejected by the editor"


def check_model_input(region_text: str, first_line: int) -> None:
    """Refuse, as InvalidParams, a region a model cannot edit: one over the size limit (far
    beyond any context; tokenising it alone would take minutes), or one holding a lone
    UTF-16 surrogate (a model reads Unicode text; a program edits such a document exactly)."""
    size = len(region_text.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise JsonRpcInvalidParams(
            f"cad.applyEdit: the text to edit is {describe_size(size)}, over the limit of "
            f"{describe_size(MAX_TEXT_BYTES)}; select a smaller range"
        )
    found = _LONE_SURROGATE.search(region_text)
    if found is not None:
        line = first_line + region_text.count("\n", 0, found.start()) + 1
        raise JsonRpcInvalidParams(
            f"cad.applyEdit: line {line} holds a lone UTF-16 surrogate, which is not text a "
            "model can read; fix that character, or apply a program"
        )


def splice(text: str, start: int, end: int, new_region: str) -> str:
    """``text`` with its whole-line region ``text[start:end]`` replaced by ``new_region``.

    When text follows the region and the region ended with a line break that the new text
    lacks, that line break is kept: the lines after the region stay lines of their own, and
    the text outside the region is never changed."""
    old_region = text[start:end]
    if end < len(text) and new_region and not new_region.endswith(("\n", "\r")):
        new_region += old_region[len(old_region.rstrip("\r\n")) :]
    new_text = text[:start] + new_region + text[end:]
    assert new_text.startswith(text[:start]) and new_text.endswith(text[end:])
    return new_text


@dataclass(frozen=True)
class Job:
    """What the worker thread decodes: the region's text, the request, ``program`` or
    ``rewrite`` mode, the token budget (unused when the request gives the program), the
    language the edited document is held to with the text around the region, and the draft
    tokens per forward (``None``: the draft configuration's)."""

    region: str
    request: EditRequest
    mode: EditMode
    budget: int
    syntax: SyntaxPlan = field(default_factory=lambda: SyntaxPlan(None))
    before: str = ""
    after: str = ""
    draft_budget: int | None = None


@dataclass(frozen=True)
class Outcome:
    """A finished edit: the program text (empty in rewrite mode), the region's new text and
    the decode stats."""

    program: str
    text: str
    stats: dict[str, Any]


def _decide(
    cad: CadServer, job: Job, flag: threading.Event, report: Any
) -> Outcome | JsonRpcException | None:
    """Worker-thread part: the outcome, ``None`` if cancelled, or the error to send."""
    try:
        if job.request.program is not None:
            program = parse(job.request.program)
            new_text = resolve(program, job.region)
            outcome = Outcome(
                format_program(program),
                new_text,
                {"ops": len(program.ops), "mode": EditMode.program.value},
            )
        else:
            outcome = _decode(cad, job, flag, report)
    except Exception as exc:  # the server must survive anything a model throws (CUDA OOM, ...)
        return failure(exc, cad.settings)
    return None if outcome is None or flag.is_set() else outcome


def _decode(cad: CadServer, job: Job, flag: threading.Event, report: Any) -> Outcome | None:
    """The model's edit of the region, in program or rewrite mode, or ``None`` if cancelled;
    raises when it failed or spent its whole budget."""
    from cad.selector import Cancelled

    try:
        return _run_model(cad, job, flag, report)
    except Cancelled:
        return None


def _run_model(cad: CadServer, job: Job, flag: threading.Event, report: Any) -> Outcome:
    if cad.settings.engine:
        return _run_remote(cad.settings, job, flag, report)
    from cad.selector import Decoder
    from cad.selector.rewrite import rewrite

    if cad.needs_loading():
        cad.status("loading", cad.settings.model_name())
    loaded = cad.model()
    cad.status("editing")
    request = job.request
    syntax = job.syntax.constraint(
        loaded.tokenizer, loaded.vocab_size, job.before, job.region, job.after
    )
    if job.mode is EditMode.rewrite:
        result = rewrite(
            loaded,
            job.region,
            request.instruction,
            max_new_tokens=job.budget,
            draft_budget=job.draft_budget,
            on_progress=report,
            cancel=flag,
            syntax=syntax,
        )
        program = ""
    else:
        decoder = Decoder(loaded, max_new_tokens=job.budget, draft_budget=job.draft_budget)
        result = decoder.edit(
            job.region, request.instruction, on_progress=report, cancel=flag, syntax=syntax
        )
        program = format_program(result.program)
    if result.stats.truncated:
        raise BudgetSpent(job.budget)
    return Outcome(program, result.text, {**result.stats.to_dict(), "mode": job.mode.value})


def decode_several(
    cad: CadServer,
    files: list[tuple[str, str]],
    editable: int,
    instruction: str,
    flag: threading.Event,
) -> tuple[str, dict[str, Any]] | None:
    """Worker-thread part of an edit of several documents: the program the model writes for
    ``instruction`` over ``files`` (the first ``editable`` may be written), with the
    decode's stats; ``None`` when cancelled. Failures raise as ``JsonRpcException``."""
    from cad.resolver import format_multi
    from cad.selector import Cancelled, MultiDecoder

    try:
        cad.settings.check()
        if cad.settings.engine:
            raise JsonRpcInvalidParams(
                "cad.applyEdit: a shared engine edits one document at a time; give a "
                "multi-file 'program', or clear cad.engine to decode with a local model"
            )
        for _, text in files:
            check_model_input(text, 0)
        budget = cad.settings.budget()
        if cad.needs_loading():
            cad.status("loading", cad.settings.model_name())
        loaded = cad.model()
        cad.status("editing")
        decoder = MultiDecoder(
            loaded, max_new_tokens=budget, draft_budget=cad.settings.draft_budget()
        )
        result = decoder.edit(files, instruction, editable=editable, cancel=flag)
        if result.stats.truncated:
            raise BudgetSpent(budget)
    except Cancelled:
        return None
    except Exception as exc:  # the server must survive anything a model throws
        error = failure(exc, cad.settings)
        cad.status("error", error.message)
        raise error from None
    cad.status("ready")
    return format_multi(result.program), result.stats.to_dict()


def _syntax_plan(
    ls: LanguageServer,
    settings: Settings,
    language_id: str | None,
    uri: str,
    text: str,
    start: int,
    end: int,
) -> SyntaxPlan:
    """The language the edit is held to (``cad.syntax``), checked against the document before
    decoding. A document that does not parse is refused when the language was set explicitly;
    under ``auto`` it is edited without the constraint and the user is told once per edit.
    A shared engine decodes without it."""
    choice = settings.syntax_choice()
    if settings.engine:
        return SyntaxPlan(None)
    if _LONE_SURROGATE.search(text) is not None:
        if choice in (SyntaxChoice.auto, SyntaxChoice.none):
            return SyntaxPlan(None)
        raise JsonRpcInvalidParams(
            f"cad.applyEdit: the document holds a lone UTF-16 surrogate, so it is not {choice} "
            'text; fix it or set cad.syntax to "none"'
        )
    path = unquote(urlparse(uri).path)
    language = choose_language(choice, path=path, language_id=language_id)

    def warn(line: str) -> None:
        ls.window_show_message(
            lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"cad: {line}")
        )

    try:
        return plan_syntax(
            choice,
            language=language,
            schema=None,
            before=text[:start],
            region=text[start:end],
            after=text[end:],
            warn=warn,
        )
    except UserError as exc:
        message = str(exc).replace("(--syntax none)", '(set cad.syntax to "none")')
        raise JsonRpcInvalidParams(f"cad.applyEdit: {message}") from None


def _run_remote(settings: Settings, job: Job, flag: threading.Event, report: Any) -> Outcome:
    """The edit decoded by the shared engine at ``settings.engine`` (``cad serve --engine``).
    The model is named only when the editor chose one other than the default."""
    from cad.selector import Cancelled
    from cad.server.remote import EngineBudgetSpent, remote_edit

    try:
        result = remote_edit(
            settings.engine or "",
            job.region,
            job.request.instruction,
            mode=job.mode,
            max_new_tokens=job.budget,
            model=None if settings.model == Settings.model else settings.model,
            adapter=settings.adapter,
            on_progress=report,
            cancel=flag,
        )
    except EngineBudgetSpent:
        raise BudgetSpent(job.budget) from None
    if result is None:
        raise Cancelled("edit cancelled")
    return Outcome(result.program, result.text, result.stats)


class BudgetSpent(Exception):
    """The model used its whole token budget without finishing the edit."""

    def __init__(self, budget: int) -> None:
        super().__init__(
            f"the model used its whole budget of {budget} tokens without finishing; nothing "
            "was applied (raise cad.maxNewTokens or select a smaller range)"
        )


def failure(exc: Exception, settings: Settings) -> JsonRpcException:
    """The LSP error for a failed edit: one line saying what went wrong and what to do."""
    if isinstance(exc, ProgramError):
        return JsonRpcInvalidParams(
            f"{exc}; fix the program (its line numbers count from the first line of the "
            "range, or of the document without one)"
        )
    from cad.selector import ContextTooLongError, ModelLoadError
    from cad.selector.adapters import AdapterBaseMismatch
    from cad.server.remote import EngineError

    if isinstance(exc, JsonRpcException):
        return exc
    if isinstance(exc, AdapterBaseMismatch):
        return JsonRpcInvalidParams(f"{exc}; clear cad.model to run it on {exc.base}")
    if isinstance(exc, BudgetSpent | ContextTooLongError | EngineError):
        return JsonRpcInternalError(str(exc))
    if isinstance(exc, ModelLoadError):
        return JsonRpcInternalError(
            f"{exc} (in the editor: the cad.model, cad.device, cad.dtype and cad.adapter settings)"
        )
    first_line = (str(exc).strip().splitlines() or [""])[0][:200]
    if isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower():
        return JsonRpcInternalError(
            f"the model ran out of memory on {settings.device} ({first_line}); select a smaller "
            "range, set cad.dtype to bfloat16 or float16, use a smaller cad.model, or set "
            "cad.device to cpu"
        )
    log.error("edit failed", exc_info=exc)
    return JsonRpcInternalError(
        f"the edit failed ({type(exc).__name__}: {first_line}); nothing was applied. The "
        "server log has the details; if it happens again, restart the server"
    )


async def _begin_progress(
    ls: LanguageServer, token: lsp.ProgressToken, flag: threading.Event, created: bool
) -> bool:
    """Start work-done progress on ``token``: one the client ``created`` (sent with its
    request), else one the server asks the client to create if it supports progress. The
    progress's cancellation sets ``flag``."""
    if not created:
        capabilities = ls.client_capabilities.window
        if capabilities is None or not capabilities.work_done_progress:
            return False
        try:
            await ls.work_done_progress.create_async(token)
        except Exception:  # a client that cannot show progress still gets its edit
            log.warning("the client refused a progress token; editing without progress")
            return False
    ls.work_done_progress.begin(
        token, lsp.WorkDoneProgressBegin(title="cad edit", cancellable=True)
    )
    ls.work_done_progress.tokens[token].add_done_callback(lambda _: flag.set())
    return True


def _reporter(
    ls: LanguageServer, loop: asyncio.AbstractEventLoop, token: str, mode: EditMode
) -> Any:
    def report(progress: Any) -> None:
        done = (
            plural(progress.tokens_generated, "token")
            if mode is EditMode.rewrite
            else plural(progress.ops, "op")
        )
        message = (
            f"{done}, {plural(progress.lines_copied, 'line')} copied, "
            f"{progress.lines_generated} generated"
        )
        post_to_loop(
            loop,
            ls.work_done_progress.report,
            token,
            lsp.WorkDoneProgressReport(message=message),
        )

    return report


def leave_within(seconds: float, status: Callable[[], int]) -> None:
    """Make sure the process ends ``seconds`` from now, with ``status()``: a running edit
    stops at its next forward, but a forward (or a library's clean-up) that hangs must not
    keep alive, holding the model's memory, a server the editor has let go of."""

    def leave() -> None:
        time.sleep(seconds)
        # Not through logging: the thread that hangs may hold its lock, blocked on a full
        # stderr; the line is written from a thread of its own, waited for at most a second.
        line = f"cad serve: still running {seconds:.0f} s after the client left; exiting now\n"
        say = threading.Thread(target=os.write, args=(2, line.encode()), daemon=True)
        say.start()
        say.join(1.0)
        os._exit(status())

    threading.Thread(target=leave, name="cad-exit-watchdog", daemon=True).start()


def claim_stdout() -> BinaryIO:
    """A private duplicate of stdout for the LSP frames; afterwards file descriptor 1 and
    ``sys.stdout`` point at stderr, so a stray ``print`` or a native library writing to
    stdout cannot corrupt the stream the editor reads."""
    sys.stdout.flush()
    stream = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def serve(
    tcp: tuple[str, int] | None = None,
    preload: bool = False,
    defaults: dict[str, Any] | None = None,
) -> int:
    """Run the server on stdio (default) or on TCP ``(host, port)`` until the client exits;
    returns the exit status. ``defaults`` are settings the editor's own override;
    ``preload`` loads the model they name (and runs a warm-up forward) before the first
    request. A model that cannot be preloaded is logged, and the first edit reports it to
    the editor."""
    output = None if tcp else claim_stdout()
    ls, cad = build_server()
    cad.settings.update(defaults or {})
    if preload and cad.settings.engine:
        from cad.server.remote import EngineError, engine_info

        try:
            engine_info(cad.settings.engine)
        except EngineError as exc:
            log.error("%s", exc)
    elif preload:
        from cad.selector import ModelLoadError

        try:
            cad.model()
        except ModelLoadError as exc:
            log.error("cannot preload the model: %s", exc)

    protocol: CadProtocol = ls.protocol  # type: ignore[assignment]
    leaving = threading.Event()

    def stop_edits() -> None:
        cad.cancel_all()
        cad.executor.shutdown(wait=False, cancel_futures=True)
        if not leaving.is_set():
            leaving.set()
            leave_within(EXIT_GRACE_S, lambda: 0 if protocol.is_shut_down else 1)

    @ls.feature(lsp.EXIT)
    def exit_requested(params: Any) -> None:
        stop_edits()

    if tcp:
        return serve_tcp(ls, *tcp, on_exit=stop_edits)
    assert output is not None
    return serve_stdio(ls, sys.stdin.buffer, output, on_exit=stop_edits)
