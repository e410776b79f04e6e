"""Where the language server goes beyond pygls's public API: all of it in this one module.

pygls runs the protocol (message types, dispatch, progress, requests to the client). The
server changes what pygls gets wrong for it, each in one small place:

- **Framing.** ``FrameReader`` reads ``Content-Length`` frames: a bad header (not a number,
  negative, missing, a body shorter than announced) is logged and skipped up to the next
  valid header, and a message over ``MAX_MESSAGE_BYTES`` is skipped without being held in
  memory. ``dispatch`` answers every request: a body that is not JSON gets ParseError, one
  whose parameters do not fit the method gets InvalidParams with a one-line message.
- **Documents.** ``didOpen``/``didChange``/``didClose`` keep a ``DocumentStore``, which reads
  ranges with the project's line semantics; pygls's workspace splits lines with
  ``str.splitlines`` and so applies incremental changes wrongly around form feeds, vertical
  tabs and Unicode line separators.
- **Positions.** Always UTF-16, as LSP's default: the client's ``positionEncodings`` are not
  negotiated (pygls would pick UTF-8 for a client that lists it first).
- **Commands see the documents as of their arrival.** pygls runs a command's handler as a
  task that starts after the messages already read, so a ``didChange`` sent right behind a
  request would be applied before the handler reads the document. ``executeCommand`` keeps a
  ``ReceivedCommand`` when the request arrives: a snapshot of the open documents, the
  client's progress token and the command's cancel flag.
- **Cancelling.** ``$/cancelRequest`` also sets the command's cancel flag (pygls only
  cancels the outer future; the handler's task runs on). Once a command has sent its edit to
  the client it is *committed*: a later cancel no longer answers RequestCancelled, and the
  request ends with what really happened. Shutdown cancels the pending requests from a
  snapshot of the table (pygls iterates the live table, which cancelling changes).
- **Errors.** A response carries a one-line message and never a traceback in ``data``.

``RELIES_ON``, ``RELIES_ON_ATTRIBUTES`` and ``COPIED_FROM_PYGLS`` list every pygls internal
used here; a test checks each against pygls, so an upgrade that changes one fails loudly
instead of silently.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import attrs
import numpy as np
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from cad.server.documents import DocumentStore, OpenDocument

log = logging.getLogger("cad.serve")

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""The largest message read; a larger one is skipped (and logged)."""
MAX_HEADER_LINE = 8192
MAX_ERROR_CHARS = 500
"""The longest error message sent or logged for one message."""
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_TOO_MANY_DIGITS = "Exceeds the limit"
"""What ``json.loads`` says of an integer of more digits than Python converts."""

RELIES_ON: dict[str, str] = {
    "JsonRPCProtocol._handle_cancel_notification": "(self, msg_id: 'MsgId')",
    "JsonRPCProtocol._send_response": (
        "(self, msg_id: 'MsgId', result: 'Any | None' = None, "
        "error: 'Union[ResponseError, None]' = None)"
    ),
    "JsonRPCProtocol.get_message_type": "(self, method: 'str') -> 'Type[Any] | None'",
    "JsonRPCProtocol.handle_message": "(self, message: 'RPCMessage')",
    "JsonRPCProtocol.set_writer": (
        "(self, writer: 'AsyncWriter | Writer', include_headers: 'bool' = True)"
    ),
    "LanguageServerProtocol.lsp_initialize": (
        "(self, params: 'types.InitializeParams') -> 'Generator[Any, Any, types.InitializeResult]'"
    ),
    "LanguageServerProtocol.lsp_shutdown": "(self, *args) -> 'Generator[Any, Any, None]'",
    "LanguageServerProtocol.lsp_text_document__did_open": (
        "(self, params: 'types.DidOpenTextDocumentParams')"
    ),
    "LanguageServerProtocol.lsp_text_document__did_change": (
        "(self, params: 'types.DidChangeTextDocumentParams')"
    ),
    "LanguageServerProtocol.lsp_text_document__did_close": (
        "(self, params: 'types.DidCloseTextDocumentParams')"
    ),
    "LanguageServerProtocol.lsp_work_done_progress_cancel": (
        "(self, params: 'types.WorkDoneProgressCancelParams')"
    ),
    "LanguageServerProtocol.lsp_workspace__execute_command": (
        "(self, params: 'types.ExecuteCommandParams') -> 'Generator[Any, Any, Any]'"
    ),
}
"""Each pygls method this module overrides or calls beyond the public API, with its
signature in pygls 2.1.1."""

