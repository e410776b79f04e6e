"""The ``cad`` command line: one typer app; every failure is one line on stderr.

Commands report bad input by raising ``UserError`` (the program language's ``ProgramError``
and the datasets' ``DatasetError`` count as such); ``main`` turns it into one ``error: ...``
line and a non-zero exit status, as is output that stdout cannot take. SIGTERM stops a
command the way Ctrl-C does, so an interrupted write removes its temporary file, and the line
says which files were written in full before the signal. Warnings and progress bars of the libraries
underneath are not shown: what the user sees is the command's own output.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import warnings
from typing import Any, NoReturn

import typer

from cad.cli_text import flush_stdout, output_error
from cad.errors import NativeCoreError, UserError
from cad.files import completed_writes
from cad.resolver import ProgramError
from cad.server import edit_command, program_commands, serve_command
from cad.server.user_config import default_map, load_config
from cad.training import calibrate_command, dataset_commands
from cad.training import commands as training_commands
from cad.training.datasets import DatasetError

app = typer.Typer(
    name="cad",
    help="Copy-as-Decode: apply LLM edits as programs of copies and generated text.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
program_commands.register(app)
edit_command.register(app)
serve_command.register(app)
training_commands.register(app)
dataset_commands.register(app)
calibrate_command.register(app)


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like KeyboardInterrupt, so cleanup code runs."""


def _terminate(signum: int, frame: Any) -> NoReturn:
    raise Terminated


def quiet_libraries() -> None:
    """Hide what the libraries underneath print for developers: Python warnings (unless the
    user asked for them with ``-W`` or ``PYTHONWARNINGS``), their logged warnings (e.g.
    bitsandbytes on an optional kernel it cannot find), and, when stderr is not a terminal,
    progress bars (tqdm). ``cad serve`` sets up its own log."""
    if not sys.warnoptions:
        warnings.simplefilter("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")


_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EFBIG, errno.EDQUOT})
"""Failures of a write, not of a read: without a file name, they are stdout's."""


def _os_error_message(exc: OSError) -> str:
    """What went wrong in an I/O failure: stdout's own error when stdout is what failed
    (it still holds output, or the failure is a write's without a file), otherwise the
    system's message and the file it names."""
    try:
        flush_stdout()
    except UserError as output:
        return str(output)
    if exc.filename is None and exc.errno in _OUTPUT_ERRNOS:
        return str(output_error(exc))
    where = f": {exc.filename}" if exc.filename is not None else ""
    return f"{exc.strerror or exc}{where}"


def _what_was_written() -> str:
    """What a stopped command leaves behind: nothing, or the files it wrote in full before
    the signal arrived (one held back while a write finished arrives right after it)."""
    written = completed_writes()
    if not written:
        return "nothing was written"
    return "it had written " + ", ".join(str(path) for path in written)


def main() -> None:
    """Entry point: run the app; bad input becomes one ``error: ...`` line and exit 1 or 2."""
    quiet_libraries()
    signal.signal(signal.SIGTERM, _terminate)
    try:
        command = typer.main.get_command(app)
        defaults = default_map(command, load_config())
        status = command.main(prog_name="cad", standalone_mode=False, default_map=defaults)
        flush_stdout()
    except typer.TyperException as exc:
        context = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and context is not None:
            try:
                print(context.get_help())
                flush_stdout()
            except OSError as failure:
                print(f"error: {output_error(failure)}", file=sys.stderr)
            except UserError as output:
                print(f"error: {output}", file=sys.stderr)
            sys.exit(2)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        hint = f" (see: {context.command_path} --help)" if context is not None else ""
        print(f"error: {message}{hint}", file=sys.stderr)
        sys.exit(2)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (ProgramError, DatasetError, NativeCoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:  # an I/O failure no command foresaw, e.g. help text to /dev/full
        print(f"error: {_os_error_message(exc)}", file=sys.stderr)
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        print(f"error: interrupted; {_what_was_written()}", file=sys.stderr)
        sys.exit(130)
    except Terminated:
        print(f"error: terminated; {_what_was_written()}", file=sys.stderr)
        sys.exit(128 + signal.SIGTERM)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    if isinstance(status, int) and status:
        sys.exit(status)


if __name__ == "__main__":
    main()
