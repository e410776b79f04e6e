"""``cad edit FILE --instr TEXT``: let a model edit a file, as an edit program (program mode)
or by rewriting the file with drafts from the document (rewrite mode), and apply it.

The command is a pipeline: check the options against the run they select (one table says
which options apply to which run), read the inputs, load the model, run one function per
run (program, rewrite, grammar, baseline), then write the stats and deliver the new text.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from cad.cli_text import CadCommand, given_options, plural, writing_stdout
from cad.defaults import DEFAULT_MODEL
from cad.errors import UserError
from cad.files import check_writable, read_text, write_atomic
from cad.resolver import Program, parse, resolve, split_lines
from cad.server.modes import EditMode
from cad.server.syntax_setting import (
    SyntaxChoice,
    SyntaxPlan,
    choose_language,
    load_schema,
    plan_syntax,
)

if TYPE_CHECKING:
    from cad.grammar.cfg.grammar_ir import Grammar

stderr = Console(stderr=True, highlight=False)


class GrammarFormat(StrEnum):
    """How a ``--grammar`` file is written."""

    ebnf = "ebnf"
    json_schema = "json-schema"


class Baseline(StrEnum):
    """Whole-file baselines run with the same model and a forced target."""

    ar = "ar"
    pld = "pld"


class Run(StrEnum):
    """What produces the new text: the model in program or rewrite mode, generation under
    ``--grammar``, or a ``--baseline`` regenerating ``--target``."""

    program = "program"
    rewrite = "rewrite"
    grammar = "grammar"
    baseline = "baseline"


DECODING = frozenset({Run.program, Run.rewrite, Run.grammar})
APPLIES_TO: dict[str, frozenset[Run]] = {
    "program": frozenset({Run.program}),
    "subline": frozenset({Run.program}),
    "mode": frozenset({Run.program, Run.rewrite}),
    "lines": frozenset({Run.rewrite}),
    "draft_config": frozenset({Run.rewrite}),
    "draft_budget": frozenset({Run.rewrite}),
    "syntax": frozenset({Run.program, Run.rewrite}),
    "schema": frozenset({Run.program, Run.rewrite}),
    "grammar_format": frozenset({Run.grammar}),
    "ignore_unsupported": frozenset({Run.grammar}),
    "target": frozenset({Run.baseline}),
    "max_new_tokens": DECODING,
    "temperature": DECODING,
    "top_p": DECODING,
    "seed": DECODING,
}
"""The runs each option applies to; an option not listed applies to every run. An option
given on the command line for another run is refused."""

EXCLUSIVE = (("write", "stdout", "diff"), ("grammar", "baseline"))
"""Groups of options of which at most one may be given."""


@dataclass(frozen=True)
class EditOptions:
    """Every option of ``cad edit``, as given (see ``cad edit --help``)."""

    file: Path
    instr: str
    model: str
    device: str
    dtype: str
    adapter: Path | None
    program: Path | None
    baseline: Baseline | None
    target: Path | None
    write: bool
    stdout: bool
    diff: bool
    stats_json: Path | None
    grammar: Path | None
    grammar_format: GrammarFormat
    ignore_unsupported: bool
    max_new_tokens: int
    subline: bool
    temperature: float
    top_p: float
    seed: int
    mode: EditMode
    lines: str | None
    draft_config: Path | None
    draft_budget: int | None
    syntax: SyntaxChoice
    schema: Path | None
    compile: bool


@dataclass(frozen=True)
class EditInputs:
    """What the run reads besides the model: the document, a given program (validated
    against the document), the baseline's target text, the grammar (through the front end,
    which needs no tokenizer), the line range and the draft configuration."""

    document: str
    forced: Program | None = None
    target: str | None = None
    grammar: Grammar | None = None
    lines: tuple[int, int] | None = None
    drafts: Any = None
    parts: tuple[str, str, str] = ("", "", "")
    plan: SyntaxPlan = field(default_factory=lambda: SyntaxPlan(None))

    def syntax(self, loaded: Any) -> Any:
        """The syntax constraint of the edit for the loaded tokenizer (None: unconstrained)."""
        return self.plan.constraint(loaded.tokenizer, loaded.vocab_size, *self.parts)


def option_name(field_name: str) -> str:
    """``draft_budget`` -> ``--draft-budget``."""
    return "--" + field_name.replace("_", "-")


def chosen_run(options: EditOptions, given: set[str]) -> Run:
    """The run the options select, after refusing options that exclude each other or do
    not apply to it (``given``: the options given on the command line)."""
    for group in EXCLUSIVE:
        chosen = [name for name in group if name in given]
        if len(chosen) > 1:
            names = [option_name(name) for name in group]
            raise UserError(f"choose one of {', '.join(names[:-1])} and {names[-1]}")
    if options.grammar is not None:
        run = Run.grammar
    elif options.baseline is not None:
        run = Run.baseline
    else:
        program_given = options.adapter is not None or options.program is not None
        run = Run(options.mode.resolved(program_given=program_given).value)
    for name in sorted(given, key=[item.name for item in fields(EditOptions)].index):
        runs = APPLIES_TO.get(name)
        if runs is not None and run not in runs:
            raise UserError(_refusal(option_name(name), run, runs))
    return run


def _refusal(option: str, run: Run, runs: frozenset[Run]) -> str:
    """Why ``option`` cannot be used with ``run``, and what to do."""
    if run in (Run.grammar, Run.baseline):
        return f"{option} does not apply to --{run.value}; leave it out"
    if runs == {Run.program}:
        return f"{option} applies to program mode; use --mode program (or auto)"
    if runs == {Run.rewrite}:
        return f"{option} applies to rewrite mode; add --mode rewrite"
    needed = " or ".join(f"--{item.value}" for item in sorted(runs - {Run.program, Run.rewrite}))
    return f"{option} applies to {needed}; add it or leave {option} out"


_LINE_RANGE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")
"""``I`` or ``I-J`` in ASCII digits; no file has 10**18 lines, so longer numbers are refused
before they are converted."""


def parse_lines(lines: str, document: str) -> tuple[int, int]:
    """``I-J`` (or ``I``) as a 1-based inclusive line range inside ``document``."""
    match = _LINE_RANGE.fullmatch(lines)
    if match is None:
        shown = lines if len(lines) <= 40 else lines[:40] + "..."
        raise UserError(f"--lines {shown!r}: expected I-J in digits, e.g. 3-10")
    start = int(match.group(1))
    end = int(match.group(2) or start)
    count = len(split_lines(document))
    if start < 1:
        raise UserError(f"--lines {lines}: lines count from 1")
    if end < start:
        raise UserError(f"--lines {lines}: the range is reversed; write {end}-{start}")
    if end > count:
        raise UserError(f"--lines {lines}: the file has {plural(count, 'line')} (1-{count})")
    return start, end


def check_instruction(instr: str) -> None:
    """Refuse an empty instruction, and one that is not text: bytes that are not UTF-8 reach
    Python as lone surrogates (``\\udcff`` for 0xFF), which no tokenizer can encode."""
    if not instr.strip():
        raise UserError("the instruction is empty; say what to change with --instr")
    try:
        instr.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"--instr is not valid UTF-8 (character {exc.start + 1} is an undecodable byte or a "
            "lone surrogate); give the instruction as UTF-8 text"
        ) from None


def read_inputs(options: EditOptions, run: Run) -> EditInputs:
    """Read and check everything the run needs before a model is loaded, so bad input
    fails in a second, not after the model loaded."""
    document = read_text(options.file)
    check_instruction(options.instr)
    forced = None
    if options.program is not None:
        forced = parse(read_text(options.program))
        resolve(forced, document)
    target = None
    if run is Run.baseline:
        if options.target is None:
            raise UserError("--baseline needs --target AFTER_FILE (the text to regenerate)")
        target = read_text(options.target)
    if options.ignore_unsupported and options.grammar_format is not GrammarFormat.json_schema:
        raise UserError("--ignore-unsupported applies to --grammar-format json-schema")
    lines = parse_lines(options.lines, document) if options.lines is not None else None
    parts = _split_region(document, lines if run is Run.rewrite else None)
    return EditInputs(
        document=document,
        forced=forced,
        target=target,
        grammar=_grammar_front_end(options) if options.grammar is not None else None,
        lines=lines,
        drafts=_draft_config(options.draft_config),
        parts=parts,
        plan=_syntax_plan(options, run, parts),
    )


def run_program(loaded: Any, options: EditOptions, inputs: EditInputs) -> Any:
    """Program mode: the model writes an edit program (or follows ``--program``)."""
    from cad.selector import Decoder

    decoder = Decoder(
        loaded,
        max_new_tokens=options.max_new_tokens,
        subline=options.subline,
        sampling=_sampling(options),
    )
    with _progress_bar("decoding", _program_status) as show:
        return decoder.edit(
            inputs.document,
            options.instr,
            program=inputs.forced,
            on_progress=show,
            syntax=inputs.syntax(loaded),
        )


def run_rewrite(loaded: Any, options: EditOptions, inputs: EditInputs) -> Any:
    """Rewrite mode: the model rewrites the file (or ``--lines``), drafted from the text."""
    from cad.selector.rewrite import rewrite

    with _progress_bar("rewriting", _rewrite_status) as show:
        return rewrite(
            loaded,
            inputs.document,
            options.instr,
            config=inputs.drafts,
            max_new_tokens=options.max_new_tokens,
            sampling=_sampling(options),
            on_progress=show,
            lines=inputs.lines,
            draft_budget=options.draft_budget,
            syntax=inputs.syntax(loaded),
        )


def run_grammar(loaded: Any, options: EditOptions, inputs: EditInputs) -> Any:
    """``--grammar``: the model rewrites the file under a grammar (EBNF or JSON Schema)."""
    from cad.selector import generate_constrained

    assert inputs.grammar is not None
    matcher = _bind_grammar(inputs.grammar, loaded).matcher()
    with stderr.status("generating under the grammar"):
        return generate_constrained(
            loaded,
            inputs.document,
            options.instr,
            matcher,
            max_new_tokens=options.max_new_tokens,
            sampling=_sampling(options),
        )


def run_baseline(loaded: Any, options: EditOptions, inputs: EditInputs) -> Any:
    """``--baseline``: regenerate ``--target`` as a whole-file baseline (AR or prompt lookup)."""
    from cad.selector import prompt_lookup, regenerate

    assert inputs.target is not None and options.baseline is not None
    baseline = regenerate if options.baseline is Baseline.ar else prompt_lookup
    with stderr.status(f"regenerating with {options.baseline.value}"):
        return baseline(loaded, inputs.document, options.instr, inputs.target)


RUNS: dict[Run, Callable[[Any, EditOptions, EditInputs], Any]] = {
    Run.program: run_program,
    Run.rewrite: run_rewrite,
    Run.grammar: run_grammar,
    Run.baseline: run_baseline,
}


def load(options: EditOptions) -> Any:
    """The model: ``--model``, else the adapter's base model, else the default model."""
    from cad.selector import load_model
    from cad.selector.adapters import AdapterBaseMismatch, choose_model

    adapter = str(options.adapter) if options.adapter is not None else None
    try:
        name = choose_model(options.model, adapter)
    except AdapterBaseMismatch as exc:
        raise UserError(f"{exc}; leave out --model to run it on {exc.base}") from None
    with stderr.status(f"loading {name}"):
        return load_model(
            name,
            device=options.device,
            dtype=options.dtype,
            adapter=adapter,
            compile=options.compile,
        )


