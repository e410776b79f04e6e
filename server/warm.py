"""A warm edit server for ``cad edit``: the model stays loaded between commands.

``cad serve --background`` starts it as a process of its own, listening on a socket in the
cad cache folder that only its user may open (or on ``--tcp HOST:PORT``); ``cad edit`` uses it
when it answers (``--server ADDRESS`` names one) and decodes in its own process otherwise.
``cad serve --stop`` stops it.

The exchange is JSON, one object per line, over one connection per edit. The client sends
``{"cad": 1, "run": …, "options": …, "files": …}``: the options and the text of every file
the edit reads, so the server needs none of the client's files. The server answers with
``{"status": "loading", "model": …}`` while it loads a model, ``{"progress": {…}}`` while it
decodes, and ends with ``{"result": {text, program, stats}}`` or ``{"error": LINE,
"exit_code": N}``. A client that closes the connection cancels its edit. Edits run one at a
time, through the same functions as in ``cad edit``'s own process, so the new text is the
same byte for byte. One loaded model is kept: an edit that needs another replaces it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cad.errors import UserError
from cad.resolver import ProgramError
from cad.server.edit_pipeline import (
    EditFiles,
    EditOptions,
    EditOutcome,
    Run,
    decode,
    load,
    model_key,
    model_name,
    prepare_inputs,
)

log = logging.getLogger("cad.warm")
PROTOCOL = 1
SOCKET_NAME = "warm-server.sock"
LOG_NAME = "warm-server.log"
MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""The largest request read: the edited file and every other input, well over their limits."""
START_TIMEOUT_S = 60.0


class Unreachable(Exception):
    """No warm server answers at the address (nothing listens, or it is not a cad server)."""


def default_socket() -> Path:
    """The local socket ``cad serve --background`` listens on: in the cad cache folder."""
    from cad.cache import cache_folder

    return cache_folder() / SOCKET_NAME


def parse_server_address(address: str) -> str | tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``, on 127.0.0.1) as a TCP address, or a socket's path (one
    with a ``/``)."""
    if "/" in address:
        return address
    host, _, port = address.rpartition(":")
    if not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        raise UserError(
            f"--server {address!r}: expected HOST:PORT, PORT or the path of a socket, e.g. "
            "127.0.0.1:2088"
        )
    return host or "127.0.0.1", int(port)


def describe(address: str | tuple[str, int]) -> str:
    """An address as the user writes it."""
    return address if isinstance(address, str) else f"{address[0]}:{address[1]}"


def _connect(address: str | tuple[str, int], timeout: float) -> socket.socket:
    try:
        if isinstance(address, str):
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.settimeout(timeout)
            connection.connect(address)
        else:
            connection = socket.create_connection(address, timeout=timeout)
    except OSError as exc:
        raise Unreachable(f"{describe(address)}: {exc.strerror or exc}") from None
    connection.settimeout(None)
    return connection


def _lines(connection: socket.socket) -> Iterator[Any]:
    """The JSON objects the peer sends, one per line, until it closes the connection."""
    with connection.makefile("rb") as stream:
        while line := stream.readline(MAX_REQUEST_BYTES + 1):
            if not line.endswith(b"\n"):
                raise ValueError("a message is too long or cut short")
            yield json.loads(line)


def _send(connection: socket.socket, message: dict[str, Any]) -> None:
    connection.sendall(json.dumps(message).encode("utf-8") + b"\n")


# The client: cad edit.


def request_edit(
    address: str | tuple[str, int],
    options: EditOptions,
    run: Run,
    files: EditFiles,
    on_status: Callable[[str], None],
    on_progress: Callable[[Any], None],
) -> EditOutcome:
    """The edit decoded by the warm server at ``address``. ``on_status`` hears what it does
    (``loading MODEL``, ``decoding``), ``on_progress`` the decoder's progress. Raises
    ``Unreachable`` when no warm server answers before the edit was sent, and ``UserError``
    with the server's own line when the edit fails there."""
    connection = _connect(address, timeout=2.0)
    with connection:
        try:
            _send(
                connection,
                {
                    "cad": PROTOCOL,
                    "run": run.value,
                    "options": options.to_json(),
                    "files": asdict(files),
                },
            )
        except OSError as exc:
            raise Unreachable(f"{describe(address)}: {exc.strerror or exc}") from None
        try:
            for message in _lines(connection):
                if "progress" in message:
                    on_progress(_Progress(**message["progress"]))
                elif "status" in message:
                    on_status(str(message.get("model") or message["status"]))
                elif "result" in message:
                    return EditOutcome.from_json(message["result"])
                elif "error" in message:
                    raise UserError(str(message["error"]), exit_code=int(message["exit_code"]))
        except (OSError, ValueError, TypeError) as exc:
            raise UserError(
                f"the warm server at {describe(address)} failed ({exc}); run the edit with "
                "--no-server"
            ) from None
    raise UserError(
        f"the warm server at {describe(address)} closed the connection before answering; "
        "its log is in the cad cache folder"
    )