RELIES_ON_ATTRIBUTES: dict[str, type] = {
    "_converter": object,
    "_ctx_msg_id": contextvars.ContextVar,
    "_request_futures": dict,
    "_result_types": dict,
    "_shutdown": bool,
}
"""Each attribute of pygls's protocol objects this module reads or sets, with its type."""

COPIED_FROM_PYGLS: dict[str, str] = {
    "LanguageServerProtocol.lsp_shutdown": "86ec7ca1055cb177",
    "JsonRPCProtocol.structure_message": "ac66b961a32acb07",
}
"""pygls methods whose logic this module repeats with a change (``CadProtocol.lsp_shutdown``,
``CadProtocol.structure``), with the first 16 hex digits of the SHA-256 of their source in
pygls 2.1.1: when pygls changes one, the copy must be looked at again."""


@dataclass
class ReceivedCommand:
    """A ``workspace/executeCommand`` request as it arrived: the open documents at that
    moment (no later ``didChange`` reaches them), the token its progress is reported on (the
    one the client sent with it, until the handler creates one), its cancel flag (set by
    ``$/cancelRequest``, by cancelling its progress and by whatever else cancels the
    command), and whether it is ``committed``: its edit went to the client, so cancelling it
    can no longer take that back."""

    documents: Mapping[str, OpenDocument]
    progress_token: lsp.ProgressToken | None
    cancelled: threading.Event = field(default_factory=threading.Event)
    committed: bool = False

    def commit(self) -> bool:
        """Mark the command committed unless it was cancelled; whether it now is. Called on
        the event loop right before the edit is sent, so a cancel handled earlier always
        wins and one handled later finds the command committed."""
        if self.cancelled.is_set():
            return False
        self.committed = True
        return True


