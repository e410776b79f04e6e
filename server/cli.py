"""The ``cad`` command line: one typer app; every failure is one line on stderr."""

from __future__ import annotations

import sys

import typer

from cad.resolver import ProgramError
from cad.server import edit_command, program_commands, serve_command
from cad.server.files import UserError
from cad.training import calibrate_command, dataset_commands
from cad.training import commands as training_commands

app = typer.Typer(
    name="cad",
    help="Copy-as-Decode: apply LLM edits as programs of copies and generated text.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
program_commands.register(app)
edit_command.register(app)
serve_command.register(app)
training_commands.register(app)
dataset_commands.register(app)
calibrate_command.register(app)


def main() -> None:
    """Entry point: run the app; bad input becomes one ``error: ...`` line and exit 1 or 2."""
    try:
        status = app(standalone_mode=False)
    except typer.TyperException as exc:
        context = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and context is not None:
            print(context.get_help())
            sys.exit(2)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        hint = f" (see: {context.command_path} --help)" if context is not None else ""
        print(f"error: {message}{hint}", file=sys.stderr)
        sys.exit(2)
    except (UserError, ProgramError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        print("error: interrupted; nothing was written", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    if isinstance(status, int) and status:
        sys.exit(status)
