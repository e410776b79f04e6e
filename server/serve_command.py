"""``cad serve``: start the language server."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

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
            envvar="CAD_MODEL",
            help="Default model (hub id or folder); editor settings win.",
            show_default="the adapter's base model, else the default model",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(envvar="CAD_DEVICE", help="Default device: auto, cpu or cuda[:N]."),
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(envvar="CAD_DTYPE", help="Default dtype: auto, float32, float16 or bfloat16."),
    ] = None,
    adapter: Annotated[str | None, typer.Option(help="Default adapter folder (cad train).")] = None,
    compile: Annotated[
        bool | None,
        typer.Option(
            "--compile/--no-compile",
            help="Default for compiled forwards over the static KV cache; --preload compiles them.",
        ),
    ] = None,
    no_graphs: Annotated[
        bool,
        typer.Option(
            "--no-graphs",
            help="Run transformers' eager forwards: no CUDA graphs on a GPU, no packed weights "
            "on a CPU.",
        ),
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(help="Decode on the shared engine at this URL (cad-engine) instead."),
    ] = None,
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Start a warm edit server for cad edit in the background (on a local socket, "
            "or --tcp) and return.",
        ),
    ] = False,
    stop: Annotated[
        bool, typer.Option("--stop", help="Stop the warm server --background started.")
    ] = False,
    warm_server: Annotated[
        bool, typer.Option("--warm", hidden=True, help="Run the warm edit server here.")
    ] = False,
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
    to a shared engine (cad-engine) instead of decoding in this process. --background starts
    a warm server that keeps the model loaded for cad edit; --stop stops it."""
    address = parse_address(tcp) if tcp else None
    defaults = {
        "model": model,
        "device": device,
        "dtype": dtype,
        "adapter": adapter,
        "compile": compile,
        "graphs": False if no_graphs else None,
        "engine": engine,
    }
    if stop or background or warm_server:
        _warm(address, defaults, preload, stop=stop, background=background, log_file=log_file)
        return
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
    status = serve(tcp=address, preload=preload, defaults=defaults)
    if status:
        raise typer.Exit(status)


def _warm(
    tcp: tuple[str, int] | None,
    defaults: dict[str, Any],
    preload: bool,
    *,
    stop: bool,
    background: bool,
    log_file: Path | None,
) -> None:
    """``--background`` (start a warm server and return), ``--stop``, or ``--warm`` (be the
    warm server, in this process)."""
    from cad.server import warm

    if defaults["engine"] is not None:
        raise UserError("--engine applies to the language server, not to the warm server")
    if sum((stop, background)) > 1:
        raise UserError("choose one of --background and --stop")
    address: str | tuple[str, int] = tcp if tcp is not None else str(warm.default_socket())
    if stop:
        try:
            warm.ask_to_stop(address)
        except warm.Unreachable:
            raise UserError(f"no warm server runs at {warm.describe(address)}") from None
        print(f"stopped the warm server at {warm.describe(address)}", file=sys.stderr)
        return
    if background:
        arguments = [*(["--tcp", warm.describe(address)] if tcp is not None else [])]
        for name in ("model", "device", "dtype", "adapter"):
            if defaults[name] is not None:
                arguments += [f"--{name}", str(defaults[name])]
        arguments += ["--compile"] if defaults["compile"] else []
        arguments += ["--no-graphs"] if defaults["graphs"] is False else []
        arguments += ["--preload"] if preload else []
        pid = warm.start_background(address, arguments)
        print(
            f"warm server ready at {warm.describe(address)} (process {pid}); cad edit decodes "
            "there until cad serve --stop",
            file=sys.stderr,
        )
        return
    configure_logging(log_file, verbose=False)
    warm.run_server(address, warm.ServerDefaults.from_settings(defaults), preload=preload)


def register(app: typer.Typer) -> None:
    """Add ``cad serve`` to the app."""
    app.command(
        "serve", cls=CadCommand, short_help="Run the language server, or a warm edit server."
    )(cmd_serve)