def deliver(options: EditOptions, run: Run, inputs: EditInputs, result: Any) -> None:
    """Write the stats (also for an unfinished edit), then the new text: to the file, to
    stdout, or as a diff. An edit that spent its whole budget is never applied."""
    document = inputs.document
    if options.stats_json is not None:
        stats = {**result.stats.to_dict(), "syntax": inputs.plan.language or "none"}
        write_atomic(options.stats_json, json.dumps(stats, indent=2) + "\n")
    if result.stats.truncated:
        raise UserError(
            f"the model used its whole budget of {plural(options.max_new_tokens, 'token')} "
            "without finishing; nothing was written (raise --max-new-tokens or narrow the "
            "instruction)"
        )
    if options.write:
        write_atomic(options.file, result.text)
        steps = (
            plural(result.stats.forwards, "forward")
            if run is not Run.program
            else plural(result.stats.ops, "op")
        )
        stderr.print(f"wrote {options.file} ({steps}, {result.stats.wall_s:.2f}s)")
    elif options.stdout:
        with writing_stdout():
            sys.stdout.buffer.write(result.text.encode("utf-8"))
    else:
        with writing_stdout():
            Console(highlight=False).print(
                render_diff(document, result.text, options.file.name), end=""
            )


def cmd_edit(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="The file to edit (UTF-8 text).", metavar="FILE")],
    instr: Annotated[str, typer.Option("--instr", help="What to change.")],
    model: Annotated[
        str,
        typer.Option(
            help="Model folder or hub id.",
            show_default=f"the adapter's base model, else {DEFAULT_MODEL}",
        ),
    ] = "",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda[:N].")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, float16 or bfloat16.")] = "auto",
    adapter: Annotated[
        Path | None,
        typer.Option(help="LoRA adapter folder from cad train (runs on its base model)."),
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
        Path | None,
        typer.Option(help="Write decode stats here as JSON (also when the budget runs out)."),
    ] = None,
    grammar: Annotated[
        Path | None, typer.Option(help="Rewrite the file under this grammar (EBNF or JSON Schema).")
    ] = None,
    grammar_format: Annotated[
        GrammarFormat, typer.Option(help="How --grammar is written.")
    ] = GrammarFormat.ebnf,
    ignore_unsupported: Annotated[
        bool,
        typer.Option(
            "--ignore-unsupported",
            help="JSON Schema: leave out keywords the grammar cannot enforce instead of failing.",
        ),
    ] = False,
    max_new_tokens: Annotated[
        int, typer.Option(min=1, help="Budget of model-decided tokens.")
    ] = 2048,
    subline: Annotated[
        bool, typer.Option("--subline", help="Program mode: allow sub-line copies.")
    ] = False,
    temperature: Annotated[float, typer.Option(min=0.0, help="0 is greedy.")] = 0.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus sampling.")] = 1.0,
    seed: Annotated[
        int,
        typer.Option(min=-(2**63), max=2**64 - 1, help="Seed of the sampling (64-bit)."),
    ] = 0,
    mode: Annotated[
        EditMode,
        typer.Option(help="program, rewrite, or auto: program with --adapter or --program."),
    ] = EditMode.auto,
    lines: Annotated[str | None, typer.Option(help="Rewrite mode: rewrite only lines I-J.")] = None,
    draft_config: Annotated[
        Path | None,
        typer.Option(
            help="Rewrite mode: draft-graph config from cad calibrate "
            "(default: the shipped one for the model's device)."
        ),
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
    compile: Annotated[
        bool,
        typer.Option(
            "--compile",
            help="Static KV cache and compiled forwards (CUDA graphs on a GPU); the first "
            "edit pays for compiling.",
        ),
    ] = False,
) -> None:
    """Edit FILE as --instr says: the model writes an edit program the resolver applies
    (program mode), or the complete updated file drafted from the document (rewrite mode)."""
    options = EditOptions(**{name: value for name, value in locals().items() if name != "ctx"})
    given = given_options(ctx, [item.name for item in fields(EditOptions)])
    run = chosen_run(options, given)
    inputs = read_inputs(options, run)
    for output in (options.file if options.write else None, options.stats_json):
        if output is not None:
            check_writable(output)
    from cad.selector import Cancelled, ContextTooLongError, ModelLoadError

    try:
        loaded = load(options)
        _check_draft_budget(options.draft_budget, loaded.context_length)
        result = RUNS[run](loaded, options, inputs)
    except (ModelLoadError, ContextTooLongError, Cancelled) as exc:
        raise UserError(str(exc)) from None
    deliver(options, run, inputs, result)


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


