"""Rewrite-mode benchmark: per edit, forwards and wall-clock of AR regeneration, prompt-lookup
decoding, rewrite mode with calibrated draft graphs, and program mode with the oracle
program — same model, same process, every method forced to the gold file (the oracle), so
all produce the same bytes and acceptance is measured even with random weights.

    python -m bench.rewrite --model qwen2.5-0.5b --device cpu --dtype float32 \
        --corpus heval-python --split test --out-json r.json --out-md r.md --plot r.png

``--split test`` keeps the edits that ``cad calibrate --holdout`` leaves out, so the shipped
draft configuration is measured on edits it was not calibrated on. ``--configs`` lists the
draft configurations to run: ``default`` (the shipped one) and/or JSON files from
``cad calibrate``, each a rewrite row of its own.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from bench.harness import machine, pick_model, spread, synchronize
from cad.resolver import oracle
from cad.selector import (
    Decoder,
    DraftConfig,
    DraftConfigError,
    LoadedModel,
    load_draft_config,
    prompt_lookup,
    regenerate,
)
from cad.selector.loading import enable_compile
from cad.selector.rewrite import rewrite_forced
from cad.selector.stats import DecodeResult
from cad.training.datasets import EditExample, load_edits, select_split

LABELS = {
    "ar": "AR regeneration",
    "pld": "prompt lookup (10 draft tokens)",
    "program": "program mode, oracle program",
}


def load_configs(names: list[str]) -> dict[str, DraftConfig]:
    """``default`` is the shipped draft configuration; anything else a JSON file, named by
    its stem."""
    return {
        name if name == "default" else Path(name).stem: load_draft_config(
            None if name == "default" else name
        )
        for name in names
    }


def methods(
    loaded: LoadedModel, decoder: Decoder, configs: dict[str, DraftConfig]
) -> dict[str, Callable[[EditExample], DecodeResult]]:
    """The measured methods by name; ``rewrite:<config>`` uses that draft configuration."""
    table: dict[str, Callable[[EditExample], DecodeResult]] = {
        "ar": lambda e: regenerate(loaded, e.before, e.instruction, e.after),
        "pld": lambda e: prompt_lookup(loaded, e.before, e.instruction, e.after),
    }
    for name, config in configs.items():

        def run(e: EditExample, config=config) -> DecodeResult:
            return rewrite_forced(loaded, e.before, e.instruction, e.after, config=config)

        table[f"rewrite:{name}"] = run
    table["program"] = lambda e: decoder.edit(
        e.before, e.instruction, program=oracle(e.before, e.after)
    )
    return table


def measure(
    loaded: LoadedModel, table: dict[str, Callable[[EditExample], DecodeResult]], example
) -> dict:
    """Forwards and wall-clock of every method on one edit; each must be byte-exact."""
    row: dict = {"id": example.id, "tokens": len(loaded.tokenizer.encode(example.after))}
    for name, call in table.items():
        synchronize(loaded)
        result = call(example)
        synchronize(loaded)
        if result.text != example.after:
            raise AssertionError(f"{name} was not byte-exact on {example.id}")
        row[name] = {
            "wall_s": result.stats.wall_s,
            "forwards": result.stats.forwards,
            "drafted": getattr(result.stats, "drafted_tokens", 0),
        }
    return row


def summarise(rows: list[dict], names: list[str]) -> dict:
    """Median and spread per method, and per-edit forward ratios of prompt lookup over each
    rewrite configuration and of each rewrite configuration over program mode."""
    out: dict = {}
    for name in names:
        out[name] = {
            "wall_s": spread([r[name]["wall_s"] for r in rows]),
            "forwards": spread([float(r[name]["forwards"]) for r in rows]),
        }
    for name in (n for n in names if n.startswith("rewrite:")):
        out[name]["pld_over_rewrite_forwards"] = spread(
            [r["pld"]["forwards"] / max(r[name]["forwards"], 1) for r in rows]
        )
        out[name]["rewrite_over_program_forwards"] = spread(
            [r[name]["forwards"] / max(r["program"]["forwards"], 1) for r in rows]
        )
        out[name]["pld_over_rewrite_wall"] = spread(
            [r["pld"]["wall_s"] / r[name]["wall_s"] for r in rows]
        )
    return out


def _label(name: str, budgets: dict[str, str]) -> str:
    if name.startswith("rewrite:"):
        config = name.split(":", 1)[1]
        return f"rewrite + draft graph ({config} config: {budgets[config]})"
    return LABELS[name]


def _short_label(name: str) -> str:
    """A method's name on a plot axis; the table gives the full description."""
    if name.startswith("rewrite:"):
        return "rewrite\n" + name.split(":", 1)[1]
    return {"ar": "AR", "pld": "prompt\nlookup", "program": "program\n(oracle)"}[name]