@dataclass(frozen=True)
class _Progress:
    """A progress snapshot as the server sent it (the fields of ``cad.selector.Progress``)."""

    ops: int
    lines_copied: int
    lines_generated: int
    tokens_generated: int


def ask_to_stop(address: str | tuple[str, int]) -> None:
    """Stop the warm server at ``address`` (``Unreachable`` when none answers)."""
    with _connect(address, timeout=2.0) as connection:
        _send(connection, {"cad": PROTOCOL, "stop": True})
        with contextlib.suppress(OSError, ValueError):
            for _ in _lines(connection):
                pass


# The server: cad serve --background.


@dataclass(frozen=True)
class ServerDefaults:
    """What ``cad serve --background`` was given: the model settings an edit uses where it
    gives none of its own (``None``: the edit's own value stands)."""

    model: str | None = None
    device: str | None = None
    dtype: str | None = None
    adapter: str | None = None
    compile: bool | None = None
    graphs: bool | None = None

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> ServerDefaults:
        """The defaults among ``cad serve``'s settings."""
        return cls(**{item: settings.get(item) for item in cls.__dataclass_fields__})

    def apply(self, options: EditOptions) -> EditOptions:
        """``options`` with the defaults filled in where they are left at their own."""
        changes: dict[str, Any] = {}
        if self.model and not options.model:
            changes["model"] = self.model
        if self.device and options.device == "auto":
            changes["device"] = self.device
        if self.dtype and options.dtype == "auto":
            changes["dtype"] = self.dtype
        if self.adapter and options.adapter is None:
            changes["adapter"] = Path(self.adapter)
        if self.compile and not options.compile:
            changes["compile"] = True
        if self.graphs is False:
            changes["graphs"] = False
        return replace(options, **changes)


class WarmServer:
    """Loaded model, the lock that runs one edit at a time, and the listening socket."""

    def __init__(self, listener: socket.socket, defaults: ServerDefaults) -> None:
        self.listener = listener
        self.defaults = defaults
        self.lock = threading.Lock()
        self.loaded: Any = None
        self.loaded_key: tuple[Any, ...] | None = None
        self.stopping = threading.Event()

    def model(self, options: EditOptions, on_status: Callable[[dict[str, Any]], None]) -> Any:
        """The model the options name: the loaded one, or loaded now (replacing it)."""
        key = model_key(options)
        if self.loaded is None or self.loaded_key != key:
            on_status({"status": "loading", "model": f"loading {model_name(options)}"})
            self.loaded, self.loaded_key = None, None
            self.loaded = load(options)
            self.loaded_key = key
        return self.loaded

    def preload(self) -> None:
        """Load the default model before the first edit asks for it."""
        options = self.defaults.apply(EditOptions(file=Path("preload"), instr="preload"))
        with self.lock:
            try:
                self.model(options, lambda _: None)
            except UserError as exc:
                log.error("cannot preload the model: %s", exc)

    def serve_forever(self) -> None:
        """Answer connections until asked to stop (each on a thread of its own)."""
        while not self.stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                if self.stopping.is_set():
                    return
                raise
            threading.Thread(target=self.handle, args=(connection,), daemon=True).start()

    def handle(self, connection: socket.socket) -> None:
        """One connection: one edit (or a stop request)."""
        with connection:
            try:
                stream = _lines(connection)
                request = next(stream, None)
                if request is None:
                    return
                if not isinstance(request, dict) or request.get("cad") != PROTOCOL:
                    _send(connection, _error("the request does not fit this version of cad", 2))
                    return
                if request.get("stop") is True:
                    self.stop()
                    _send(connection, {"stopped": True})
                    return
                self.edit(connection, request)
            except (OSError, ValueError) as exc:
                log.warning("a connection failed: %s", exc)

    def edit(self, connection: socket.socket, request: dict[str, Any]) -> None:
        """Decode the request's edit and send the outcome; the connection closing cancels it."""
        from cad.selector import Cancelled

        cancel = threading.Event()
        threading.Thread(target=_watch, args=(connection, cancel), daemon=True).start()
        send = _sender(connection, cancel)
        try:
            options = self.defaults.apply(EditOptions.from_json(request.get("options")))
            run = Run(request.get("run"))
            files = EditFiles(**request.get("files", {}))
            inputs = prepare_inputs(options, run, files)
            with self.lock:
                if cancel.is_set():
                    return
                loaded = self.model(options, send)
                send({"status": "decoding"})
                outcome = decode(loaded, options, run, inputs, _reporter(send), cancel)
        except Cancelled:
            log.info("an edit was cancelled: its client left")
            return
        except UserError as exc:
            send(_error(str(exc), exc.exit_code))
            return
        except ProgramError as exc:
            send(_error(str(exc), 1))
            return
        except (TypeError, ValueError) as exc:
            send(_error(f"the request does not fit this version of cad ({exc})", 2))
            return
        except Exception as exc:  # the server answers, and lives on, whatever an edit throws
            log.exception("an edit failed")
            send(_error(f"the edit failed in the warm server ({type(exc).__name__}: {exc})", 1))
            return
        send({"result": outcome.to_json()})

    def stop(self) -> None:
        """Stop accepting edits; the running one finishes."""
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


