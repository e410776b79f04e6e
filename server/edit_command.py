"""``cad edit FILE --instr TEXT``: decode an edit program with a model and apply it."""

from __future__ import annotations

import difflib
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from resolver import Program, parse, resolve, split_lines
from server.files import UserError, read_text, write_atomic

stderr = Console(stderr=True)


class GrammarFormat(StrEnum):
    """How a ``--grammar`` file is written."""

    ebnf = "ebnf"
    json_schema = "json-schema"


class Baseline(StrEnum):
    """Whole-file baselines run with the same model and a forced target."""

    ar = "ar"
    pld = "pld"


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
) -> None:
    """Edit FILE as --instr says: the model writes a program, the resolver applies it."""
    if write and stdout:
        raise UserError("choose one of --write and --stdout")
    document, forced, target_text = _validated_inputs(file, instr, program, baseline, target)
    grammar_source = read_text(grammar) if grammar is not None else None

    from selector import (
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
        else:
            decoder = Decoder(
                loaded,
                max_new_tokens=max_new_tokens,
                subline=subline,
                sampling=sampling,
            )
            with Progress(
                TextColumn("[bold]decoding"),
                BarColumn(bar_width=None),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=stderr,
                transient=True,
            ) as bar:
                task = bar.add_task("edit", total=None, status="")

                def show(progress) -> None:
                    bar.update(
                        task,
                        status=f"{progress.ops} ops, {progress.lines_copied} lines copied, "
                        f"{progress.lines_generated} generated, {progress.tokens_generated} tokens",
                    )

                result = decoder.edit(document, instr, program=forced, on_progress=show)
    except (ModelLoadError, ContextTooLongError, Cancelled) as exc:
        raise UserError(str(exc)) from None

    if result.stats.truncated:
        raise UserError(
            f"the model used its whole budget of {max_new_tokens} tokens without finishing; "
            "nothing was written (raise --max-new-tokens or narrow the instruction)"
        )
    if stats_json is not None:
        write_atomic(stats_json, json.dumps(result.stats.to_dict(), indent=2) + "\n")
    if write:
        write_atomic(file, result.text)
        stderr.print(f"wrote {file} ({result.stats.ops} ops, {result.stats.wall_s:.2f}s)")
    elif stdout:
        sys.stdout.buffer.write(result.text.encode("utf-8"))
        sys.stdout.flush()
    else:
        Console(highlight=False).print(render_diff(document, result.text, file.name), end="")


def _compile_grammar(source: str, grammar_format: GrammarFormat, loaded):
    """Compile ``--grammar`` for the loaded tokenizer; a bad grammar is a one-line error."""
    import grammar as masking

    try:
        return masking.compile(
            source, loaded.tokenizer, format=grammar_format.value, vocab_size=loaded.vocab_size
        )
    except (masking.GrammarError, ValueError) as exc:
        raise UserError(f"grammar: {exc}") from None


def register(app: typer.Typer) -> None:
    """Add ``cad edit`` to the app."""
    app.command("edit")(cmd_edit)
