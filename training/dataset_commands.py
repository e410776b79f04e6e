"""``cad data``: build edit datasets (JSONL) from source files or from a git history."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from cad.cli_text import CadCommand, plural
from cad.errors import UserError
from cad.training.datasets import EditExample, MultiEditExample, write_jsonl

data_app = typer.Typer(
    help="Build edit datasets: JSONL files of {id, instruction, before, after}.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@data_app.command("synth", cls=CadCommand, short_help="Synthetic edits of real code.")
def cmd_synth(
    src: Annotated[
        list[Path] | None,
        typer.Argument(help="Python / JavaScript files or folders (searched recursively)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="The JSONL file to write (required, except with --list-families)."),
    ] = None,
    per_file: Annotated[int, typer.Option(min=1, help="Edits drawn from each file.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the random choices.")] = 0,
    family: Annotated[
        list[str] | None,
        typer.Option(help="Only this edit family (repeatable); see --list-families."),
    ] = None,
    max_lines: Annotated[
        int,
        typer.Option(min=1, help="Longer files give one example per top-level definition."),
    ] = 200,
    list_families: Annotated[
        bool, typer.Option("--list-families", help="List the edit families and exit.")
    ] = False,
) -> None:
    """Synthetic edits of real code (renames, parameters, docstrings, constants, deleted
    statements, try blocks) with templated instructions, for warm-up training."""
    from cad.training.synthetic import FAMILIES, generate

    if list_families:
        width = max(len(name) for name in FAMILIES)
        for item in FAMILIES.values():
            print(f"{item.name:<{width}}  {item.summary}  e.g. {item.example}")
        return
    if not src:
        raise UserError("no source files or folders given")
    if out is None:
        raise UserError("--out FILE.jsonl is required")
    edits = generate(src, per_file=per_file, seed=seed, families=family, max_lines=max_lines)
    if not edits:
        raise UserError("no edits could be made from the given sources")
    _write(out, [edit.example for edit in edits])
    counts = Counter(edit.family for edit in edits)
    parts = ", ".join(f"{name} {counts[name]}" for name in FAMILIES if counts[name])
    print(f"wrote {plural(len(edits), 'edit')} to {out} ({parts})", file=sys.stderr)


@data_app.command("git", cls=CadCommand, short_help="Edits from the commits of a git history.")
def cmd_git(
    repo: Annotated[Path, typer.Argument(help="A git repository (work tree or bare).")],
    out: Annotated[Path, typer.Option(help="The JSONL file to write.")],
    max_commits: Annotated[
        int | None, typer.Option(min=1, help="Read at most N commits, newest first.")
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(help="Keep only paths matching this glob or extension (repeatable)."),
    ] = None,
    rev: Annotated[str, typer.Option(help="The revision whose history is read.")] = "HEAD",
    max_bytes: Annotated[
        int, typer.Option(min=1, help="Skip files larger than this before or after.")
    ] = 100_000,
    max_files: Annotated[
        int,
        typer.Option(
            min=1, help="Also keep commits that change 2 to N files, as multi-file edits."
        ),
    ] = 1,
) -> None:
    """Edits from single-file commits: the commit subject is the instruction, the file at
    the parent and at the commit are before and after. With --max-files N above 1, commits
    that change up to N text files become multi-file edits."""
    from cad.training.git_history import history_edits

    edits = history_edits(
        repo,
        rev=rev,
        max_commits=max_commits,
        include=include or (),
        max_bytes=max_bytes,
        max_files=max_files,
    )
    if not edits:
        what = "modifies exactly one" if max_files == 1 else f"changes 1 to {max_files}"
        raise UserError(f"{repo}: no commit {what} matching text file{'s' * (max_files > 1)}")
    _write(out, edits)
    multi = [edit for edit in edits if isinstance(edit, MultiEditExample)]
    files = {edit.id.split(":", 1)[1] for edit in edits if isinstance(edit, EditExample)}
    files.update(change.path for edit in multi for change in edit.files)
    kinds = f" ({len(multi)} multi-file)" if multi else ""
    print(
        f"wrote {plural(len(edits), 'edit')}{kinds} of {plural(len(files), 'file')} to {out}",
        file=sys.stderr,
    )


def _write(out: Path, examples: Sequence[EditExample | MultiEditExample]) -> None:
    try:
        write_jsonl(out, examples)
    except OSError as exc:
        raise UserError(f"{out}: cannot write ({exc.strerror or exc})") from None


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group (``synth``, ``git``) to the ``cad`` app."""
    app.add_typer(data_app, name="data", short_help="Build edit datasets (synthetic, git).")