def _sampling(options: EditOptions) -> Any:
    from cad.selector import Sampling

    return Sampling(temperature=options.temperature, top_p=options.top_p, seed=options.seed)


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


def _check_draft_budget(budget: int | None, context_length: int) -> None:
    """Refuse a ``--draft-budget`` that could not fit the model's context even alone (rather
    than blame the document's length)."""
    if budget is not None and budget >= context_length:
        raise UserError(
            f"--draft-budget {budget:,} is not below the model's context of "
            f"{context_length:,} tokens; give a smaller budget"
        )


def _draft_config(path: Path | None) -> Any:
    """The draft-graph configuration from ``path`` (``None``: the shipped default); a bad
    file is a one-line error. The file is read as every input file is (``read_text``)."""
    if path is None:
        return None
    from cad.selector.draft_config import DraftConfig, DraftConfigError

    text = read_text(path)  # a regular file of bounded size: never a device or a pipe
    try:
        return DraftConfig.from_json(text)
    except DraftConfigError as exc:
        raise UserError(f"--draft-config {path}: {exc}") from None
    except (RecursionError, ValueError):
        raise UserError(
            f"--draft-config {path}: not a draft configuration (JSON nested too deeply or "
            "numbers too long); write it as cad calibrate does"
        ) from None


def _grammar_front_end(options: EditOptions) -> Grammar:
    """``--grammar`` read and taken through the grammar front end, before any model loads:
    a bad grammar (or one past the front end's limits) is a one-line error at once, and JSON
    Schema keywords left out under ``--ignore-unsupported`` are named on stderr."""
    from cad.grammar.cfg import front_end

    assert options.grammar is not None
    source = read_text(options.grammar)
    try:
        grammar, details = front_end(
            source,
            format=options.grammar_format.value,
            ignore_unsupported=options.ignore_unsupported,
        )
    except ValueError as exc:  # GrammarError, or a schema the validator cannot read
        raise UserError(f"grammar: {exc}") from None
    ignored = details.get("ignored_keywords")
    if ignored:
        stderr.print(f"warning: grammar: not enforced: {', '.join(ignored)}")
    return grammar


