"""``cad train`` and ``cad eval``: make a model a span selector, and measure how good it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from cad.cli_text import CadCommand, cli_console, plural
from cad.errors import UserError
from cad.training.datasets import AnyExample, EditExample, load_any_edits, select_split

stderr = cli_console(stderr=True)
DATA_HELP = "A JSONL edit file ({id?, instruction, before, after}), or heval-python / heval-js."


def counting_bar(label: str) -> Progress:
    """A transient progress bar on stderr counting steps or edits, with a status field."""
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(bar_width=None),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=not stderr.is_terminal,
    )


def cmd_train(
    base: Annotated[str, typer.Option(help="Base model folder or hub id.")],
    data: Annotated[str, typer.Option(help=DATA_HELP)],
    out: Annotated[Path, typer.Option(help="Folder for the adapter, checkpoints and summary.")],
    rank: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
    alpha: Annotated[int, typer.Option(help="LoRA alpha (scale = alpha / rank).")] = 32,
    dropout: Annotated[float, typer.Option(min=0.0, max=1.0, help="LoRA dropout.")] = 0.0,
    lr: Annotated[float, typer.Option(help="Peak learning rate (cosine decay).")] = 2e-4,
    warmup_steps: Annotated[int, typer.Option(min=0, help="Linear warm-up steps.")] = 0,
    epochs: Annotated[int, typer.Option(help="Passes over the training split.")] = 3,
    max_steps: Annotated[
        int | None, typer.Option(help="Optimizer steps; overrides --epochs.")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Examples per micro-batch.")] = 4,
    grad_accum: Annotated[int, typer.Option(help="Micro-batches per optimizer step.")] = 1,
    valid_every: Annotated[int, typer.Option(help="Validate every N steps.")] = 50,
    save_every: Annotated[int, typer.Option(help="Checkpoint every N steps.")] = 100,
    keep_checkpoints: Annotated[int, typer.Option(help="Checkpoints kept on disk.")] = 2,
    resume: Annotated[
        bool, typer.Option(help="Continue from the last checkpoint in --out.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the initialisation and data order.")] = 0,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16 or float16.")] = "auto",
    four_bit: Annotated[
        bool | None,
        typer.Option(
            "--4bit/--no-4bit", help="4-bit NF4 base (QLoRA). Default: on with CUDA, off on CPU."
        ),
    ] = None,
    gradient_checkpointing: Annotated[
        bool, typer.Option(help="Recompute activations to save memory.")
    ] = False,
    subline: Annotated[bool, typer.Option(help="Train sub-line (span) programs.")] = False,
    max_tokens: Annotated[int, typer.Option(help="Skip examples longer than this.")] = 4096,
    valid_fraction: Annotated[
        float, typer.Option(help="Share of ids held out for validation.")
    ] = 0.1,
    test_fraction: Annotated[float, typer.Option(help="Share of ids held out for cad eval.")] = 0.1,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Train a span selector: LoRA adapters (QLoRA on CUDA) over --base.

    The adapter lands in OUT and loads with `cad edit --adapter OUT` and the server's
    `adapter` setting."""
    from cad.training.train import (
        CheckpointReport,
        Report,
        StepReport,
        TrainConfig,
        TrainingError,
        ValidReport,
        train,
    )

    config = TrainConfig(
        base=recorded_base(base),
        data=data,
        out=out,
        rank=rank,
        alpha=alpha,
        dropout=dropout,
        lr=lr,
        warmup_steps=warmup_steps,
        epochs=epochs,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_steps=max_steps,
        valid_every=valid_every,
        save_every=save_every,
        keep_checkpoints=keep_checkpoints,
        resume=resume,
        seed=seed,
        device=device,
        dtype=dtype,
        four_bit=four_bit,
        gradient_checkpointing=gradient_checkpointing,
        granularity="subline" if subline else "line",
        max_tokens=max_tokens,
        valid_fraction=valid_fraction,
        test_fraction=test_fraction,
    )
    last_step = 0
    with counting_bar("training") as bar:
        task = bar.add_task("train", total=None, status="loading")

        def show(report: Report) -> None:
            nonlocal last_step
            if isinstance(report, StepReport):
                last_step = report.step
                bar.update(
                    task,
                    completed=report.step,
                    total=report.total_steps,
                    status=f"loss {report.loss:.4f}  {report.tokens_per_s:,.0f} tok/s",
                )
            elif isinstance(report, ValidReport):
                bar.console.print(f"step {report.step}: validation loss {report.loss:.4f}")
            elif isinstance(report, CheckpointReport):
                bar.console.print(f"step {report.step}: checkpoint {report.path}")

        try:
            result = train(config, show)
        except TrainingError as exc:
            raise UserError(str(exc)) from None
        except KeyboardInterrupt:
            raise UserError(
                f"interrupted at step {last_step}; checkpoints stay in {out / 'checkpoints'} "
                "(continue with --resume)",
                exit_code=130,
            ) from None
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    stderr.print(
        f"trained {plural(result.steps, 'step')} on {plural(result.train_examples, 'example')} "
        f"({result.valid_examples} validation, {len(result.skipped)} skipped as too long); "
        f"loss {_number(result.train_loss)}, validation loss {_number(result.valid_loss)}, "
        f"{result.tokens_per_s:,.0f} tok/s, {'4-bit' if result.four_bit else 'full-precision'} base"
    )
    stderr.print(f"adapter: {result.adapter}  (use: cad edit FILE --adapter {result.adapter})")