def _cell(s: dict[str, float], digits: int) -> str:
    return f"{s['median']:.{digits}f} ({s['q1']:.{digits}f}–{s['q3']:.{digits}f})"


def markdown(result: dict) -> str:
    """The results table: medians per edit with their interquartile range."""
    summary, budgets = result["summary"], result["budgets"]
    lines = [
        f"Rewrite mode: {result['corpus']} ({result['n']} edits, split {result['split']}), "
        f"{result['model']}, {result['dtype']}, {result['device']}; target forced (oracle); "
        "medians per edit (IQR)",
        "",
        "| method | forwards | wall (s) | PLD forwards ÷ method | PLD wall ÷ method "
        "| method forwards ÷ program |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in result["methods"]:
        s = summary[name]
        ratios = [
            _cell(s[key], 2) + "×" if key in s else ""
            for key in (
                "pld_over_rewrite_forwards",
                "pld_over_rewrite_wall",
                "rewrite_over_program_forwards",
            )
        ]
        lines.append(
            f"| {_label(name, budgets)} | {_cell(s['forwards'], 0)} | {_cell(s['wall_s'], 2)} "
            f"| {' | '.join(ratios)} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], names: list[str], title: str, path: Path) -> None:
    """Box plots of forwards and wall-clock per edit for every method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [_short_label(n) for n in names]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for axis, key, ylabel in ((axes[0], "forwards", "forwards per edit"),
                              (axes[1], "wall_s", "wall-clock per edit (s)")):  # fmt: skip
        axis.boxplot([[r[n][key] for r in rows] for n in names], tick_labels=labels)
        axis.set_yscale("log")
        axis.set_ylabel(ylabel)
        axis.tick_params(axis="x", labelsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def select(examples: list[EditExample], split: str, limit: int) -> list[EditExample]:
    """The ``split`` part of the corpus (``all``, or train/valid/test of ``split_by_id``),
    first ``limit`` edits when ``limit`` is set."""
    examples = select_split(examples, split)
    return examples[:limit] if limit else examples


def main(argv: list[str] | None = None) -> dict:
    """Command line entry point; returns the result it wrote."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--corpus", default="heval-python")
    parser.add_argument("--split", default="test", choices=["all", "train", "valid", "test"])
    parser.add_argument("--limit", type=int, default=0, help="first N edits only (0 = all)")
    parser.add_argument(
        "--configs", default="default", help="comma-separated: default and/or config files"
    )
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument(
        "--compile", action="store_true", help="decode through the compiled static-cache runtime"
    )
    args = parser.parse_args(argv)
    try:
        configs = load_configs([c for c in args.configs.split(",") if c])
    except DraftConfigError as exc:
        parser.error(str(exc))
    loaded = pick_model(args.model, args.device, args.dtype)
    if args.compile:
        enable_compile(loaded)
    decoder = Decoder(loaded, max_new_tokens=8192)
    examples = select(load_edits(args.corpus), args.split, args.limit)
    table = methods(loaded, decoder, configs)
    measure(loaded, table, examples[0])
    rows = []
    for i, example in enumerate(examples, 1):
        rows.append(measure(loaded, table, example))
        shown = " ".join(
            f"{n} {rows[-1][n]['forwards']}/{rows[-1][n]['wall_s']:.2f}s" for n in table
        )
        print(
            f"[{i}/{len(examples)}] {example.id} ({rows[-1]['tokens']} tokens): {shown}", flush=True
        )
    budgets = {
        name: f"budget {config.budget}, min reach {config.min_reach:g}"
        for name, config in configs.items()
    }
    result = {
        "corpus": args.corpus,
        "split": args.split,
        "n": len(rows),
        "model": loaded.name,
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "device": machine(),
        "compiled": args.compile,
        "methods": list(table),
        "budgets": budgets,
        "summary": summarise(rows, list(table)),
        "rows": rows,
    }
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    if args.out_md:
        args.out_md.write_text(text)
    if args.plot:
        title = (
            f"{result['model']} {result['dtype']}, {result['device']}; "
            f"{result['corpus']} ({args.split} split)"
        )
        plot(rows, list(table), title, args.plot)
    print(text)
    return result


if __name__ == "__main__":
    main()
