"""``cad oracle``, ``cad resolve`` and ``cad analyze``: the program language from a shell.

Each takes single-file and multi-file programs: ``cad oracle`` of two folders writes the
multi-file program between them, ``cad resolve`` takes a program over several files (or a
folder's files), and ``cad analyze`` measures cross-file copies on multi-file corpora."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cad.cli_text import CadCommand, cli_console, plural, writing_stdout
from cad.errors import UserError
from cad.files import (
    MAX_CORPUS_BYTES,
    MAX_TEXT_BYTES,
    read_text,
    write_atomic,
    write_files_atomic,
)
from cad.resolver import (
    MultiProgram,
    analyze_edit,
    analyze_multi_edit,
    format_multi,
    format_program,
    oracle,
    oracle_multi,
    parse_multi,
    resolve_multi,
)
from cad.resolver.coverage import DEFAULT_SWEEP, summarize
from cad.resolver.multi_coverage import SCHEMES, summarize_multi

MAX_FOLDER_FILES = 256
"""The most files ``cad oracle`` and ``cad resolve`` read from a folder."""


def read_folder(folder: Path) -> dict[str, str]:
    """The text of every file under ``folder`` by relative POSIX path, sorted: what a
    folder's files are numbered by. Hidden files and folders (names starting with ``.``)
    are left out; a symbolic link, more than ``MAX_FOLDER_FILES`` files or a file
    ``read_text`` refuses is a one-line error."""
    found: list[Path] = []
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in names:
            if name.startswith("."):
                continue
            path = Path(root) / name
            if path.is_symlink():
                raise UserError(f"{path}: a symbolic link; give a folder of plain files")
            found.append(path)
            if len(found) > MAX_FOLDER_FILES:
                raise UserError(f"{folder}: more than {MAX_FOLDER_FILES} files")
    return {
        path.relative_to(folder).as_posix(): read_text(path)
        for path in sorted(found, key=lambda p: p.relative_to(folder).as_posix())
    }


def cmd_oracle(
    before: Annotated[
        Path, typer.Argument(help="The document before the edit (or a folder of files).")
    ],
    after: Annotated[
        Path, typer.Argument(help="The document after the edit (or a folder of files).")
    ],
    subline: Annotated[bool, typer.Option("--subline", help="Allow sub-line copies.")] = False,
    min_copy: Annotated[
        int, typer.Option("--min-copy", min=1, help="Shortest copy, in lines or characters.")
    ] = 1,
) -> None:
    """Print the minimal program that turns BEFORE into AFTER. Given two folders, the
    multi-file program: files numbered in sorted path order, copies from any of them."""
    granularity = "subline" if subline else "line"
    if before.is_dir() or after.is_dir():
        if not (before.is_dir() and after.is_dir()):
            raise UserError("BEFORE and AFTER must both be files or both be folders")
        old, new = read_folder(before), read_folder(after)
        if not old and not new:
            raise UserError(f"{before}, {after}: no files in either folder")
        text = format_multi(oracle_multi(old, new, granularity=granularity, min_copy=min_copy))
    else:
        program = oracle(
            read_text(before), read_text(after), granularity=granularity, min_copy=min_copy
        )
        text = format_program(program)
    with writing_stdout():
        sys.stdout.write(text + "\n")


def _workspace(documents: list[Path]) -> tuple[dict[str, str], Path | None]:
    """The files a program addresses, by path: one folder's (relative paths, and the
    folder new files go in) or the files given (paths as given; new files relative to the
    current folder)."""
    if len(documents) == 1 and documents[0].is_dir():
        return read_folder(documents[0]), documents[0]
    for document in documents:
        if document.is_dir():
            raise UserError(f"{document}: a folder; give one folder, or files")
    files = {str(document): read_text(document) for document in documents}
    if len(files) != len(documents):
        raise UserError("a file is given twice")
    return files, None


def _write_changes(changes: dict[str, str | None], folder: Path | None) -> None:
    """Write a program's files all or none (one file as ``write_atomic`` writes it), and
    say on stderr what was written."""
    on_disk = {(folder / path if folder else Path(path)): text for path, text in changes.items()}
    texts = list(on_disk.values())
    if len(texts) == 1 and texts[0] is not None:
        write_atomic(next(iter(on_disk)), texts[0])
    else:
        write_files_atomic(on_disk)
    deleted = sum(text is None for text in changes.values())
    print(f"wrote {plural(len(changes) - deleted, 'file')}, deleted {deleted}", file=sys.stderr)


def cmd_resolve(
    program: Annotated[Path, typer.Argument(help="A program file.")],
    documents: Annotated[
        list[Path],
        typer.Argument(
            help="The documents the program addresses: file 1, 2, ... or one folder.",
            metavar="DOCUMENT...",
        ),
    ],
    write: Annotated[
        bool, typer.Option("--write", help="Write the files the program writes, all or none.")
    ] = False,
) -> None:
    """Resolve PROGRAM against the DOCUMENTs (file 1 first; a folder's files in sorted path
    order). A single-file program's result goes to stdout byte for byte; a program with
    sections prints one JSON object, each path it writes with its new text (null: deleted).
    --write writes the files instead (new ones relative to the folder, or to the current
    folder), all or none."""
    parsed: MultiProgram = parse_multi(read_text(program))
    files, folder = _workspace(documents)
    changes = resolve_multi(parsed, files)
    if write:
        _write_changes(changes, folder)
        return
    with writing_stdout():
        if parsed.is_bare:
            sys.stdout.buffer.write(next(iter(changes.values())).encode("utf-8"))  # type: ignore[union-attr]
        else:
            sys.stdout.write(json.dumps(changes) + "\n")


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


@dataclass(frozen=True)
class FilesRow:
    """A multi-file edit of a corpus: the files before and after, by path."""

    before: dict[str, str]
    after: dict[str, str]


def _check_size(path: Path, number: int, key: str, text: str) -> None:
    if len(text) > MAX_TEXT_BYTES:
        raise UserError(
            f"{path}:{number}: '{key}' has {len(text):,} characters, over the limit of "
            f"{MAX_TEXT_BYTES:,} for one text (the limit of a file); leave the edit out"
        )


def _files_row(path: Path, number: int, row: dict) -> FilesRow:
    """A multi-file row's files (``files`` as ``cad.training.datasets`` reads it)."""
    from cad.training.datasets import MultiEditExample, parse_file_changes

    changes = parse_file_changes(row["files"], f"{path}:{number}")
    for change in changes:
        for key, text in (("before", change.before), ("after", change.after)):
            if text is not None:
                _check_size(path, number, f"{change.path}: {key}", text)
    example = MultiEditExample("", "", changes)
    return FilesRow(example.before_files, example.after_files)


