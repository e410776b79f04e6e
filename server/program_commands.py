"""``cad oracle``, ``cad resolve`` and ``cad analyze``: the program language from a shell."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cad.cli_text import CadCommand, cli_console, plural, writing_stdout
from cad.errors import UserError
from cad.files import MAX_CORPUS_BYTES, MAX_TEXT_BYTES, read_text
from cad.resolver import analyze_edit, format_program, oracle, parse, resolve
from cad.resolver.coverage import DEFAULT_SWEEP, summarize


def cmd_oracle(
    before: Annotated[Path, typer.Argument(help="The document before the edit.")],
    after: Annotated[Path, typer.Argument(help="The document after the edit.")],
    subline: Annotated[bool, typer.Option("--subline", help="Allow sub-line copies.")] = False,
    min_copy: Annotated[
        int, typer.Option("--min-copy", min=1, help="Shortest copy, in lines or characters.")
    ] = 1,
) -> None:
    """Print the minimal program that turns BEFORE into AFTER."""
    program = oracle(
        read_text(before),
        read_text(after),
        granularity="subline" if subline else "line",
        min_copy=min_copy,
    )
    with writing_stdout():
        sys.stdout.write(format_program(program) + "\n")


def cmd_resolve(
    program: Annotated[Path, typer.Argument(help="A program file.")],
    document: Annotated[Path, typer.Argument(help="The document the program addresses.")],
) -> None:
    """Resolve PROGRAM against DOCUMENT and write the result to stdout, byte for byte."""
    result = resolve(parse(read_text(program)), read_text(document))
    with writing_stdout():
        sys.stdout.buffer.write(result.encode("utf-8"))


MAX_KERNEL_SPEEDUP = 1e6
"""The largest ``--kernel-speedup``: finite, so the ceiling of an edit copied whole is too."""
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024
"""The largest ``tokenizer.json`` read (real ones are a few megabytes)."""


def load_tokenizer_pieces(
    directory: Path,
) -> tuple[Callable[[str], Sequence[tuple[int, int]]], Callable[[str], int]]:
    """Offsets and token counting from a tokenizer folder holding ``tokenizer.json``."""
    from tokenizers import Tokenizer

    path = directory / "tokenizer.json"
    if not path.is_file():
        raise UserError(
            f"{directory}: no tokenizer.json there; pass a Hugging Face tokenizer folder"
        )
    read_text(path, MAX_TOKENIZER_BYTES)  # a regular UTF-8 file of bounded size
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises a bare Exception for bad files
        raise UserError(f"{path}: not a tokenizer file ({str(exc)[:200]})") from None

    def pieces(text: str) -> Sequence[tuple[int, int]]:
        return tokenizer.encode(text, add_special_tokens=False).offsets

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return pieces, count


def read_edit_rows(path: Path) -> list[tuple[str, str]]:
    """(before, after) pairs from a JSONL file, or from a built-in edit set named as
    ``cad train`` names it (``heval-python``, ``heval-js``); a bad row is a one-line error
    naming it."""
    from cad.training.datasets import BUILTIN_DATA, load_edits

    if str(path) in BUILTIN_DATA and not path.exists():
        return [(edit.before, edit.after) for edit in load_edits(str(path))]
    rows = []
    for number, line in enumerate(read_text(path, MAX_CORPUS_BYTES).split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not JSON ({exc.msg})") from None
        except (RecursionError, ValueError):
            raise UserError(
                f"{path}:{number}: not an edit (JSON nested too deeply or a number too long)"
            ) from None
        if not isinstance(row, dict) or not all(
            isinstance(row.get(key), str) for key in ("before", "after")
        ):
            raise UserError(f"{path}:{number}: expected an object with string 'before' and 'after'")
        for key in ("before", "after"):
            if len(row[key]) > MAX_TEXT_BYTES:
                raise UserError(
                    f"{path}:{number}: '{key}' has {len(row[key]):,} characters, over the "
                    f"limit of {MAX_TEXT_BYTES:,} for one text (the limit of a file); leave "
                    "the edit out"
                )
        rows.append((row["before"], row["after"]))
    if not rows:
        raise UserError(f"{path}: no edits in the file")
    return rows


def cmd_analyze(
    corpus: Annotated[
        Path,
        typer.Argument(
            help="JSONL rows with 'before' and 'after', or heval-python / heval-js.",
            metavar="CORPUS",
        ),
    ],
    tokenizer: Annotated[Path, typer.Option("--tokenizer", help="Folder with a tokenizer.json.")],
    min_copy: Annotated[
        int, typer.Option("--min-copy", min=1, help="Shortest sub-line copy, in tokens.")
    ] = 1,
    kernel_speedup: Annotated[
        float,
        typer.Option(
            "--kernel-speedup",
            min=1.0,
            max=MAX_KERNEL_SPEEDUP,
            help="Copy-vs-decode speedup per token, s.",
        ),
    ] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Copy coverage of a corpus: line vs sub-line oracles, min-span sweep, speedup ceiling."""
    pieces, count = load_tokenizer_pieces(tokenizer)
    sweep = tuple(sorted({*DEFAULT_SWEEP, min_copy}))
    results = [
        analyze_edit(before, after, pieces, count, min_copy=min_copy, sweep=sweep)
        for before, after in read_edit_rows(corpus)
    ]
    summary = summarize(results, kernel_speedup)
    if as_json:
        with writing_stdout():
            print(json.dumps(summary))
        return
    table = Table(title=f"copy coverage of {corpus.name} ({plural(int(summary['n']), 'edit')})")
    for column in (
        "oracle",
        "pooled",
        "median",
        "ops (median)",
        "program tokens (median)",
        f"ceiling @ s={kernel_speedup:g}",
    ):
        table.add_column(column)
    for name in ("line", "subline"):
        cov = summary[f"{name}_coverage"]
        assert isinstance(cov, dict)
        table.add_row(
            name,
            f"{cov['pooled']:.1%}",
            f"{cov['median']:.1%}",
            f"{summary[f'{name}_ops_median']:g}",
            f"{summary[f'{name}_program_tokens_median']:g}",
            f"{summary[f'{name}_speedup_ceiling']:.2f}x",
        )
    sweep_row = "  ".join(f"m={m}: {v:.1%}" for m, v in summary["sweep_pooled"].items())  # type: ignore[union-attr]
    console = cli_console()
    with writing_stdout():
        console.print(table)
        console.print(f"sub-line pooled coverage by minimum span (tokens): {sweep_row}")


def register(app: typer.Typer) -> None:
    """Add the program-language commands to the ``cad`` app."""
    app.command("oracle", cls=CadCommand, short_help="Print the minimal program for an edit.")(
        cmd_oracle
    )
    app.command("resolve", cls=CadCommand, short_help="Apply a program to a document.")(cmd_resolve)
    app.command("analyze", cls=CadCommand, short_help="Measure how much of a corpus copies cover.")(
        cmd_analyze
    )