def _bind_grammar(grammar: Grammar, loaded: Any) -> Any:
    """The front end's grammar compiled for the loaded tokenizer's vocabulary."""
    from cad.grammar.cfg import GrammarError, compile_grammar
    from cad.grammar.vocab import Vocabulary

    vocabulary = Vocabulary.for_tokenizer(loaded.tokenizer, loaded.vocab_size)
    try:
        return compile_grammar(grammar, vocabulary)
    except GrammarError as exc:
        raise UserError(f"grammar: {exc}") from None


def _split_region(document: str, line_range: tuple[int, int] | None) -> tuple[str, str, str]:
    """``(before, region, after)``: the text the edit may change and what surrounds it."""
    if line_range is None:
        return "", document, ""
    lines = split_lines(document)
    first, last = line_range
    return "".join(lines[: first - 1]), "".join(lines[first - 1 : last]), "".join(lines[last:])


def _syntax_plan(options: EditOptions, run: Run, parts: tuple[str, str, str]) -> SyntaxPlan:
    """Which language the edit is held to; checked against the file before a model loads."""
    if run not in (Run.program, Run.rewrite):
        return SyntaxPlan(None)
    choice, schema = options.syntax, options.schema
    if schema is not None and choice not in (SyntaxChoice.auto, SyntaxChoice.json):
        raise UserError(f"--schema types JSON files; it does not apply to --syntax {choice}")
    language = "json" if schema is not None else choose_language(choice, path=str(options.file))
    before, region, after = parts
    return plan_syntax(
        choice,
        language=language,
        schema=load_schema(schema) if schema is not None else None,
        before=before,
        region=region,
        after=after,
        warn=lambda line: print(line, file=sys.stderr),
    )


def register(app: typer.Typer) -> None:
    """Add ``cad edit`` to the app."""
    app.command("edit", cls=CadCommand)(cmd_edit)
