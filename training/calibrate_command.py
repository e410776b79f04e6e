"""``cad calibrate --data FILE --out CONFIG``: learn a rewrite-mode draft-graph configuration
from decoding traces on an edit corpus (see ``training/calibrate.py`` and docs/rewrite.md)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from cad.cli_text import CadCommand, cli_console
from cad.errors import UserError
from cad.files import write_atomic
from cad.training.datasets import EditExample, load_edits, split_by_id


@dataclass(frozen=True)
class Options:
    """What ``cad calibrate`` was asked to do (see its ``--help``)."""

    data: list[str]
    out: Path
    tokenizer: str = ""
    model: str = ""
    device: str = "auto"
    dtype: str = "auto"
    greedy: bool = False
    token_cost: float = 0.05
    max_tokens: int = 4096
    holdout: bool = False
    limit: int = 0
    graph_size: int = 1024
    min_gain: float = 0.005
    budget: int = 0


def load_corpus(name: str, holdout: bool) -> list[EditExample]:
    """The edits ``--data`` names (``load_edits``); with ``holdout`` its test split is left
    out."""
    examples = load_edits(name)
    if holdout:
        train, valid, _ = split_by_id(examples)
        examples = train + valid
    return examples


def _encoder(tokenizer: str, model: str, device: str, dtype: str) -> tuple[Any, Any, str]:
    """``(tokenizer, loaded model or None, description)`` for the chosen trace source."""
    if model:
        from cad.selector import ModelLoadError, load_model

        try:
            loaded = load_model(model, device=device, dtype=dtype)
        except ModelLoadError as exc:
            raise UserError(str(exc)) from None
        return loaded.tokenizer, loaded, f"model {loaded.name}"
    if not tokenizer:
        raise UserError("give --tokenizer DIR (model-free traces) or --model (real decoding)")
    if not Path(tokenizer).is_dir():
        raise UserError(f"--tokenizer {tokenizer}: no such folder")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(tokenizer), None, f"tokenizer {Path(tokenizer).name}"
    except (OSError, ValueError) as exc:
        raise UserError(f"--tokenizer {tokenizer}: cannot load ({exc})") from None


def run(options: Options) -> str:
    """Trace every edit of the corpora, calibrate, write the configuration atomically, and
    return a one-line summary."""
    from rich.progress import Progress

    from cad.grammar import ProgramTokenIndex
    from cad.training.calibrate import BUDGETS, calibrate, model_trace, replay_trace
    from cad.training.calibrate_program import calibrate_prior, oracle_edits

    if options.greedy and not options.model:
        raise UserError("--greedy follows a model's own output; give --model too")
    if options.tokenizer and options.model:
        raise UserError(
            "choose one of --tokenizer (model-free traces) and --model (real decoding); "
            "a model brings its own tokenizer"
        )
    if str(options.out.parent) and not options.out.parent.is_dir():
        raise UserError(f"--out {options.out}: folder {options.out.parent} does not exist")
    corpora = {name: load_corpus(name, options.holdout) for name in options.data}
    tokenizer, loaded, source = _encoder(
        options.tokenizer, options.model, options.device, options.dtype
    )

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    traces, used, kept_edits = [], [], []
    console = cli_console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        for name, examples in corpora.items():
            kept = 0
            chosen = examples[: options.limit] if options.limit else examples
            for example in progress.track(chosen, description=f"tracing {name}"):
                before, after = encode(example.before), encode(example.after)
                if max(len(before), len(after)) > options.max_tokens:
                    continue
                if loaded is None:
                    traces.append(replay_trace(before, after, tokenizer.eos_token_id))
                else:
                    budget = 2 * len(before) + 64
                    traces.append(
                        model_trace(loaded, example, greedy=options.greedy, max_new_tokens=budget)
                    )
                kept += 1
                kept_edits.append(example)
            used.append(f"{Path(name).name} ({kept})")
        if not traces:
            raise UserError(
                f"no edit of at most {options.max_tokens} tokens in {', '.join(options.data)}"
            )
        task = progress.add_task("replaying budgets", total=None)
        targets = "greedy" if options.greedy else "gold"
        held = "; test splits held out" if options.holdout else ""
        pinned = f"; budget fixed at {options.budget}" if options.budget else ""
        result = calibrate(
            traces,
            token_cost=options.token_cost,
            graph_size=options.graph_size,
            min_gain=options.min_gain,
            budgets=(options.budget,) if options.budget else BUDGETS,
            calibrated_on=(
                f"{', '.join(used)}; {source}; {targets} targets; "
                f"token cost {options.token_cost:g}{pinned}{held}"
            ),
            on_budget=lambda row: progress.advance(task),
        )
        program_task = progress.add_task("calibrating program drafts", total=None)
        index = ProgramTokenIndex.for_tokenizer(
            tokenizer, loaded.vocab_size if loaded is not None else len(tokenizer)
        )
        prior, _ = calibrate_prior(
            oracle_edits(kept_edits),
            index,
            encode,
            result.config.budget,
            on_row=lambda row: progress.advance(program_task),
        )
    config = replace(result.config, program=prior)
    write_atomic(options.out, config.to_json())
    chosen_row = next(
        r for r in result.budgets if (r.budget, r.min_reach) == (config.budget, config.min_reach)
    )
    return (
        f"wrote {options.out}: {result.edits} edits; aligned={config.aligned} "
        f"ngram={config.ngram} output={config.output} top_k={config.top_k}; "
        f"budget {config.budget}, min reach {config.min_reach:g}; "
        f"{chosen_row.tokens_per_forward:.1f} tokens per forward replayed; program drafts: "
        f"min reach {prior.min_reach:g}, follow reach {prior.follow_reach:g}"
    )


def cmd_calibrate(
    data: Annotated[
        list[str],
        typer.Option(
            "--data",
            help="Edit corpus: JSONL in the edit schema, or heval-python / heval-js. Repeatable.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Where to write the configuration (JSON).")],
    tokenizer: Annotated[
        str, typer.Option(help="Tokenizer folder for model-free traces (gold targets forced).")
    ] = "",
    model: Annotated[
        str, typer.Option(help="Trace real rewrite decoding with this model instead.")
    ] = "",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda[:N] (with --model).")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, float16 or bfloat16.")] = "auto",
    greedy: Annotated[
        bool, typer.Option("--greedy", help="With --model: follow its own greedy output.")
    ] = False,
    token_cost: Annotated[
        float,
        typer.Option(min=0.0, help="Cost of one verified draft token, in one-token forwards."),
    ] = 0.05,
    max_tokens: Annotated[
        int, typer.Option(min=1, help="Skip edits whose text before or after is longer.")
    ] = 4096,
    holdout: Annotated[
        bool, typer.Option("--holdout", help="Leave out each corpus's test split.")
    ] = False,
    limit: Annotated[int, typer.Option(min=0, help="First N edits per corpus (0 = all).")] = 0,
    graph_size: Annotated[
        int, typer.Option(min=1, help="Formula nodes of the calibrated static graph.")
    ] = 1024,
    min_gain: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of accepted tokens a source must add.")
    ] = 0.005,
    budget: Annotated[
        int,
        typer.Option(
            min=0,
            help="Fix the draft budget (drafted tokens per forward) instead of choosing it; "
            "only the reach threshold is chosen (0 = choose).",
        ),
    ] = 0,
) -> None:
    """Learn which drafts are accepted (sources, lengths, per-depth rates, budget) from
    decoding traces on edit corpora, and write a draft-graph configuration for rewrite mode."""
    options = Options(
        data, out, tokenizer, model, device, dtype, greedy, token_cost, max_tokens, holdout,
        limit, graph_size, min_gain, budget,
    )  # fmt: skip
    print(run(options), file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Add ``cad calibrate`` to the app."""
    app.command(
        "calibrate", cls=CadCommand, short_help="Calibrate the draft graphs of rewrite mode."
    )(cmd_calibrate)
