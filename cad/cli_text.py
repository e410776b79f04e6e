"""How the command line reads: plurals, usage lines, which options were given."""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.core import TyperCommand

_BRACED = re.compile(r"\{(.+)\}(\.\.\.)?")


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 token``, ``2 tokens``, ``0 tokens``; ``plural_form`` for irregular nouns."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


class CadCommand(TyperCommand):
    """A command whose usage line names required arguments plainly: ``cad edit [OPTIONS]
    FILE``, not ``{FILE}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage pieces, with the braces around required arguments removed."""
        return [_BRACED.sub(r"\1\2", piece) for piece in super().collect_usage_pieces(ctx)]


def given_options(ctx: typer.Context, names: list[str]) -> set[str]:
    """Which of the parameters ``names`` were given (on the command line or through the
    environment) rather than left at their defaults."""
    given = set()
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name != "DEFAULT":
            given.add(name)
    return given
