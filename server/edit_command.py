"""``cad edit FILE --instr TEXT``: let a model edit a file, as an edit program (program mode)
or by rewriting the file with drafts from the document (rewrite mode), and apply it."""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from cad.resolver import Program, parse, resolve, split_lines
from cad.server.files import UserError, read_text, write_atomic
from cad.server.syntax_setting import (
    SyntaxChoice,
    SyntaxPlan,
    choose_language,
    load_schema,
    plan_syntax,
)

stderr = Console(stderr=True)


class GrammarFormat(StrEnum):
    """How a ``--grammar`` file is written."""

    ebnf = "ebnf"
    json_schema = "json-schema"


class Baseline(StrEnum):
    """Whole-file baselines run with the same model and a forced target."""

    ar = "ar"
    pld = "pld"


class EditMode(StrEnum):
    """How the model writes the edit: ``program`` (copy and gen ops over numbered lines),
    ``rewrite`` (the complete updated file, drafted from the document and verified as a
    calibrated draft graph), or ``auto`` (program with ``--adapter`` or ``--program``, a
    trained selector or a given program; rewrite otherwise)."""

    auto = "auto"
    program = "program"
    rewrite = "rewrite"


def resolve_mode(
    mode: EditMode,
    *,
    adapter: Path | None,
    program: Path | None,
    special: str | None,
    rewrite_options: list[str],
) -> EditMode | None:
    """The mode to run (``None`` when ``special``, ``--grammar`` or ``--baseline``, decodes
    on its own), or a ``UserError`` for options that contradict it; ``rewrite_options``
    names the rewrite-only options given."""
    if special is not None:
        if mode is not EditMode.auto or rewrite_options:
            given = ", ".join(rewrite_options) or "--mode"
            raise UserError(f"{given} does not apply to {special}; leave it out")
        return None
    if mode is EditMode.auto:
        mode = EditMode.program if adapter is not None or program is not None else EditMode.rewrite
    if mode is EditMode.rewrite and program is not None:
        raise UserError("--program follows an edit program; use --mode program (or auto)")
    if mode is EditMode.program and rewrite_options:
        raise UserError(f"{', '.join(rewrite_options)} applies to rewrite mode; add --mode rewrite")
    return mode


def parse_lines(lines: str, document: str) -> tuple[int, int]:
    """``I-J`` (or ``I``) as a 1-based inclusive line range inside ``document``."""
    first, _, last = lines.partition("-")
    if not first.isdigit() or not (last or first).isdigit():
        raise UserError(f"--lines {lines!r}: expected I-J, e.g. 3-10")
    start, end = int(first), int(last or first)
    count = len(split_lines(document))
    if not 1 <= start <= end <= count:
        raise UserError(f"--lines {lines}: the file has {count} lines (1-{count})")
    return start, end


def render_diff(before: str, after: str, name: str) -> Text:
    """A colored unified diff of the edit (terminators shown as they are)."""
    text = Text()
    lines = difflib.unified_diff(split_lines(before), split_lines(after), f"a/{name}", f"b/{name}")
    for line in lines:
        shown = line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        if line.startswith(("+++", "---")):
            style = "bold"
        text.append(shown, style=style)
    return text


def _validated_inputs(
    file: Path, instr: str, program: Path | None, baseline: Baseline | None, target: Path | None
) -> tuple[str, Program | None, str | None]:
    document = read_text(file)
    if not instr.strip():
        raise UserError("the instruction is empty; say what to change with --instr")
    forced = None
    if program is not None:
        forced = parse(read_text(program))
        resolve(forced, document)
    target_text = None
    if baseline is not None:
        if target is None:
            raise UserError("--baseline needs --target AFTER_FILE (the text to regenerate)")
        target_text = read_text(target)
    return document, forced, target_text


