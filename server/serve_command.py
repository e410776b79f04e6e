"""``cad serve``: start the language server."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from cad.cli_text import CadCommand
from cad.errors import UserError


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (host 127.0.0.1) as a (host, port) pair."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--tcp {address!r}: expected HOST:PORT or PORT, e.g. 127.0.0.1:2087")
    return host or "127.0.0.1", int(port)


class OneLinePerUserError(logging.Filter):
    """Keeps the log to one line per ordinary user error: drops pygls's own record (with a
    traceback) of an error response, which the server has already logged in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        from pygls.exceptions import JsonRpcException

        error = record.exc_info[1] if record.exc_info else None
        return not (record.name.startswith("pygls") and isinstance(error, JsonRpcException))


def configure_logging(log_file: Path | None, verbose: bool) -> None:
    """Logs to ``log_file`` or stderr: warnings and errors, one line per user error; with
    ``verbose`` also what the server does, and every traceback."""
    try:
        handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    except OSError as exc:
        raise UserError(f"--log-file {log_file}: cannot open ({exc.strerror})") from None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(OneLinePerUserError())
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, handlers=[handler], force=True
    )
    if verbose:
        logging.getLogger("pygls").setLevel(logging.WARNING)


def cmd_serve(
    tcp: Annotated[
        str | None, typer.Option(help="Listen on HOST:PORT (or PORT) instead of stdio.")
    ] = None,
    preload: Annotated[bool, typer.Option("--preload", help="Load the model at start.")] = False,
    model: Annotated[
        str | None,
        typer.Option(
            help="Default model (hub id or folder); editor settings win.",
            show_default="the adapter's base model, else the default model",
        ),
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="Default device: auto, cpu or cuda[:N].")
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="Default dtype: auto, float32, float16 or bfloat16.")
    ] = None,
    adapter: Annotated[str | None, typer.Option(help="Default adapter folder (cad train).")] = None,
    compile: Annotated[
        bool | None,
        typer.Option(
            "--compile/--no-compile",
            help="Default for static KV cache and compiled forwards; --preload compiles them.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(help="Decode on the shared engine at this URL (cad-engine) instead."),
    ] = None,
    log_file: Annotated[
        Path | None, typer.Option(help="Write logs here instead of stderr.")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Log what the server does, with tracebacks.")
    ] = False,
) -> None:
    """Run the language server (stdio by default); logs never go to stdout. --model,
    --device, --dtype and --adapter are defaults that the editor's settings override; with
    --preload they name the model loaded before the first request. --engine URL sends edits
    to a shared engine (cad-engine) instead of decoding in this process."""
    address = parse_address(tcp) if tcp else None
    if engine is not None:
        from cad.server.remote import EngineError, check_url

        try:
            check_url(engine)
        except EngineError:
            raise UserError(
                f"--engine {engine!r}: expected the engine's URL, e.g. http://127.0.0.1:8000"
            ) from None
    from cad.server.serve import serve

    configure_logging(log_file, verbose)
    defaults = {
        "model": model,
        "device": device,
        "dtype": dtype,
        "adapter": adapter,
        "compile": compile,
        "engine": engine,
    }
    status = serve(tcp=address, preload=preload, defaults=defaults)
    if status:
        raise typer.Exit(status)


def register(app: typer.Typer) -> None:
    """Add ``cad serve`` to the app."""
    app.command("serve", cls=CadCommand)(cmd_serve)
