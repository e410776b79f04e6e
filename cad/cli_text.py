"""How the command line reads: plurals, usage lines, which options were given, and
writing results to standard output."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, get_args

import typer
from rich.console import Console
from typer.core import TyperCommand

from cad.errors import UserError


def cli_console(stderr: bool = False) -> Console:
    """A console for a command's output that never breaks a line itself: on a terminal long
    lines wrap where the terminal wraps them, and output to a pipe or a file keeps every line
    whole (a piped diff must apply, a suggested command must stay one line); tables take
    their natural width there. Colours only on a terminal, as rich decides."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else UNWRAPPED_WIDTH
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


UNWRAPPED_WIDTH = 100_000
"""The width rich lays out to when it writes to a pipe or a file: wider than any line."""


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 token``, ``2 tokens``, ``0 tokens``; ``plural_form`` for irregular nouns."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


class CadCommand(TyperCommand):
    """A command whose help reads plainly: arguments and option values named in capitals by
    what they take (``FILE``, ``PATH``, ``N``, ``TEXT``, ``ar|pld``), never by Python types,
    and options grouped in the panels their ``rich_help_panel`` names (``Options`` for the
    rest). The usage line names arguments as their help does: ``cad edit [OPTIONS] FILE``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for parameter in self.params:
            if parameter.param_type_name == "argument" and not parameter.metavar:
                parameter.metavar = (parameter.name or "").upper()
            elif parameter.param_type_name == "option" and not parameter.metavar:
                parameter.metavar = plain_metavar(parameter)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The options placeholder, then each argument: ``NAME``, ``[NAME]`` when optional,
        with ``...`` when it takes several values."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for parameter in self.get_params(ctx):
            if parameter.param_type_name != "argument":
                pieces.extend(parameter.get_usage_pieces(ctx))
                continue
            pieces.append(_argument_name(parameter))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Arguments, then the options panel by panel, in the order they first appear."""
        sections: dict[str, list[tuple[str, str]]] = {}
        for parameter in self.get_params(ctx):
            if parameter.param_type_name == "argument":
                help_text = getattr(parameter, "help", None) or ""
                if parameter.required:
                    help_text = f"{help_text}  [required]".strip()
                sections.setdefault("Arguments", []).append((_argument_name(parameter), help_text))
                continue
            record = parameter.get_help_record(ctx)
            if record is not None:
                panel = getattr(parameter, "rich_help_panel", None) or "Options"
                sections.setdefault(panel, []).append(record)
        for title, records in sections.items():
            with formatter.section(title):
                formatter.write_dl(records)


def plain_metavar(parameter: Any) -> str | None:
    """What an option takes, in capitals: ``PATH``, ``N``, ``NUMBER``, ``TEXT``, or its
    choices ``a|b``, with ``...`` when it may be repeated; ``None`` for a flag."""
    if getattr(parameter, "is_flag", False) or getattr(parameter, "count", False):
        return None
    described = parameter.type_descriptor
    annotation = described.annotation
    if described.is_list:
        (annotation,) = get_args(annotation) or (str,)
    if described.is_choice:
        name = "|".join(str(getattr(choice, "value", choice)) for choice in described.choices)
    elif described.is_path:
        name = "PATH"
    else:
        name = _TYPE_NAMES.get(annotation, "TEXT")
    return name + ("..." if described.is_list else "")


_TYPE_NAMES: dict[Any, str] = {int: "N", float: "NUMBER", str: "TEXT", bool: "BOOL"}


def _argument_name(parameter: Any) -> str:
    """An argument as usage and help name it: ``NAME``, ``[NAME]`` when optional, with
    ``...`` when it takes several values."""
    name = parameter.metavar or (parameter.name or "").upper()
    name = name if parameter.required else f"[{name}]"
    return name + ("..." if parameter.nargs != 1 else "")


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