def recorded_base(base: str) -> str:
    """``--base`` as the adapter records it: a local folder as an absolute path, so that
    ``cad edit --adapter OUT`` finds the base model from any folder; a hub id as it is."""
    local = Path(base).expanduser()
    return str(local.resolve()) if local.is_dir() else base


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def cmd_eval(
    data: Annotated[str, typer.Option(help=DATA_HELP)],
    model: Annotated[
        str,
        typer.Option(
            help="Model folder or hub id.", show_default="the adapter's base model, if any"
        ),
    ] = "",
    adapter: Annotated[
        Path | None, typer.Option(help="LoRA adapter folder (cad train --out).")
    ] = None,
    perturb: Annotated[
        list[int] | None,
        typer.Option(help="No model: move oracle copy endpoints by up to ±EPS lines (repeatable)."),
    ] = None,
    trials: Annotated[int, typer.Option(min=1, help="Perturbation trials per edit.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the perturbation.")] = 0,
    split: Annotated[
        str, typer.Option(help="all, or the train / valid / test part of cad train's split.")
    ] = "all",
    valid_fraction: Annotated[float, typer.Option(help="As given to cad train.")] = 0.1,
    test_fraction: Annotated[float, typer.Option(help="As given to cad train.")] = 0.1,
    limit: Annotated[int | None, typer.Option(min=1, help="Evaluate the first N edits.")] = None,
    subline: Annotated[bool, typer.Option(help="Let the model use sub-line copies.")] = False,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Budget per edit.")] = 1024,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16 or float16.")] = "auto",
    ar: Annotated[
        bool, typer.Option(help="Also time AR regeneration of the gold file of each exact edit.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    rows: Annotated[bool, typer.Option(help="With --json: include per-edit rows.")] = False,
    compile: Annotated[
        bool, typer.Option("--compile", help="Compiled forwards over the static KV cache.")
    ] = False,
    no_graphs: Annotated[
        bool,
        typer.Option("--no-graphs", help="On a GPU: run forwards eagerly, not as CUDA graphs."),
    ] = False,
) -> None:
    """Score a span selector on an edit set, or oracle programs under span noise.

    Reports exact match, program validity, copy start/end accuracy, copy coverage, generated
    tokens and wall-clock against AR regeneration; --perturb needs no model."""
    if split not in ("all", "train", "valid", "test"):
        raise UserError(f"--split must be all, train, valid or test, not {split!r}")
    try:
        edits = select_split(load_any_edits(data), split, valid_fraction, test_fraction)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    edits = edits[:limit] if limit else edits
    if not edits:
        raise UserError(f"{data}: no edits to evaluate (split {split})")
    if perturb:
        single = [edit for edit in edits if isinstance(edit, EditExample)]
        if not single:
            raise UserError(f"{data}: --perturb studies single-file edits, and there are none")
        _perturbation(single, perturb, trials, seed, as_json)
        return
    if not model and adapter is None:
        raise UserError("pass --model or --adapter (it runs on its base model), or --perturb EPS")
    _model_eval(
        edits,
        model,
        adapter,
        subline,
        max_new_tokens,
        device,
        dtype,
        ar,
        as_json,
        rows,
        compile=compile,
        graphs=not no_graphs,
    )


def _perturbation(
    edits: list[EditExample], eps: list[int], trials: int, seed: int, as_json: bool
) -> None:
    from cad.training.perturb import perturbation_study

    if any(value < 0 for value in eps):
        raise UserError("--perturb takes a number of lines, 0 or more")
    results = [perturbation_study(edits, value, trials=trials, seed=seed) for value in eps]
    if as_json:
        payload = (
            results[0].to_dict()
            if len(results) == 1
            else {"results": [r.to_dict() for r in results]}
        )
        print(json.dumps(payload, indent=2))
        return
    table = Table(
        title=f"oracle programs with copy endpoints moved by up to ±ε lines ({trials} trials)"
    )
    for column in ("ε", "edits", "EM", "trimmed EM", "start acc", "end acc"):
        table.add_column(column, justify="right")
    for result in results:
        table.add_row(
            str(result.eps),
            str(result.n),
            f"{result.em:.2%}",
            f"{result.trimmed_em:.2%}",
            f"{result.start_acc:.2%}",
            f"{result.end_acc:.2%}",
        )
    cli_console().print(table)


def _model_eval(
    edits: list[AnyExample],
    model: str,
    adapter: Path | None,
    subline: bool,
    max_new_tokens: int,
    device: str,
    dtype: str,
    ar: bool,
    as_json: bool,
    rows: bool,
    *,
    compile: bool = False,
    graphs: bool = True,
) -> None:
    from cad.selector import Cancelled, Decoder, ModelLoadError, load_model
    from cad.selector.adapters import AdapterBaseMismatch, choose_model
    from cad.selector.first_use import first_use_notice
    from cad.training.evaluate import evaluate

    try:
        model = choose_model(model, str(adapter) if adapter else None)
        with stderr.status(f"loading {model}"):
            loaded = load_model(
                model,
                device=device,
                dtype=dtype,
                adapter=str(adapter) if adapter else None,
                compile=compile,
                graphs=None if graphs else False,
            )
    except AdapterBaseMismatch as exc:
        raise UserError(f"{exc}; leave out --model to run it on {exc.base}") from None
    except ModelLoadError as exc:
        raise UserError(str(exc)) from None
    if notice := first_use_notice(loaded):
        stderr.print(f"note: {notice}")
    decoder = Decoder(loaded, max_new_tokens=max_new_tokens, subline=subline)
    with counting_bar("evaluating") as bar:
        task = bar.add_task("eval", total=len(edits), status="")
        exact = 0

        def show(score) -> None:
            nonlocal exact
            exact += score.exact
            bar.update(task, advance=1, status=f"{exact} exact")

        try:
            report = evaluate(decoder, edits, baseline=ar, on_edit=show)
        except Cancelled as exc:
            raise UserError(str(exc)) from None
    if as_json:
        print(json.dumps(report.to_dict(rows=rows), indent=2))
        return
    table = Table(title=f"{model}" + (f" + {adapter}" if adapter else ""), show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("edits", str(report.n))
    table.add_row("exact match", f"{report.em:.2%}")
    table.add_row("valid programs", f"{report.valid:.2%}")
    table.add_row("copy start accuracy", f"{report.start_acc:.2%}")
    table.add_row("copy end accuracy", f"{report.end_acc:.2%}")
    table.add_row("copy coverage", f"{report.coverage:.2%}")
    table.add_row("generated tokens / edit", f"{report.generated_tokens:.1f}")
    if report.wall_s is None:
        table.add_row("wall-clock / edit", "n/a: no exact edit to time")
    else:
        over = f"median of {plural(report.timed, 'exact edit')}"
        table.add_row(f"wall-clock / edit ({over})", f"{report.wall_s:.3f}s")
        if report.ar_wall_s is not None and report.speedup is not None:
            table.add_row(f"AR regeneration ({over})", f"{report.ar_wall_s:.3f}s")
            table.add_row(f"speed-up vs AR ({over})", f"{report.speedup:.2f}×")
    cli_console().print(table)


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``eval`` to the ``cad`` app."""
    app.command("train", cls=CadCommand, short_help="Train a span selector (LoRA or QLoRA).")(
        cmd_train
    )
    app.command("eval", cls=CadCommand, short_help="Score a span selector on an edit set.")(
        cmd_eval
    )