class CadProtocol(LanguageServerProtocol):
    """pygls's protocol with the server's documents, UTF-16 positions, commands that read the
    documents as of their arrival, cancel flags that reach running commands, a shutdown
    that is safe while an edit runs, and one-line error responses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.documents = DocumentStore()
        self.commands: dict[Any, ReceivedCommand] = {}

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams) -> Any:
        """pygls's initialize, with positions always in UTF-16 code units."""
        general = params.capabilities.general
        if general is not None and general.position_encodings is not None:
            params.capabilities.general = attrs.evolve(general, position_encodings=None)
        return (yield from super().lsp_initialize(params))

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        """Keep the document the editor opened."""
        self.documents.open(params.text_document)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> None:
        """Apply the editor's changes to the kept document."""
        problem = self.documents.change(params)
        if problem is not None:
            log.warning("%s", problem)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams) -> None:
        """Forget the document the editor closed."""
        self.documents.close(params.text_document.uri)

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Any:
        """pygls's command dispatch, after keeping the request as it arrived (runs before any
        later message is handled)."""
        token = params.work_done_token
        if token is not None and (isinstance(token, bool) or not isinstance(token, int | str)):
            raise JsonRpcInvalidParams(
                f"{lsp.WORKSPACE_EXECUTE_COMMAND}: 'workDoneToken' must be a number or text"
            )
        self.commands[self.current_request_id()] = ReceivedCommand(self.documents.snapshot(), token)
        return (yield from super().lsp_workspace__execute_command(params))

    def received_command(self) -> ReceivedCommand:
        """The running command's request as it arrived (call from its handler)."""
        return self.commands[self.current_request_id()]

    @lsp_method(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def lsp_work_done_progress_cancel(self, params: lsp.WorkDoneProgressCancelParams) -> None:
        """Cancel the commands reporting progress on the token at once, even before their
        progress began (pygls would only cancel the token's future, whose callbacks run on a
        later turn of the loop, and ignores a token whose progress has not begun)."""
        for command in self.commands.values():
            if command.progress_token == params.token and not command.committed:
                command.cancelled.set()
        if params.token in self.progress.tokens:
            super().lsp_work_done_progress_cancel(params)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        """Cancel a request: set its command's cancel flag, and let pygls answer it with
        RequestCancelled, unless the command is committed (then it is answered with its
        outcome)."""
        command = self.commands.get(msg_id)
        if command is not None:
            if command.committed:
                log.info("request %s: the edit was already sent; it is not cancelled", msg_id)
                return
            command.cancelled.set()
        super()._handle_cancel_notification(msg_id)

    @lsp_method(lsp.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """pygls's shutdown, made safe while an edit is running: the pending requests are
        cancelled from a snapshot, since cancelling one removes it from the live table."""
        if (handler := self.fm.features.get(lsp.SHUTDOWN)) is not None:
            yield handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: lsp.ResponseError | None = None
    ) -> None:
        """Send a response (and forget the command it answers); an error keeps the first line
        of its message, at most ``MAX_ERROR_CHARS`` of it, and no ``data`` (pygls puts a
        traceback there), which goes to the log instead."""
        self.commands.pop(msg_id, None)
        if error is not None:
            if error.data is not None:
                log.debug("error data of the response to %s: %s", msg_id, error.data)
            lines = str(error.message).strip().splitlines()
            error = lsp.ResponseError(
                code=error.code, message=shorten(lines[0] if lines else "error")
            )
        super()._send_response(msg_id, result=result, error=error)

    def send_error(self, msg_id: Any, code: int, message: str) -> None:
        """Answer request ``msg_id`` (``None``: a message whose id is unknown) with an error."""
        self._send_response(msg_id, error=lsp.ResponseError(code=code, message=message))

    def current_request_id(self) -> Any:
        """The id of the request whose handler is running."""
        return self._ctx_msg_id.get(None)

    @property
    def is_shut_down(self) -> bool:
        """Whether the client has sent ``shutdown``."""
        return self._shutdown

    def structure(self, data: dict[str, Any]) -> Any:
        """The typed message for a JSON-RPC object (as pygls's ``structure_message`` makes
        it, without its logging); raises when the parameters do not fit the method."""
        if "id" in data and "error" in data:
            return self._converter.structure(data, lsp.ResponseErrorMessage)
        if "id" in data and "method" not in data:
            from pygls.protocol.json_rpc import JsonRPCResponseMessage

            kind = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
            return self._converter.structure(data, kind)
        from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

        fallback = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
        kind = self.get_message_type(str(data.get("method", ""))) or fallback
        return self._converter.structure(data, kind)


def shorten(text: str) -> str:
    """``text`` cut to ``MAX_ERROR_CHARS`` characters (a message may quote a huge value)."""
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def one_line(exc: BaseException) -> str:
    """A short, one-line description of why a message's parameters did not fit."""
    from cattrs import transform_error
    from cattrs.errors import ClassValidationError

    if isinstance(exc, ClassValidationError):
        details = transform_error(exc, path="params")
        text = "; ".join(detail.replace("$.", "") for detail in details[:2])
    else:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def dispatch(protocol: CadProtocol, body: bytes) -> None:
    """Handle one message body. Every request gets a response: a body that is not JSON is
    answered with ParseError, one that is not a JSON-RPC 2.0 message with InvalidRequest,
    parameters that do not fit the method with InvalidParams, a request after shutdown
    with InvalidRequest; each problem is logged as one line."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        reason = "a number has too many digits" if _TOO_MANY_DIGITS in str(exc) else one_line(exc)
        log.warning("a message is not JSON (%s); answered with a parse error", reason)
        protocol.send_error(top_level_id(body), PARSE_ERROR, f"the message is not JSON ({reason})")
        return
    except RecursionError:
        log.warning("a message is nested too deeply to read; answered with InvalidRequest")
        protocol.send_error(
            top_level_id(body), INVALID_REQUEST, "the message is nested too deeply to read"
        )
        return
    request_id = data.get("id") if isinstance(data, dict) else None
    method = data.get("method") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        log.warning("a message is not a JSON-RPC 2.0 object; answered with InvalidRequest")
        protocol.send_error(request_id, INVALID_REQUEST, "expected a JSON-RPC 2.0 message object")
        return
    is_request = "id" in data and method is not None
    if is_request and protocol.is_shut_down and method != lsp.EXIT:
        protocol.send_error(request_id, INVALID_REQUEST, "the server is shutting down")
        return
    try:
        message = protocol.structure(data)
    except Exception as exc:
        reason = f"{method or 'a message'}: invalid params ({one_line(exc)})"
        log.warning("%s", reason)
        if is_request:
            protocol.send_error(request_id, INVALID_PARAMS, reason)
        return
    try:
        protocol.handle_message(message)
    except JsonRpcException as exc:
        if is_request:
            protocol.send_error(request_id, exc.code, exc.message)
    except Exception as exc:
        log.error("cannot handle %s", method, exc_info=exc)
        if is_request:
            protocol.send_error(request_id, -32603, f"{method} failed ({one_line(exc)})")


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_ID_MEMBER = re.compile(rb'"id"\s*:\s*')


def top_level_id(body: bytes) -> Any:
    """The ``id`` member of the top-level object of a body ``json.loads`` refused (nested too
    deeply, a number of thousands of digits, a syntax error after the id), ``None`` when none
    can be found, so such a request still gets its answer. Runs in linear time: strings are
    masked, bracket depth is a running sum."""
    masked = _STRING.sub(lambda found: b'"' + b" " * (len(found.group()) - 2) + b'"', body)
    steps = np.frombuffer(masked, dtype=np.uint8)
    depth = np.cumsum(
        np.isin(steps, (ord("{"), ord("["))).astype(np.int64)
        - np.isin(steps, (ord("}"), ord("]"))).astype(np.int64)
    )
    for found in _ID_MEMBER.finditer(body):
        at = found.start()
        if at == 0 or depth[at - 1] != 1 or masked[at : at + 4] != b'"  "':
            continue  # inside a string, or a member of a nested object
        tail = body[found.end() : found.end() + 200].decode("utf-8", "replace")
        try:
            value, _ = json.JSONDecoder().raw_decode(tail)
        except ValueError:
            return None
        return value if isinstance(value, int | str) and not isinstance(value, bool) else None
    return None


_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*\r?\n")
_LENGTH_DIGITS = 18
_GLUED_LENGTH = re.compile(rb"Content-Length:[ \t]*\d+[ \t]*\r\n$", re.IGNORECASE)


class ChunkReader:
    """``readline`` and ``read`` over a function that returns the next bytes available
    (``b""`` at the end). It holds no lock of Python's buffered files, so a thread blocked in
    it cannot stop the interpreter from exiting."""

    def __init__(self, receive: Callable[[], bytes]) -> None:
        self.receive = receive
        self.buffer = bytearray()
        self.ended = False

    def _fill(self) -> bool:
        if self.ended:
            return False
        chunk = self.receive()
        if not chunk:
            self.ended = True
            return False
        self.buffer += chunk
        return True

    def readline(self, limit: int) -> bytes:
        """Bytes up to and including the next LF, at most ``limit`` of them."""
        while True:
            end = self.buffer.find(b"\n", 0, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self.buffer) >= limit or not self._fill():
                return self._take(min(limit, len(self.buffer)))

    def read(self, size: int) -> bytes:
        """``size`` bytes, or fewer when the input ends first."""
        while len(self.buffer) < size and self._fill():
            pass
        return self._take(min(size, len(self.buffer)))

    def _take(self, size: int) -> bytes:
        taken = bytes(self.buffer[:size])
        del self.buffer[:size]
        return taken


def file_chunks(fd: int) -> Callable[[], bytes]:
    """The ``receive`` function of a ``ChunkReader`` over a file descriptor."""
    return lambda: os.read(fd, 1 << 16)


class FrameReader:
    """LSP frames (headers, a blank line, a body of ``Content-Length`` bytes) from a byte
    stream. A frame that cannot be read is reported through ``on_problem`` and skipped:
    reading goes on at the next line holding a ``Content-Length`` header (a JSON body never
    holds one, since raw line breaks cannot occur inside JSON strings). Memory stays
    bounded: header lines are read ``MAX_HEADER_LINE`` bytes at a time, and a message over
    ``max_bytes`` is skipped line by line."""

    def __init__(
        self, stream: ChunkReader, max_bytes: int, on_problem: Callable[[str], None]
    ) -> None:
        self.stream = stream
        self.max_bytes = max_bytes
        self.on_problem = on_problem

    def __iter__(self) -> Iterator[bytes]:
        """The bodies, in order, until the stream ends."""
        line: bytes | None = None
        while True:
            length, problem = None, None
            while True:
                current = line if line is not None else self.stream.readline(MAX_HEADER_LINE)
                line = None
                if not current:
                    return
                if current in (b"\r\n", b"\n"):
                    break
                header = _HEADER.fullmatch(current)
                glued = self._glued_header(current)
                if header is None or glued is not None:
                    problem = f"not a header line: {current[:40]!r}"
                    line = glued
                    break
                if header.group(1).lower() == b"content-length":
                    value = header.group(2)
                    if not value.isdigit():
                        problem = f"Content-Length {value[:20].decode('latin-1')!r} is not a length"
                        break
                    if len(value) > _LENGTH_DIGITS:  # int() refuses thousands of digits
                        problem = f"a Content-Length of {len(value)} digits is over the limit"
                        break
                    length = int(value)
            if problem is None and length is None:
                problem = "a message has no Content-Length header"
            elif problem is None and length is not None and length > self.max_bytes:
                problem = f"a message of {length} bytes is over the limit of {self.max_bytes}"
            if problem is not None:
                self.on_problem(f"{problem}; skipped to the next message")
                line = line or self._next_header()
                if line is None:
                    return
                continue
            assert length is not None
            body = self.stream.read(length)
            if len(body) < length:
                self.on_problem("the input ended inside a message")
                return
            yield body

    @staticmethod
    def _glued_header(chunk: bytes) -> bytes | None:
        """A ``Content-Length`` header line at the end of ``chunk`` after other bytes (a
        body shorter than announced runs into the next message's header), else ``None``."""
        found = _GLUED_LENGTH.search(chunk)
        return chunk[found.start() :] if found is not None and found.start() > 0 else None

    def _next_header(self) -> bytes | None:
        """Skip to the next line that ends with a ``Content-Length`` header and return that
        header line; ``None`` when the stream ends first."""
        tail = b""
        while chunk := self.stream.readline(MAX_HEADER_LINE):
            window = tail + chunk
            found = _GLUED_LENGTH.search(window)
            if found is not None:
                return window[found.start() :]
            tail = b"" if chunk.endswith(b"\n") else window[-64:]
        return None


class SocketWriter:
    """pygls's writer interface over a connected socket."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection

    def write(self, data: bytes) -> None:
        self.connection.sendall(data)

    def close(self) -> None:
        self.connection.close()


def post_to_loop(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> bool:
    """Run ``callback(*args)`` on the event loop from another thread; ``False`` once the loop
    has closed (the server is exiting, so there is no one left to tell)."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        if not loop.is_closed():
            raise
        return False
    return True


class ClientWriter:
    """pygls's writer interface over the connection to the client, quiet once that
    connection has ended. pygls answers a failed write by telling the client about it, which
    fails again and again, each time logging a longer traceback; after ``exit`` (which closes
    the connection while an edit may still report) or after the client has gone, a message
    is dropped instead. ``on_lost`` runs once when a write finds the client gone."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.closed = False
        self.on_lost: Callable[[], None] | None = None

    def write(self, data: bytes) -> None:
        if self.closed:
            log.debug("the connection is closed; a message of %d bytes is dropped", len(data))
            return
        try:
            self.inner.write(data)
        except (OSError, ValueError) as exc:
            self.closed = True
            log.warning("the connection to the client is lost (%s)", one_line(exc))
            if self.on_lost is not None:
                self.on_lost()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.inner.close()


def serve_stream(
    ls: LanguageServer,
    reader: ChunkReader,
    writer: Any,
    max_bytes: int = MAX_MESSAGE_BYTES,
    on_exit: Callable[[], None] | None = None,
) -> int:
    """Serve one client: frames from ``reader`` (read on a daemon thread, so a blocked read
    never keeps the process alive), handled on an event loop, answers to ``writer``.
    Returns the exit status: 0 after ``shutdown`` and ``exit``, 1 after ``exit`` alone or
    when the input ends. ``on_exit`` runs before returning (to stop running edits)."""
    protocol: CadProtocol = ls.protocol  # type: ignore[assignment]
    connection = ClientWriter(writer)
    protocol.set_writer(connection)

    def problem(message: str) -> None:
        log.warning("%s", message)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def end() -> None:
            if not ended.done():
                log.info("the client closed the connection")
                ended.set_result(None)

        def pump() -> None:
            try:
                for body in FrameReader(reader, max_bytes, problem):
                    if not post_to_loop(loop, dispatch, protocol, body):
                        return
            except (OSError, ValueError) as exc:
                log.warning("cannot read from the client (%s)", exc)
            post_to_loop(loop, end)

        connection.on_lost = lambda: post_to_loop(loop, end)
        threading.Thread(target=pump, name="cad-lsp-reader", daemon=True).start()
        await ended

    status = 1
    try:
        asyncio.run(run())
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    finally:
        if on_exit is not None:
            on_exit()
    return status


def serve_stdio(
    ls: LanguageServer, stdin: BinaryIO, stdout: BinaryIO, on_exit: Callable[[], None]
) -> int:
    """Serve the client on stdin/stdout (see ``serve_stream``)."""
    reader = ChunkReader(file_chunks(stdin.fileno()))
    return serve_stream(ls, reader, StdoutWriter(stdout), on_exit=on_exit)


def serve_tcp(ls: LanguageServer, host: str, port: int, on_exit: Callable[[], None]) -> int:
    """Wait for one client on ``host:port`` and serve it (see ``serve_stream``)."""
    with socket.create_server((host, port)) as server:
        log.info("listening on %s:%s", host, port)
        connection, _ = server.accept()
    with connection:
        reader = ChunkReader(lambda: connection.recv(1 << 16))
        return serve_stream(ls, reader, SocketWriter(connection), on_exit=on_exit)
