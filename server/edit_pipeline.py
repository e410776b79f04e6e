"""What ``cad edit`` computes, apart from how it is asked for and how the result is shown.

The pipeline: check the options against the run they select (one table says which options
apply to which run), read the input files as text, check and prepare them before any model
loads, load the model, and run one function per run (program, rewrite, grammar, baseline).
The same functions run in the ``cad edit`` process and in a warm server
(:mod:`cad.server.warm`), so an edit decoded by either is byte-identical.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cad.cli_text import plural
from cad.errors import UserError
from cad.files import read_text
from cad.resolver import Program, parse, resolve, split_lines
from cad.server.modes import EditMode
from cad.server.syntax_setting import (
    SyntaxChoice,
    SyntaxPlan,
    choose_language,
    parse_schema,
    plan_syntax,
)

if TYPE_CHECKING:
    from cad.grammar.cfg.grammar_ir import Grammar

Report = Callable[[Any], None]
"""Receives the decoder's progress snapshots (``cad.selector.Progress``)."""


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
    "draft_budget": frozenset({Run.program, Run.rewrite}),
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

EXCLUSIVE = (("write", "stdout", "diff", "json"), ("grammar", "baseline"))
"""Groups of options of which at most one may be given."""


@dataclass(frozen=True)
class EditOptions:
    """Every option of ``cad edit`` that decides what is computed (see ``cad edit --help``);
    how the result is delivered is the command's own business."""

    file: Path
    instr: str
    model: str = ""
    device: str = "auto"
    dtype: str = "auto"
    adapter: Path | None = None
    program: Path | None = None
    baseline: Baseline | None = None
    target: Path | None = None
    grammar: Path | None = None
    grammar_format: GrammarFormat = GrammarFormat.ebnf
    ignore_unsupported: bool = False
    max_new_tokens: int = 2048
    subline: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    mode: EditMode = EditMode.auto
    lines: str | None = None
    draft_config: Path | None = None
    draft_budget: int | None = None
    syntax: SyntaxChoice = SyntaxChoice.auto
    schema: Path | None = None
    compile: bool = False
    graphs: bool = True

    def to_json(self) -> dict[str, Any]:
        """The options as JSON values (paths and enums as text), for a warm server."""
        return {
            name: (str(value) if isinstance(value, Path | StrEnum) else value)
            for name, value in asdict(self).items()
        }

    @classmethod
    def from_json(cls, data: Any) -> EditOptions:
        """Options sent by :meth:`to_json`; anything else raises ``UserError``."""
        if not isinstance(data, dict) or set(data) != {item.name for item in fields(cls)}:
            raise UserError("the request's options do not fit this version of cad")
        converted: dict[str, Any] = {}
        for item in fields(cls):
            value = data[item.name]
            kind = _FIELD_KINDS.get(item.name)
            converted[item.name] = kind(value) if kind is not None and value is not None else value
        return cls(**converted)


_FIELD_KINDS: dict[str, Callable[[Any], Any]] = {
    "file": Path,
    "adapter": Path,
    "program": Path,
    "baseline": Baseline,
    "target": Path,
    "grammar": Path,
    "grammar_format": GrammarFormat,
    "mode": EditMode,
    "draft_config": Path,
    "syntax": SyntaxChoice,
    "schema": Path,
}


@dataclass(frozen=True)
class EditFiles:
    """The text of every file the edit reads (``None``: not given): what a warm server is
    sent, since it may not see the same files."""

    document: str
    program: str | None = None
    target: str | None = None
    grammar: str | None = None
    schema: str | None = None
    draft_config: str | None = None


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


@dataclass(frozen=True)
class EditOutcome:
    """A finished decode: the new text, the program (``None`` outside program mode), the
    stats as JSON values (``syntax``: the language the edit was held to) and whether the
    budget ran out before the edit was whole."""

    text: str
    program: str | None
    stats: dict[str, Any]

    @property
    def truncated(self) -> bool:
        """Whether the model spent its whole budget without finishing."""
        return bool(self.stats.get("truncated"))

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "program": self.program, "stats": self.stats}

    @classmethod
    def from_json(cls, data: Any) -> EditOutcome:
        """An outcome sent by :meth:`to_json`; anything else raises ``UserError``."""
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("text"), str)
            or not isinstance(data.get("stats"), dict)
            or not isinstance(data.get("program"), str | None)
        ):
            raise UserError("the warm server's answer does not fit this version of cad")
        return cls(data["text"], data["program"], data["stats"])


def option_name(field_name: str) -> str:
    """``draft_budget`` -> ``--draft-budget``."""
    return "--" + field_name.replace("_", "-")


def check_exclusive(given: set[str]) -> None:
    """Refuse options that exclude each other (``EXCLUSIVE``)."""
    for group in EXCLUSIVE:
        chosen = [name for name in group if name in given]
        if len(chosen) > 1:
            names = [option_name(name) for name in group]
            raise UserError(f"choose one of {', '.join(names[:-1])} and {names[-1]}")