def _error(line: str, exit_code: int) -> dict[str, Any]:
    return {"error": line.splitlines()[0] if line else "error", "exit_code": exit_code}


def _watch(connection: socket.socket, cancel: threading.Event) -> None:
    """Set ``cancel`` once the client closes its side of the connection."""
    with contextlib.suppress(OSError):
        while connection.recv(4096):
            pass
    cancel.set()


def _sender(connection: socket.socket, cancel: threading.Event) -> Callable[[dict[str, Any]], None]:
    """Send one message; a client that went away cancels the edit instead."""

    def send(message: dict[str, Any]) -> None:
        try:
            _send(connection, message)
        except OSError:
            cancel.set()

    return send


def _reporter(send: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
    """The decoder's progress callback, forwarding at most a few snapshots a second."""
    last = [0.0]

    def report(progress: Any) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.1:
            last[0] = now
            send(
                {
                    "progress": {
                        "ops": progress.ops,
                        "lines_copied": progress.lines_copied,
                        "lines_generated": progress.lines_generated,
                        "tokens_generated": progress.tokens_generated,
                    }
                }
            )

    return report


def listen(address: str | tuple[str, int]) -> socket.socket:
    """A listening socket at ``address``; a local socket only its user may open. A stale
    socket file (nothing listens there) is replaced; a live one is refused."""
    if isinstance(address, tuple):
        try:
            return socket.create_server(address)
        except OSError as exc:
            raise UserError(f"cannot listen on {describe(address)} ({exc.strerror})") from None
    path = Path(address)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(Unreachable):
        _connect(address, timeout=1.0).close()
        raise UserError(f"a warm server already runs at {path}; stop it with cad serve --stop")
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise UserError(f"{path} is not a socket; remove it or choose another --server")
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        raise UserError(f"cannot listen on {path} ({exc.strerror})") from None
    finally:
        os.umask(previous)
    listener.listen(16)
    return listener


def run_server(address: str | tuple[str, int], defaults: ServerDefaults, preload: bool) -> int:
    """Serve edits at ``address`` until ``cad serve --stop``, SIGTERM or SIGINT; with
    ``preload`` the default model loads before the first edit asks for it."""
    listener = listen(address)
    server = WarmServer(listener, defaults)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.stop())
    log.info("warm server listening on %s (pid %d)", describe(address), os.getpid())
    if preload:
        threading.Thread(target=server.preload, daemon=True).start()
    try:
        server.serve_forever()
    finally:
        if isinstance(address, str):
            with contextlib.suppress(OSError):
                Path(address).unlink()
    log.info("warm server stopped")
    return 0


def start_background(address: str | tuple[str, int], arguments: list[str]) -> int:
    """Start a warm server as a process of its own (``arguments``: ``cad serve``'s own,
    less ``--background``), wait until it answers, and return its process id. Its log goes
    to the cad cache folder."""
    from cad.cache import cache_folder

    with contextlib.suppress(Unreachable):
        _connect(address, timeout=1.0).close()
        raise UserError(
            f"a warm server already runs at {describe(address)}; stop it with cad serve --stop"
        )
    folder = cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / LOG_NAME
    command = [sys.executable, "-m", "cad", "serve", "--warm", *arguments]
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise UserError(
                f"the warm server did not start (exit status {process.returncode}); its log is "
                f"{log_path}"
            )
        with contextlib.suppress(Unreachable):
            _connect(address, timeout=1.0).close()
            return process.pid
        time.sleep(0.1)
    process.terminate()
    raise UserError(f"the warm server did not answer within {START_TIMEOUT_S:.0f}s; see {log_path}")
