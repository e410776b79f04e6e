"""``cad serve``: the language server that applies edit programs as minimal, versioned edits.

Decoding runs in one worker thread per model (edits are serialised, the event loop never
blocks); every edit has a cancel flag that work-done-progress cancellation, ``$/cancelRequest``,
a newer edit of the same document and shutdown all set. Nothing is applied unless the edit
finished and the document still has the version it was decoded from.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from typing import Any

from lsprotocol import types as lsp
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from resolver import Document, ProgramError, format_program, parse, resolve
from server.snap import language_of, snap_lines
from server.text_edits import text_edits

log = logging.getLogger("cad.serve")
CONVERTER = get_converter()
APPLY_EDIT = "cad.applyEdit"
EDIT_SELECTION = "cad.editSelection"
APPLY_PROGRAM = "cad.applyProgram"


@dataclass
class Settings:
    """What the editor configures: ``initializationOptions`` or ``didChangeConfiguration``."""

    model: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    device: str = "auto"
    dtype: str = "auto"
    adapter: str | None = None
    maxNewTokens: int = 2048

    def update(self, values: Any) -> None:
        """Take known keys from a flat dict or from ``{"cad": {...}}``; ignore the rest."""
        if not isinstance(values, dict):
            return
        values = values.get("cad", values) if isinstance(values.get("cad"), dict) else values
        for item in fields(self):
            if item.name in values and values[item.name] is not None:
                setattr(self, item.name, values[item.name])

    def model_key(self) -> tuple[str, str, str, str | None]:
        """What a loaded model depends on; a change means reloading."""
        return (self.model, self.device, self.dtype, self.adapter)


class CadProtocol(LanguageServerProtocol):
    """pygls' protocol plus ``$/cancelRequest`` reaching a running edit through its flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cancel_flags: dict[Any, threading.Event] = {}

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        flag = self.cancel_flags.get(msg_id)
        if flag is not None:
            flag.set()
        super()._handle_cancel_notification(msg_id)

    @lsp_method(lsp.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """pygls' shutdown, made safe while an edit is running: the pending requests are
        cancelled from a snapshot, since cancelling one removes it from the live table."""
        if (handler := self.fm.features.get(lsp.SHUTDOWN)) is not None:
            yield handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def current_request_id(self) -> Any:
        """The id of the request whose handler is running."""
        return self._ctx_msg_id.get(None)


@dataclass
class CadServer:
    """State of the server: settings, the model (loaded lazily) and the running edits."""

    ls: LanguageServer
    settings: Settings = field(default_factory=Settings)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))
    running: dict[str, threading.Event] = field(default_factory=dict)
    _loaded: Any = None
    _loaded_key: tuple[str, str, str, str | None] | None = None

    def status(self, state: str, message: str = "") -> None:
        """Tell the editor (status bar) what the server is doing."""
        self.ls.protocol.notify("cad/status", {"state": state, "message": message})

    def decoder(self) -> Any:
        """A decoder for the configured model, loading it first if needed (worker thread)."""
        from selector import Decoder, load_model

        key = self.settings.model_key()
        if self._loaded is None or self._loaded_key != key:
            self._loaded = None
            self._loaded = load_model(
                self.settings.model,
                device=self.settings.device,
                dtype=self.settings.dtype,
                adapter=self.settings.adapter,
            )
            self._loaded.warm_up()
            self._loaded_key = key
        return Decoder(self._loaded, max_new_tokens=int(self.settings.maxNewTokens))

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


def parse_request(arguments: Any) -> EditRequest:
    """Validate the one object argument of ``cad.applyEdit``; bad input is InvalidParams."""
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
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams("cad.applyEdit: 'uri' must be the document's URI")
    if program is not None and not isinstance(program, str):
        raise JsonRpcInvalidParams("cad.applyEdit: 'program' must be program text")
    if not isinstance(instruction, str) or (program is None and not instruction.strip()):
        raise JsonRpcInvalidParams("cad.applyEdit: 'instruction' must say what to change")
    if not isinstance(arguments.get("snap", False), bool):
        raise JsonRpcInvalidParams("cad.applyEdit: 'snap' must be true or false")
    first = last = None
    if arguments.get("range") is not None:
        try:
            start, end = arguments["range"]["start"], arguments["range"]["end"]
            first, last = int(start["line"]), int(end["line"])
            if int(end.get("character", 0)) == 0 and last > first:
                last -= 1
        except (KeyError, TypeError, ValueError):
            raise JsonRpcInvalidParams("cad.applyEdit: 'range' must be an LSP Range") from None
        if first < 0 or last < first:
            raise JsonRpcInvalidParams("cad.applyEdit: 'range' ends before it starts")
    return EditRequest(
        uri,
        instruction,
        program,
        first,
        last,
        dry_run=bool(arguments.get("dryRun", False)),
        snap=arguments.get("snap", False),
    )


def region(text: str, request: EditRequest) -> tuple[EditRequest, int, int]:
    """The request with its range clipped to the document, and the character offsets of the
    whole lines the edit may touch (all of them without a range)."""
    document = Document(text)
    if request.first_line is None or request.last_line is None:
        return request, 0, len(text)
    if request.first_line >= document.n_lines:
        raise JsonRpcInvalidParams(f"cad.applyEdit: the document has {document.n_lines} lines")
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
        return await run_edit(cad, parse_request(list(arguments)))

    return ls, cad