def chosen_run(options: EditOptions, given: set[str]) -> Run:
    """The run the options select, after refusing options that exclude each other or do
    not apply to it (``given``: the options given on the command line)."""
    check_exclusive(given)
    if options.grammar is not None:
        run = Run.grammar
    elif options.baseline is not None:
        run = Run.baseline
    else:
        program_given = options.adapter is not None or options.program is not None
        run = Run(options.mode.resolved(program_given=program_given).value)
    order = [item.name for item in fields(EditOptions)]
    for name in sorted(given & set(APPLIES_TO), key=order.index):
        runs = APPLIES_TO[name]
        if run not in runs:
            raise UserError(_refusal(option_name(name), run, runs))
    if options.ignore_unsupported and options.grammar_format is not GrammarFormat.json_schema:
        raise UserError("--ignore-unsupported applies to --grammar-format json-schema")
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


def read_files(options: EditOptions, run: Run, program: str | None = None) -> EditFiles:
    """Read every file the run needs as text (each a regular UTF-8 file of bounded size);
    ``program``: the program's text when it was read already (``--program -``: stdin)."""

    def optional(path: Path | None) -> str | None:
        return read_text(path) if path is not None else None

    if run is Run.baseline and options.target is None:
        raise UserError("--baseline needs --target AFTER_FILE (the text to regenerate)")
    return EditFiles(
        document=read_text(options.file),
        program=program if program is not None else optional(options.program),
        target=optional(options.target) if run is Run.baseline else None,
        grammar=optional(options.grammar),
        schema=optional(options.schema),
        draft_config=optional(options.draft_config),
    )


def prepare_inputs(options: EditOptions, run: Run, files: EditFiles) -> EditInputs:
    """Check and prepare everything the run needs before a model is loaded, so bad input
    fails in a second, not after the model loaded."""
    document = files.document
    check_instruction(options.instr)
    forced = None
    if files.program is not None:
        forced = parse(files.program)
        resolve(forced, document)
    lines = parse_lines(options.lines, document) if options.lines is not None else None
    parts = _split_region(document, lines if run is Run.rewrite else None)
    return EditInputs(
        document=document,
        forced=forced,
        target=files.target,
        grammar=_grammar_front_end(options, files.grammar) if files.grammar is not None else None,
        lines=lines,
        drafts=_draft_config(options.draft_config, files.draft_config),
        parts=parts,
        plan=_syntax_plan(options, run, parts, files.schema),
    )


def model_name(options: EditOptions) -> str:
    """The model the edit runs on: ``--model``, else the adapter's base model, else the
    default model."""
    from cad.selector import ModelLoadError
    from cad.selector.adapters import AdapterBaseMismatch, choose_model

    adapter = str(options.adapter) if options.adapter is not None else None
    try:
        return choose_model(options.model, adapter)
    except AdapterBaseMismatch as exc:
        raise UserError(f"{exc}; leave out --model to run it on {exc.base}") from None
    except ModelLoadError as exc:
        raise UserError(str(exc)) from None


def model_key(options: EditOptions) -> tuple[Any, ...]:
    """What a loaded model depends on: two edits with the same key share a loaded model."""
    adapter = str(options.adapter) if options.adapter is not None else None
    return (
        model_name(options),
        options.device,
        options.dtype,
        adapter,
        options.compile,
        options.graphs,
    )


def load(options: EditOptions) -> Any:
    """The model the options name, loaded (``UserError`` when it cannot be)."""
    from cad.selector import ModelLoadError, load_model

    adapter = str(options.adapter) if options.adapter is not None else None
    try:
        return load_model(
            model_name(options),
            device=options.device,
            dtype=options.dtype,
            adapter=adapter,
            compile=options.compile,
            graphs=None if options.graphs else False,
        )
    except ModelLoadError as exc:
        raise UserError(str(exc)) from None


def decode(
    loaded: Any,
    options: EditOptions,
    run: Run,
    inputs: EditInputs,
    report: Report | None = None,
    cancel: threading.Event | None = None,
) -> EditOutcome:
    """Run the edit on the loaded model. ``report`` receives progress; ``cancel`` stops the
    decode (``Cancelled``). A context too small for the edit is a ``UserError``."""
    from cad.selector import ContextTooLongError

    _check_draft_budget(options.draft_budget, loaded.context_length)
    try:
        result = RUNS[run](loaded, options, inputs, report, cancel)
    except ContextTooLongError as exc:
        raise UserError(str(exc)) from None
    program = None
    if run is Run.program and result.program is not None:
        from cad.resolver import format_program

        program = format_program(result.program)
    stats = {**result.stats.to_dict(), "syntax": inputs.plan.language or "none"}
    return EditOutcome(result.text, program, stats)


