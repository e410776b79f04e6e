"""``cad serve``: start the language server."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer


def cmd_serve(
    tcp: Annotated[str | None, typer.Option(help="Listen on HOST:PORT instead of stdio.")] = None,
    preload: Annotated[bool, typer.Option("--preload", help="Load the model at start.")] = False,
    log_file: Annotated[
        Path | None, typer.Option(help="Write logs here instead of stderr.")
    ] = None,
) -> None:
    """Run the language server (stdio by default); logs never go to stdout."""
    from server.serve import serve

    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    serve(tcp=tcp, preload=preload)


def register(app: typer.Typer) -> None:
    """Add ``cad serve`` to the app."""
    app.command("serve")(cmd_serve)
