"""``cad edit FILE --instr TEXT``: let a model edit a file, as an edit program (program mode)
or by rewriting the file with drafts from the document (rewrite mode), and apply it.

The command reads its options, hands the computation to :mod:`cad.server.edit_pipeline` —
in a warm server when one answers (:mod:`cad.server.warm`), else in this process — and
delivers the new text: a diff (the default), the file replaced, the text on stdout, or a JSON
result.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from cad.cli_text import CadCommand, cli_console, given_options, plural, writing_stdout
from cad.defaults import DEFAULT_MODEL
from cad.errors import UserError
from cad.files import check_writable, write_atomic
from cad.server import warm
from cad.server.diffs import colored, diff_lines, diff_path
from cad.server.edit_pipeline import (
    Baseline,
    EditFiles,
    EditOptions,
    EditOutcome,
    GrammarFormat,
    Run,
    check_exclusive,
    check_instruction,
    chosen_run,
    decode,
    load,
    model_name,
    prepare_inputs,
    read_files,
)
from cad.server.modes import EditMode
from cad.server.multi_edit import (
    decode_files,
    deliver_multi,
    has_sections,
    read_program,
    refuse_options,
    resolve_files,
    rewrite_several,
)
from cad.server.multi_edit import read_files as read_files_of_edit
from cad.server.syntax_setting import SyntaxChoice

stderr = cli_console(stderr=True)
MAX_INSTRUCTION_BYTES = 1024 * 1024
"""The longest instruction read from stdin or a file."""

INPUT, MODEL, MODE, DECODING, OUTPUT, SPEED = (
    "Input",
    "Model",
    "Mode",
    "Decoding",
    "Output",
    "Performance",
)
"""The panels of ``cad edit --help``."""


@dataclass(frozen=True)
class Delivery:
    """How the result is delivered: the file replaced, the text on stdout, a JSON result, or
    a diff (the default); decode stats to a file; where the edit is decoded."""

    write: bool
    stdout: bool
    diff: bool
    json: bool
    stats_json: Path | None
    server: str | None
    no_server: bool


def cmd_edit(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Argument(
            help="The file to edit (UTF-8 text); several files with a multi-file --program.",
            metavar="FILE",
        ),
    ],
    instr: Annotated[
        str | None,
        typer.Option(
            "--instr", help="What to change; - reads it from stdin.", rich_help_panel=INPUT
        ),
    ] = None,
    instr_file: Annotated[
        Path | None,
        typer.Option(help="Read the instruction from this file.", rich_help_panel=INPUT),
    ] = None,
    context: Annotated[
        list[Path] | None,
        typer.Option(
            "--context",
            help="A file the --program may copy from but not change (repeat for more).",
            metavar="PATH",
            rich_help_panel=INPUT,
        ),
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            envvar="CAD_MODEL",
            help="Model folder or hub id.",
            show_default=f"the adapter's base model, else {DEFAULT_MODEL}",
            rich_help_panel=MODEL,
        ),
    ] = "",
    device: Annotated[
        str,
        typer.Option(envvar="CAD_DEVICE", help="auto, cpu or cuda[:N].", rich_help_panel=MODEL),
    ] = "auto",
    dtype: Annotated[
        str,
        typer.Option(
            envvar="CAD_DTYPE",
            help="auto, float32, float16 or bfloat16.",
            rich_help_panel=MODEL,
        ),
    ] = "auto",
    adapter: Annotated[
        Path | None,
        typer.Option(
            help="LoRA adapter folder from cad train (runs on its base model).",
            rich_help_panel=MODEL,
        ),
    ] = None,
    mode: Annotated[
        EditMode,
        typer.Option(
            help="program, rewrite, or auto: program with --adapter or --program.",
            rich_help_panel=MODE,
        ),
    ] = EditMode.auto,
    program: Annotated[
        Path | None,
        typer.Option(
            help="Follow this program (forced-program mode); - reads it from stdin. A "
            "multi-file program edits several FILEs, applied as given without a model.",
            rich_help_panel=MODE,
        ),
    ] = None,
    subline: Annotated[
        bool,
        typer.Option(
            "--subline", help="Program mode: allow sub-line copies.", rich_help_panel=MODE
        ),
    ] = False,
    lines: Annotated[
        str | None,
        typer.Option(help="Rewrite mode: rewrite only lines I-J.", rich_help_panel=MODE),
    ] = None,
    draft_config: Annotated[
        Path | None,
        typer.Option(
            help="Rewrite mode: draft-graph config from cad calibrate "
            "(default: the shipped one for the model's device).",
            rich_help_panel=MODE,
        ),
    ] = None,
    draft_budget: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Program and rewrite mode: draft tokens verified per forward (0: none).",
            rich_help_panel=MODE,
        ),
    ] = None,
    syntax: Annotated[
        SyntaxChoice,
        typer.Option(
            help="Keep the edited file parsing: auto (by file type), python, json, none.",
            rich_help_panel=MODE,
        ),
    ] = SyntaxChoice.auto,
    schema: Annotated[
        Path | None,
        typer.Option(
            help="With --syntax json/auto: a JSON Schema the file follows.", rich_help_panel=MODE
        ),
    ] = None,
    grammar: Annotated[
        Path | None,
        typer.Option(
            help="Rewrite the file under this grammar (EBNF or JSON Schema).",
            rich_help_panel=MODE,
        ),
    ] = None,
    grammar_format: Annotated[
        GrammarFormat, typer.Option(help="How --grammar is written.", rich_help_panel=MODE)
    ] = GrammarFormat.ebnf,
    ignore_unsupported: Annotated[
        bool,
        typer.Option(
            "--ignore-unsupported",
            help="JSON Schema: leave out keywords the grammar cannot enforce instead of failing.",
            rich_help_panel=MODE,
        ),
    ] = False,
    baseline: Annotated[
        Baseline | None,
        typer.Option(help="Regenerate --target instead: ar or pld.", rich_help_panel=MODE),
    ] = None,
    target: Annotated[
        Path | None, typer.Option(help="Target text for --baseline.", rich_help_panel=MODE)
    ] = None,
    max_new_tokens: Annotated[
        int,
        typer.Option(min=1, help="Budget of model-decided tokens.", rich_help_panel=DECODING),
    ] = 2048,
    temperature: Annotated[
        float, typer.Option(min=0.0, help="0 is greedy.", rich_help_panel=DECODING)
    ] = 0.0,
    top_p: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Nucleus sampling.", rich_help_panel=DECODING),
    ] = 1.0,
    seed: Annotated[
        int,
        typer.Option(
            min=-(2**63),
            max=2**64 - 1,
            help="Seed of the sampling (64-bit).",
            rich_help_panel=DECODING,
        ),
    ] = 0,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Replace FILE (atomically); several files: all or none.",
            rich_help_panel=OUTPUT,
        ),
    ] = False,
    stdout: Annotated[
        bool,
        typer.Option(
            "--stdout",
            help='Print the new text. Several files: per file a line ==> "PATH" N bytes, '
            'then its N bytes (==> "PATH" deleted for a deleted file).',
            rich_help_panel=OUTPUT,
        ),
    ] = False,
    diff: Annotated[
        bool,
        typer.Option("--diff", help="Print a unified diff (default).", rich_help_panel=OUTPUT),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the result as JSON: new text, program, stats, diff (per file).",
            rich_help_panel=OUTPUT,
        ),
    ] = False,
    stats_json: Annotated[
        Path | None,
        typer.Option(
            help="Write decode stats here as JSON (also when the budget runs out).",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    compile: Annotated[
        bool,
        typer.Option(
            "--compile",
            help="Compiled forwards over the static KV cache; the first run of each shape "
            "compiles (cached for later runs).",
            rich_help_panel=SPEED,
        ),
    ] = False,
    no_graphs: Annotated[
        bool,
        typer.Option(
            "--no-graphs",
            help="Run transformers' eager forwards: no CUDA graphs on a GPU, no packed "
            "weights on a CPU.",
            rich_help_panel=SPEED,
        ),
    ] = False,
    server: Annotated[
        str | None,
        typer.Option(
            envvar="CAD_SERVER",
            help="Decode on the warm server at HOST:PORT or socket PATH.",
            show_default="the local one cad serve --background starts, if it runs",
            rich_help_panel=SPEED,
        ),
    ] = None,
    no_server: Annotated[
        bool,
        typer.Option(
            "--no-server",
            help="Decode in this process, never on a warm server.",
            rich_help_panel=SPEED,
        ),
    ] = False,
) -> None:
    """Edit FILE as --instr says: the model writes an edit program the resolver applies
    (program mode), or the complete updated file drafted from the document (rewrite mode).
    Several FILEs (and --context files) take a multi-file --program: files numbered from 1
    in the order given, then the context files; a diff per file."""
    given = given_options(ctx, [*(item.name for item in fields(EditOptions)), "instr_file"])
    given |= {name for name, flag in (("write", write), ("stdout", stdout), ("diff", diff)) if flag}
    if as_json:
        given.add("json")
    program_text = _program_text(program, files, context or [], instr, instr_file)
    if len(files) > 1 or context or (program_text is not None and has_sections(program_text)):
        delivery = Delivery(write, stdout, diff, as_json, stats_json, server, no_server)
        decoding = EditOptions(
            file=files[0],
            instr="",
            model=model,
            device=device,
            dtype=dtype,
            adapter=adapter,
            max_new_tokens=max_new_tokens,
            subline=subline,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            mode=mode,
            draft_budget=draft_budget,
            compile=compile,
            graphs=not no_graphs,
        )
        edit_files(
            files, context or [], program_text, (instr, instr_file), given, delivery, decoding
        )
        return
    (file,) = files
    options = EditOptions(
        file=file,
        instr=read_instruction(instr, instr_file),
        model=model,
        device=device,
        dtype=dtype,
        adapter=adapter,
        program=program,
        baseline=baseline,
        target=target,
        grammar=grammar,
        grammar_format=grammar_format,
        ignore_unsupported=ignore_unsupported,
        max_new_tokens=max_new_tokens,
        subline=subline,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        mode=mode,
        lines=lines,
        draft_config=draft_config,
        draft_budget=draft_budget,
        syntax=syntax,
        schema=schema,
        compile=compile,
        graphs=not no_graphs,
    )
    delivery = Delivery(write, stdout, diff, as_json, stats_json, server, no_server)
    run = chosen_run(options, given)
    if delivery.server is not None and delivery.no_server:
        raise UserError("choose one of --server and --no-server")
    inputs = read_files(options, run, program_text)
    for output in (options.file if delivery.write else None, delivery.stats_json):
        if output is not None:
            check_writable(output)
    outcome, decoded_by = compute(options, run, inputs, delivery)
    deliver(options, run, inputs.document, outcome, delivery, decoded_by)


def _program_text(
    program: Path | None,
    files: list[Path],
    context: list[Path],
    instr: str | None,
    instr_file: Path | None,
) -> str | None:
    """The ``--program`` text when it must be read before the edit's other inputs: from
    stdin (``-``), for several files, or to see whether one file's program has sections. For
    one file, a program file that cannot be read is left to the single-file edit, which
    reports it in its usual order."""
    if program is None:
        return None
    if str(program) == "-" or len(files) > 1 or context:
        if str(program) == "-" and instr is None and instr_file is None and len(files) == 1:
            read_instruction(instr, instr_file)  # the single-file edit's first error
        return read_program(program, stdin_taken=instr == "-")
    try:
        return read_program(program, stdin_taken=False)
    except UserError:
        return None


def edit_files(
    files: list[Path],
    context: list[Path],
    program_text: str | None,
    instruction: tuple[str | None, Path | None],
    given: set[str],
    delivery: Delivery,
    decoding: EditOptions,
) -> None:
    """``cad edit`` of several files (or of one with --context files, or a program with
    sections): the model decodes a multi-file program for the instruction, or a given one
    is applied as it is; delivered per file."""
    instr, instr_file = instruction
    if program_text is None:
        text = read_instruction(instr, instr_file)
        check_instruction(text)
    elif decoding.mode is EditMode.rewrite:
        raise UserError("--mode rewrite writes files without a program; leave out --program")
    elif instr is not None or instr_file is not None:
        read_instruction(instr, instr_file)  # checked, though a given program needs none
    check_exclusive(given)
    refuse_options(given, decoding=program_text is None)
    texts = read_files_of_edit(files, context)
    if delivery.stats_json is not None:
        check_writable(delivery.stats_json)
    if program_text is not None:
        outcome = resolve_files(program_text, texts, editable=len(files))
    else:
        if delivery.server is not None:
            stderr.print("note: edits of several files are decoded in this process")
        options = replace(decoding, instr=text)
        with stderr.status(f"loading {model_name(options)}"):
            loaded = load(options)
        _announce_compiling(loaded)
        if options.mode is EditMode.rewrite:
            with _progress_bar("rewriting", _rewrite_status) as show:
                outcome = rewrite_several(loaded, options, texts, len(files), show)
        else:
            with _progress_bar("decoding", _program_status) as show:
                outcome = decode_files(loaded, options, texts, len(files), show)
    deliver_multi(
        outcome,
        write=delivery.write,
        stdout=delivery.stdout,
        as_json=delivery.json,
        stats_json=delivery.stats_json,
    )


def read_instruction(instr: str | None, instr_file: Path | None) -> str:
    """The instruction: ``--instr TEXT``, ``--instr -`` (stdin) or ``--instr-file F``."""
    from cad.files import read_text

    if instr is not None and instr_file is not None:
        raise UserError("choose one of --instr and --instr-file")
    if instr_file is not None:
        text = read_text(instr_file, max_bytes=MAX_INSTRUCTION_BYTES)
    elif instr == "-":
        data = sys.stdin.buffer.read(MAX_INSTRUCTION_BYTES + 1)
        if len(data) > MAX_INSTRUCTION_BYTES:
            raise UserError("the instruction on stdin is over 1 MB; give a shorter one")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"the instruction on stdin is not valid UTF-8 (byte {exc.start}); give it as "
                "UTF-8 text"
            ) from None
    elif instr is not None:
        text = instr
    else:
        raise UserError(
            "say what to change with --instr TEXT, --instr - or --instr-file F", exit_code=2
        )
    check_instruction(text)
    return text


def compute(
    options: EditOptions, run: Run, files: EditFiles, delivery: Delivery
) -> tuple[EditOutcome, str]:
    """The edit, and what decoded it: a warm server when one answers (``--server``, else
    the local one, unless ``--no-server``), else this process."""
    address = _server_address(delivery)
    if address is not None:
        status = _Status()
        try:
            with _progress_bar(_title(run), _status_line(run)) as show:
                outcome = warm.request_edit(address, options, run, files, status.show, show)
            return outcome, f"warm server {warm.describe(address)}"
        except warm.Unreachable as exc:
            if delivery.server is not None:
                stderr.print(f"note: no warm server answers ({exc}); decoding in this process")
        finally:
            status.close()
    inputs = prepare_inputs(options, run, files)
    from cad.selector import Cancelled

    with stderr.status(f"loading {model_name(options)}"):
        loaded = load(options)
    _announce_compiling(loaded)
    try:
        with _progress_bar(_title(run), _status_line(run)) as show:
            outcome = decode(loaded, options, run, inputs, show, threading.Event())
    except Cancelled as exc:
        raise UserError(str(exc)) from None
    return outcome, "this process"


def _server_address(delivery: Delivery) -> str | tuple[str, int] | None:
    """The warm server to try: ``--server``, else the local socket if it exists."""
    if delivery.no_server:
        return None
    if delivery.server is not None:
        return warm.parse_server_address(delivery.server)
    local = warm.default_socket()
    return str(local) if local.is_socket() else None


class _Status:
    """What a warm server says it is doing, on a transient line of stderr."""

    def __init__(self) -> None:
        self.status: Any = None

    def show(self, line: str) -> None:
        if self.status is None:
            self.status = stderr.status(line)
            self.status.start()
        else:
            self.status.update(line)

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()


def _announce_compiling(loaded: Any) -> None:
    """Say on stderr, before the first forward, that forwards are compiled (or captured as
    CUDA graphs) at their first use, and where the result is kept for the next run."""
    from cad.selector.first_use import first_use_notice

    notice = first_use_notice(loaded)
    if notice:
        stderr.print(f"note: {notice}")


def deliver(
    options: EditOptions,
    run: Run,
    document: str,
    outcome: EditOutcome,
    delivery: Delivery,
    decoded_by: str,
) -> None:
    """Write the stats (also for an unfinished edit), then the new text: to the file, to
    stdout, as JSON or as a diff. An edit that spent its whole budget is never applied."""
    stats = {**outcome.stats, "decoded_by": decoded_by}
    if delivery.stats_json is not None:
        write_atomic(delivery.stats_json, json.dumps(stats, indent=2) + "\n")
    if outcome.truncated:
        written = int(stats.get("generated_tokens", 0))
        if run is Run.rewrite:
            written += int(stats.get("copied_tokens", 0))
        if written < options.max_new_tokens:
            raise UserError(
                f"the edit ran out of the model's context after {plural(written, 'token')}; "
                "nothing was written (edit a smaller part of the file, e.g. with --lines in "
                "rewrite mode, or use a longer-context model)"
            )
        raise UserError(
            f"the model used its whole budget of {plural(options.max_new_tokens, 'token')} "
            "without finishing; nothing was written (raise --max-new-tokens or narrow the "
            "instruction)"
        )
    if delivery.write:
        write_atomic(options.file, outcome.text)
        steps = (
            plural(int(stats.get("ops", 0)), "op")
            if run is Run.program
            else plural(int(stats.get("forwards", 0)), "forward")
        )
        stderr.print(f"wrote {options.file} ({steps}, {float(stats.get('wall_s', 0.0)):.2f}s)")
    elif delivery.stdout:
        with writing_stdout():
            sys.stdout.buffer.write(outcome.text.encode("utf-8"))
    elif delivery.json:
        result = {
            "file": str(options.file),
            "changed": outcome.text != document,
            "text": outcome.text,
            "program": outcome.program,
            "diff": "".join(single_diff(document, outcome.text, options.file)),
            "stats": stats,
        }
        with writing_stdout():
            sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    else:
        lines = single_diff(document, outcome.text, options.file)
        with writing_stdout():
            if sys.stdout.isatty():
                cli_console().print(colored(lines), end="")
            else:
                sys.stdout.write("".join(lines))


def single_diff(before: str, after: str, file: Path) -> list[str]:
    """The diff of one edited file, with ``a/NAME`` and ``b/NAME`` headers."""
    name = diff_path(file)
    return diff_lines(before, after, f"a/{name}", f"b/{name}")


def _title(run: Run) -> str:
    return {Run.program: "decoding", Run.rewrite: "rewriting"}.get(run, "generating")


def _status_line(run: Run) -> Callable[[Any], str]:
    return _program_status if run is Run.program else _rewrite_status


def _program_status(progress: Any) -> str:
    return (
        f"{plural(progress.ops, 'op')}, {plural(progress.lines_copied, 'line')} copied, "
        f"{progress.lines_generated} generated, {plural(progress.tokens_generated, 'token')}"
    )


def _rewrite_status(progress: Any) -> str:
    written = progress.lines_copied + progress.lines_generated
    return (
        f"{plural(progress.ops, 'forward')}, {plural(progress.tokens_generated, 'token')}, "
        f"{plural(written, 'line')} written"
    )


@contextmanager
def _progress_bar(title: str, status: Callable[[Any], str]) -> Iterator[Callable[[Any], None]]:
    """A transient progress line on stderr; yields the callback a decode reports to."""
    with Progress(
        TextColumn(f"[bold]{title}"),
        BarColumn(bar_width=None),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        disable=not stderr.is_terminal,
    ) as bar:
        task = bar.add_task("edit", total=None, status="")
        yield lambda progress: bar.update(task, status=status(progress))


def register(app: typer.Typer) -> None:
    """Add ``cad edit`` to the app."""
    app.command("edit", cls=CadCommand, short_help="Edit a file as an instruction says.")(cmd_edit)