def run_program(
    loaded: Any, options: EditOptions, inputs: EditInputs, report: Report | None, cancel: Any
) -> Any:
    """Program mode: the model writes an edit program (or follows ``--program``)."""
    from cad.selector import Decoder

    decoder = Decoder(
        loaded,
        max_new_tokens=options.max_new_tokens,
        subline=options.subline,
        sampling=sampling_of(options),
        draft_budget=options.draft_budget,
    )
    return decoder.edit(
        inputs.document,
        options.instr,
        program=inputs.forced,
        on_progress=report,
        cancel=cancel,
        syntax=inputs.syntax(loaded),
    )


def run_rewrite(
    loaded: Any, options: EditOptions, inputs: EditInputs, report: Report | None, cancel: Any
) -> Any:
    """Rewrite mode: the model rewrites the file (or ``--lines``), drafted from the text."""
    from cad.selector.rewrite import rewrite

    return rewrite(
        loaded,
        inputs.document,
        options.instr,
        config=inputs.drafts,
        max_new_tokens=options.max_new_tokens,
        sampling=sampling_of(options),
        on_progress=report,
        cancel=cancel,
        lines=inputs.lines,
        draft_budget=options.draft_budget,
        syntax=inputs.syntax(loaded),
    )


def run_grammar(
    loaded: Any, options: EditOptions, inputs: EditInputs, report: Report | None, cancel: Any
) -> Any:
    """``--grammar``: the model rewrites the file under a grammar (EBNF or JSON Schema)."""
    from cad.selector import generate_constrained

    assert inputs.grammar is not None
    matcher = _bind_grammar(inputs.grammar, loaded).matcher()
    return generate_constrained(
        loaded,
        inputs.document,
        options.instr,
        matcher,
        max_new_tokens=options.max_new_tokens,
        sampling=sampling_of(options),
        cancel=cancel,
    )


def run_baseline(
    loaded: Any, options: EditOptions, inputs: EditInputs, report: Report | None, cancel: Any
) -> Any:
    """``--baseline``: regenerate ``--target`` as a whole-file baseline (AR or prompt lookup)."""
    from cad.selector import prompt_lookup, regenerate

    assert inputs.target is not None and options.baseline is not None
    baseline = regenerate if options.baseline is Baseline.ar else prompt_lookup
    return baseline(loaded, inputs.document, options.instr, inputs.target)


RUNS: dict[Run, Callable[[Any, EditOptions, EditInputs, Report | None, Any], Any]] = {
    Run.program: run_program,
    Run.rewrite: run_rewrite,
    Run.grammar: run_grammar,
    Run.baseline: run_baseline,
}


def sampling_of(options: EditOptions) -> Any:
    """The sampling the options ask for."""
    from cad.selector import Sampling

    return Sampling(temperature=options.temperature, top_p=options.top_p, seed=options.seed)


def _check_draft_budget(budget: int | None, context_length: int) -> None:
    """Refuse a ``--draft-budget`` that could not fit the model's context even alone (rather
    than blame the document's length)."""
    if budget is not None and budget >= context_length:
        raise UserError(
            f"--draft-budget {budget:,} is not below the model's context of "
            f"{context_length:,} tokens; give a smaller budget"
        )


def _draft_config(path: Path | None, text: str | None) -> Any:
    """The draft-graph configuration read from ``path`` (``None``: the shipped default); a
    bad file is a one-line error."""
    if path is None or text is None:
        return None
    from cad.selector.draft_config import DraftConfig, DraftConfigError

    try:
        return DraftConfig.from_json(text)
    except DraftConfigError as exc:
        raise UserError(f"--draft-config {path}: {exc}") from None
    except (RecursionError, ValueError):
        raise UserError(
            f"--draft-config {path}: not a draft configuration (JSON nested too deeply or "
            "numbers too long); write it as cad calibrate does"
        ) from None


def _grammar_front_end(options: EditOptions, source: str) -> Grammar:
    """``--grammar`` taken through the grammar front end, before any model loads: a bad
    grammar (or one past the front end's limits) is a one-line error at once. JSON Schema
    keywords left out under ``--ignore-unsupported`` are named on stderr."""
    import sys

    from cad.grammar.cfg import front_end

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
        print(f"warning: grammar: not enforced: {', '.join(ignored)}", file=sys.stderr)
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


def _syntax_plan(
    options: EditOptions, run: Run, parts: tuple[str, str, str], schema_text: str | None
) -> SyntaxPlan:
    """Which language the edit is held to; checked against the file before a model loads."""
    import sys

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
        schema=parse_schema(schema, schema_text) if schema is not None and schema_text else None,
        before=before,
        region=region,
        after=after,
        warn=lambda line: print(line, file=sys.stderr),
    )
