"""How the command line reads: plurals, usage lines, which options were given, and
writing results to standard output."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperCommand

from cad.errors import UserError


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 token``, ``2 tokens``, ``0 tokens``; ``plural_form`` for irregular nouns."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


class CadCommand(TyperCommand):
    """A command whose usage line names arguments plainly and in capitals, as its help text
    does: ``cad edit [OPTIONS] FILE``, not ``{file}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for parameter in self.params:
            if parameter.param_type_name == "argument" and not parameter.metavar:
                parameter.metavar = (parameter.name or "").upper()

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The options placeholder, then each argument: ``NAME``, ``[NAME]`` when optional,
        with ``...`` when it takes several values."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for parameter in self.get_params(ctx):
            if parameter.param_type_name != "argument":
                pieces.extend(parameter.get_usage_pieces(ctx))
                continue
            name = parameter.metavar or (parameter.name or "").upper()
            name = name if parameter.required else f"[{name}]"
            pieces.append(name + ("..." if parameter.nargs != 1 else ""))
        return pieces


def given_options(ctx: typer.Context, names: list[str]) -> set[str]:
    """Which of the parameters ``names`` were given (on the command line or through the
    environment) rather than left at their defaults."""
    given = set()
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name != "DEFAULT":
            given.add(name)
    return given


@contextlib.contextmanager
def writing_stdout() -> Iterator[None]:
    """Write a command's result to standard output inside this block; it is flushed at the
    end. A stdout that cannot take it (a full device such as ``/dev/full``, a pipe whose
    reader has gone) becomes one ``UserError``, not a traceback."""
    try:
        yield
        sys.stdout.flush()
    except OSError as exc:
        raise output_error(exc) from None


def flush_stdout() -> None:
    """Flush standard output (whatever a command printed), with the same error as
    :func:`writing_stdout`."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        raise output_error(exc) from None


def output_error(exc: OSError) -> UserError:
    """The error for output that could not be written to stdout. Standard output is pointed at
    ``/dev/null`` first, so that what is still buffered cannot fail a second time when the
    interpreter flushes it on exit."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    return UserError(f"cannot write the output to stdout ({exc.strerror or exc})")