def cmd_edit(
    file: Annotated[Path, typer.Argument(help="The file to edit (UTF-8 text).")],
    instr: Annotated[str, typer.Option("--instr", help="What to change.")],
    model: Annotated[str, typer.Option(help="Model folder or hub id.")] = "",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda[:N].")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, float16 or bfloat16.")] = "auto",
    adapter: Annotated[
        Path | None, typer.Option(help="LoRA adapter folder from cad train.")
    ] = None,
    program: Annotated[
        Path | None, typer.Option(help="Follow this program (forced-program mode).")
    ] = None,
    baseline: Annotated[
        Baseline | None, typer.Option(help="Regenerate --target instead: ar or pld.")
    ] = None,
    target: Annotated[Path | None, typer.Option(help="Target text for --baseline.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Replace FILE (atomically).")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the new text.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Show a unified diff (default).")] = False,
    stats_json: Annotated[
        Path | None, typer.Option(help="Write decode stats here as JSON.")
    ] = None,
    grammar: Annotated[
        Path | None, typer.Option(help="Rewrite the file under this grammar (EBNF or JSON Schema).")
    ] = None,
    grammar_format: Annotated[
        GrammarFormat, typer.Option(help="How --grammar is written.")
    ] = GrammarFormat.ebnf,
    max_new_tokens: Annotated[
        int, typer.Option(min=1, help="Budget of model-decided tokens.")
    ] = 2048,
    subline: Annotated[bool, typer.Option("--subline", help="Allow sub-line copies.")] = False,
    temperature: Annotated[float, typer.Option(min=0.0, help="0 is greedy.")] = 0.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0)] = 1.0,
    seed: Annotated[int, typer.Option()] = 0,
    mode: Annotated[
        EditMode,
        typer.Option(help="program, rewrite, or auto: program with --adapter/--program."),
    ] = EditMode.auto,
    lines: Annotated[str | None, typer.Option(help="Rewrite mode: rewrite only lines I-J.")] = None,
    draft_config: Annotated[
        Path | None, typer.Option(help="Rewrite mode: draft-graph config from cad calibrate.")
    ] = None,
    draft_budget: Annotated[
        int | None, typer.Option(min=0, help="Rewrite mode: draft tokens verified per forward.")
    ] = None,
    syntax: Annotated[
        SyntaxChoice,
        typer.Option(help="Keep the edited file parsing: auto (by file type), python, json, none."),
    ] = SyntaxChoice.auto,
    schema: Annotated[
        Path | None, typer.Option(help="With --syntax json/auto: a JSON Schema the file follows.")
    ] = None,
) -> None:
    """Edit FILE as --instr says: the model writes an edit program the resolver applies
    (program mode), or the complete updated file drafted from the document (rewrite mode)."""
    if write and stdout:
        raise UserError("choose one of --write and --stdout")
    given = {"--lines": lines, "--draft-config": draft_config, "--draft-budget": draft_budget}
    special = "--grammar" if grammar is not None else "--baseline" if baseline is not None else None
    mode = resolve_mode(
        mode,
        adapter=adapter,
        program=program,
        special=special,
        rewrite_options=[name for name, value in given.items() if value is not None],
    )
    document, forced, target_text = _validated_inputs(file, instr, program, baseline, target)
    line_range = parse_lines(lines, document) if lines is not None else None
    grammar_source = read_text(grammar) if grammar is not None else None
    drafts = _draft_config(draft_config) if mode is EditMode.rewrite else None
    parts = _split_region(document, line_range if mode is EditMode.rewrite else None)
    plan = _syntax_plan(syntax, schema, file, special, parts)

    from cad.selector import (
        DEFAULT_MODEL,
        Cancelled,
        ContextTooLongError,
        Decoder,
        ModelLoadError,
        Sampling,
        generate_constrained,
        load_model,
        prompt_lookup,
        regenerate,
    )

    try:
        with stderr.status(f"loading {model or DEFAULT_MODEL}"):
            loaded = load_model(
                model or DEFAULT_MODEL,
                device=device,
                dtype=dtype,
                adapter=str(adapter) if adapter else None,
            )
        sampling = Sampling(temperature=temperature, top_p=top_p, seed=seed)
        if grammar_source is not None:
            matcher = _compile_grammar(grammar_source, grammar_format, loaded).matcher()
            with stderr.status("generating under the grammar"):
                result = generate_constrained(
                    loaded,
                    document,
                    instr,
                    matcher,
                    max_new_tokens=max_new_tokens,
                    sampling=sampling,
                )
        elif baseline is not None:
            assert target_text is not None
            run = regenerate if baseline is Baseline.ar else prompt_lookup
            with stderr.status(f"regenerating with {baseline.value}"):
                result = run(loaded, document, instr, target_text)
        elif mode is EditMode.rewrite:
            from cad.selector.rewrite import rewrite

            with _progress_bar("rewriting", "forwards", "lines drafted") as show:
                result = rewrite(
                    loaded,
                    document,
                    instr,
                    config=drafts,
                    max_new_tokens=max_new_tokens,
                    sampling=sampling,
                    on_progress=show,
                    lines=line_range,
                    draft_budget=draft_budget,
                    syntax=plan.constraint(loaded.tokenizer, loaded.vocab_size, *parts),
                )
        else:
            decoder = Decoder(
                loaded,
                max_new_tokens=max_new_tokens,
                subline=subline,
                sampling=sampling,
            )
            with _progress_bar("decoding", "ops", "lines copied") as show:
                result = decoder.edit(
                    document,
                    instr,
                    program=forced,
                    on_progress=show,
                    syntax=plan.constraint(loaded.tokenizer, loaded.vocab_size, *parts),
                )
    except (ModelLoadError, ContextTooLongError, Cancelled) as exc:
        raise UserError(str(exc)) from None

    if result.stats.truncated:
        raise UserError(
            f"the model used its whole budget of {max_new_tokens} tokens without finishing; "
            "nothing was written (raise --max-new-tokens or narrow the instruction)"
        )
    if stats_json is not None:
        stats = {**result.stats.to_dict(), "syntax": plan.language or "none"}
        write_atomic(stats_json, json.dumps(stats, indent=2) + "\n")
    if write:
        write_atomic(file, result.text)
        steps = (
            f"{result.stats.forwards} forwards"
            if mode is EditMode.rewrite
            else f"{result.stats.ops} ops"
        )
        stderr.print(f"wrote {file} ({steps}, {result.stats.wall_s:.2f}s)")
    elif stdout:
        sys.stdout.buffer.write(result.text.encode("utf-8"))
        sys.stdout.flush()
    else:
        Console(highlight=False).print(render_diff(document, result.text, file.name), end="")