async def run_edit(cad: CadServer, request: EditRequest) -> dict[str, Any]:
    """Decode (or take) a program for the document, resolve it, and apply minimal edits if
    the document did not change meanwhile."""
    ls = cad.ls
    if request.uri not in ls.workspace.text_documents:
        raise JsonRpcInvalidParams(f"cad.applyEdit: {request.uri} is not open in the editor")
    document = ls.workspace.get_text_document(request.uri)
    text, version = document.source, document.version
    if request.snap and request.first_line is not None and request.last_line is not None:
        language = language_of(document.language_id, request.uri)
        first, last = snap_lines(text, language, request.first_line, request.last_line)
        request = replace(request, first_line=first, last_line=last)
    request, start, end = region(text, request)
    sub_document = text[start:end]

    previous = cad.running.get(request.uri)
    if previous is not None:
        previous.set()
    flag = threading.Event()
    cad.running[request.uri] = flag
    protocol: CadProtocol = ls.protocol  # type: ignore[assignment]
    request_id = protocol.current_request_id()
    protocol.cancel_flags[request_id] = flag
    token = str(uuid.uuid4())
    loop = asyncio.get_running_loop()
    progress = await _begin_progress(ls, token, flag)
    try:
        cad.status("editing")
        report = _reporter(ls, loop, token) if progress else None
        outcome = await loop.run_in_executor(
            cad.executor, _decide, cad, sub_document, request, flag, report
        )
    finally:
        protocol.cancel_flags.pop(request_id, None)
        if cad.running.get(request.uri) is flag:
            del cad.running[request.uri]
        if progress:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message="done"))
    if isinstance(outcome, Exception):
        cad.status("error", str(outcome))
        raise JsonRpcInternalError(str(outcome))
    cad.status("ready")
    if outcome is None:
        reason = "superseded" if cad.running.get(request.uri) not in (None, flag) else "cancelled"
        return {"applied": False, "program": "", "stats": {}, "reason": reason}
    program_text, new_sub, stats = outcome
    new_text = text[:start] + new_sub + text[end:]
    assert (
        new_text[:start] == text[:start]
        and new_text[len(new_text) - (len(text) - end) :] == text[end:]
    )
    edits = text_edits(text, new_text)
    result: dict[str, Any] = {"applied": False, "program": program_text, "stats": stats}
    if (edited := request.edited_range()) is not None:
        result["range"] = edited
    current = ls.workspace.get_text_document(request.uri)
    if current.version != version:
        ls.window_show_message(
            lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message="cad: the document changed while the edit was being decoded; nothing was applied. Run the edit again.",
            )
        )
        return {**result, "reason": "document changed"}
    if request.dry_run:
        return {**result, "edits": [CONVERTER.unstructure(e) for e in edits], "version": version}
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
    return {
        **result,
        "applied": bool(response.applied),
        **(
            {}
            if response.applied
            else {"reason": response.failure_reason or "rejected by the editor"}
        ),
    }


def _decide(
    cad: CadServer, sub_document: str, request: EditRequest, flag: threading.Event, report: Any
):
    """Worker-thread part: the program and the new region text, None if cancelled, or the error."""
    from selector import Cancelled, ContextTooLongError, ModelLoadError

    try:
        if request.program is not None:
            program = parse(request.program)
            new_text = resolve(program, sub_document)
            stats: dict[str, Any] = {"ops": len(program.ops), "mode": "program"}
        else:
            if cad._loaded is None or cad._loaded_key != cad.settings.model_key():
                cad.status("loading", cad.settings.model)
            result = cad.decoder().edit(
                sub_document, request.instruction, on_progress=report, cancel=flag
            )
            if result.stats.truncated:
                return ValueError(
                    f"the model used its whole budget of {cad.settings.maxNewTokens} tokens without finishing; "
                    "nothing was applied (raise cad.maxNewTokens or select a smaller range)"
                )
            program, new_text, stats = result.program, result.text, result.stats.to_dict()
        if flag.is_set():
            return None
        return format_program(program), new_text, stats
    except Cancelled:
        return None
    except (ProgramError, ModelLoadError, ContextTooLongError) as exc:
        return exc
    except Exception as exc:  # the server must survive anything a model throws (CUDA OOM, ...)
        log.exception("edit failed")
        return RuntimeError(f"{type(exc).__name__}: {exc}")


async def _begin_progress(ls: LanguageServer, token: str, flag: threading.Event) -> bool:
    """Start work-done progress if the client supports it; its cancellation sets ``flag``."""
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


def _reporter(ls: LanguageServer, loop: asyncio.AbstractEventLoop, token: str) -> Any:
    def report(progress: Any) -> None:
        message = (
            f"{progress.ops} ops, {progress.lines_copied} lines copied, "
            f"{progress.lines_generated} generated"
        )
        loop.call_soon_threadsafe(
            ls.work_done_progress.report, token, lsp.WorkDoneProgressReport(message=message)
        )

    return report


def serve(tcp: str | None = None, preload: bool = False) -> None:
    """Run the server on stdio (default) or ``HOST:PORT``; ``preload`` loads the default
    model (and runs a warm-up forward) before the first request."""
    ls, cad = build_server()
    if preload:
        cad.decoder()
    if tcp:
        host, _, port = tcp.rpartition(":")
        ls.start_tcp(host or "127.0.0.1", int(port))
    else:
        ls.start_io()