def read_edit_rows(path: Path) -> list[tuple[str, str] | FilesRow]:
    """(before, after) pairs, and the ``FilesRow`` of multi-file rows (``files``), from a
    JSONL file, or from a built-in edit set named as ``cad train`` names it
    (``heval-python``, ``heval-js``); a bad row is a one-line error naming it."""
    from cad.training.datasets import BUILTIN_DATA, load_edits

    if str(path) in BUILTIN_DATA and not path.exists():
        return [(edit.before, edit.after) for edit in load_edits(str(path))]
    rows: list[tuple[str, str] | FilesRow] = []
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
        if isinstance(row, dict) and "files" in row and "before" not in row:
            rows.append(_files_row(path, number, row))
            continue
        if not isinstance(row, dict) or not all(
            isinstance(row.get(key), str) for key in ("before", "after")
        ):
            raise UserError(
                f"{path}:{number}: expected an object with string 'before' and 'after' (or 'files')"
            )
        for key in ("before", "after"):
            _check_size(path, number, key, row[key])
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
    """Copy coverage of a corpus: line vs sub-line oracles, min-span sweep, speedup ceiling.
    A corpus with multi-file edits ('files' rows) is measured per file and across files."""
    pieces, count = load_tokenizer_pieces(tokenizer)
    rows = read_edit_rows(corpus)
    if any(isinstance(row, FilesRow) for row in rows):
        _analyze_multi(corpus, rows, pieces, count, min_copy, as_json)
        return
    sweep = tuple(sorted({*DEFAULT_SWEEP, min_copy}))
    results = [
        analyze_edit(before, after, pieces, count, min_copy=min_copy, sweep=sweep)
        for before, after in rows  # type: ignore[misc]
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


def _analyze_multi(
    corpus: Path,
    rows: list[tuple[str, str] | FilesRow],
    pieces: Callable[[str], Sequence[tuple[int, int]]],
    count: Callable[[str], int],
    min_copy: int,
    as_json: bool,
) -> None:
    """``cad analyze`` of a corpus with multi-file edits (a single-file row is the edit of
    one file): per-file and multi-file programs, line and sub-line."""
    results = []
    for row in rows:
        if isinstance(row, FilesRow):
            before, after = row.before, row.after
        else:
            before, after = {"document": row[0]}, {"document": row[1]}
        results.append(analyze_multi_edit(before, after, pieces, count, min_copy=min_copy))
    summary = summarize_multi(results)
    if as_json:
        with writing_stdout():
            print(json.dumps(summary))
        return
    title = (
        f"copy coverage of {corpus.name} ({plural(len(results), 'edit')}, "
        f"{plural(int(summary['files']), 'file')} written)"  # type: ignore[call-overload]
    )
    table = Table(title=title)
    for column in ("program", "pooled", "across files", "ops", "program tokens"):
        table.add_column(column)
    schemes = summary["schemes"]
    assert isinstance(schemes, dict)
    for scheme in SCHEMES:
        cost = schemes[scheme]
        table.add_row(
            scheme.replace("_", " "),
            f"{cost['pooled']:.1%}",
            f"{cost['cross_pooled']:.1%}",
            f"{cost['ops']:,}",
            f"{cost['program_tokens']:,}",
        )
    gain = summary["cross_file_gain"]
    assert isinstance(gain, dict)
    console = cli_console()
    with writing_stdout():
        console.print(table)
        console.print(
            f"cross-file copies reach {gain['line']:.1%} (line) / {gain['subline']:.1%} "
            "(sub-line) more of the new text than per-file copies; "
            f"{summary['edits_copying_across_files']} of {len(results)} edits copy across files"
        )


def register(app: typer.Typer) -> None:
    """Add the program-language commands to the ``cad`` app."""
    app.command("oracle", cls=CadCommand, short_help="Print the minimal program for an edit.")(
        cmd_oracle
    )
    app.command("resolve", cls=CadCommand, short_help="Apply a program to a document.")(cmd_resolve)
    app.command("analyze", cls=CadCommand, short_help="Measure how much of a corpus copies cover.")(
        cmd_analyze
    )