@contextmanager
def _progress_bar(title: str, steps: str, copied: str) -> Iterator[Callable[[Any], None]]:
    """A transient progress line on stderr; yields the callback a decode reports to."""
    with Progress(
        TextColumn(f"[bold]{title}"),
        BarColumn(bar_width=None),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task("edit", total=None, status="")

        def show(progress: Any) -> None:
            bar.update(
                task,
                status=f"{progress.ops} {steps}, {progress.lines_copied} {copied}, "
                f"{progress.lines_generated} generated, {progress.tokens_generated} tokens",
            )

        yield show


def _split_region(document: str, line_range: tuple[int, int] | None) -> tuple[str, str, str]:
    """``(before, region, after)``: the text the edit may change and what surrounds it."""
    if line_range is None:
        return "", document, ""
    lines = split_lines(document)
    first, last = line_range
    return "".join(lines[: first - 1]), "".join(lines[first - 1 : last]), "".join(lines[last:])


def _syntax_plan(
    choice: SyntaxChoice,
    schema: Path | None,
    file: Path,
    special: str | None,
    parts: tuple[str, str, str],
) -> SyntaxPlan:
    """Which language the edit is held to; checked against the file before a model loads."""
    if special is not None:
        if choice not in (SyntaxChoice.auto, SyntaxChoice.none) or schema is not None:
            raise UserError(f"--syntax and --schema do not apply to {special}; leave them out")
        return SyntaxPlan(None)
    if schema is not None and choice not in (SyntaxChoice.auto, SyntaxChoice.json):
        raise UserError(f"--schema types JSON files; it does not apply to --syntax {choice}")
    language = "json" if schema is not None else choose_language(choice, path=str(file))
    loaded_schema = load_schema(schema) if schema is not None else None
    before, region, after = parts
    return plan_syntax(
        choice,
        language=language,
        schema=loaded_schema,
        before=before,
        region=region,
        after=after,
        warn=lambda line: print(line, file=sys.stderr),
    )


def _draft_config(path: Path | None) -> Any:
    """The draft-graph configuration from ``path`` (``None``: the shipped default); a bad
    file is a one-line error."""
    if path is None:
        return None
    from cad.selector.draft_config import DraftConfigError, load_draft_config

    try:
        return load_draft_config(path)
    except DraftConfigError as exc:
        raise UserError(f"--draft-config {exc}") from None


def _compile_grammar(source: str, grammar_format: GrammarFormat, loaded):
    """Compile ``--grammar`` for the loaded tokenizer; a bad grammar is a one-line error."""
    from cad import grammar as masking

    try:
        return masking.compile(
            source, loaded.tokenizer, format=grammar_format.value, vocab_size=loaded.vocab_size
        )
    except (masking.GrammarError, ValueError) as exc:
        raise UserError(f"grammar: {exc}") from None


def register(app: typer.Typer) -> None:
    """Add ``cad edit`` to the app."""
    app.command("edit")(cmd_edit)
