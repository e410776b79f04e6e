"""Coverage table for edit corpora: first an exact round-trip check of every line and sub-line
oracle program, then how much of each corpus's gold output a program can copy.

    python -m bench.coverage HEvalFix-Py.jsonl HEvalFix-JS.jsonl releases.jsonl \
        --tokenizer tests/fixtures/tokenizers/qwen2 [--kernel-speedup 10] \
        [--out-md FILE] [--out-json FILE]

The statistics are those of ``cad analyze`` (``cad.resolver.analyze_edit`` per edit, pooled by
``cad.resolver.coverage.summarize``). Exits 1 when any program fails to round-trip.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Iterable
from pathlib import Path

from rich.progress import Progress

from cad.errors import UserError
from cad.resolver import analyze_edit, format_program, oracle, parse, resolve
from cad.resolver.coverage import DEFAULT_SWEEP, summarize
from cad.server.program_commands import load_tokenizer_pieces
from cad.training.datasets import EditExample, load_jsonl

GRANULARITIES = ("line", "subline")


def round_trip_failure(example: EditExample) -> str | None:
    """Why the example's line or sub-line oracle program, printed and parsed back, does not
    resolve to ``after`` exactly; ``None`` when both do."""
    for granularity in GRANULARITIES:
        try:
            text = format_program(oracle(example.before, example.after, granularity=granularity))
            result = resolve(parse(text), example.before)
        except ValueError as exc:
            return f"{example.id} ({granularity}): {exc}"
        if result != example.after:
            return f"{example.id} ({granularity}): resolves to a different text"
    return None


def corpus_row(
    path: Path,
    examples: list[EditExample],
    tokenizer: Path,
    kernel_speedup: float,
    progress: Progress,
) -> dict[str, object]:
    """Round-trip failures and the coverage summary of one corpus, tokens counted by the
    tokenizer in the folder ``tokenizer``."""
    pieces, count = load_tokenizer_pieces(tokenizer)
    failures: list[str] = []
    results = []
    task = progress.add_task(path.stem, total=len(examples))
    for example in examples:
        failure = round_trip_failure(example)
        if failure:
            failures.append(failure)
        results.append(
            analyze_edit(example.before, example.after, pieces, count, sweep=DEFAULT_SWEEP)
        )
        progress.advance(task)
    return {
        "corpus": path.stem,
        "file": str(path),
        "tokenizer": tokenizer.name,
        "round_trip_failures": failures,
        **summarize(results, kernel_speedup),
    }


def describe_machine() -> str:
    """One line naming the CPU and Python the table was computed with."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        if names:
            model = names[0].split(":", 1)[1].strip()
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}"
    )


def percent(value: float) -> str:
    """A fraction as a percentage with one decimal."""
    return f"{value:.1%}"


def markdown_table(rows: Iterable[dict]) -> str:
    """The coverage table: one row per corpus, coverage as a share of gold-output tokens."""
    rows = list(rows)
    speedup = rows[0]["kernel_speedup"]
    head = ["corpus", "edits", "exact round-trip", "line pooled / median"]
    head += ["sub-line pooled / median", *(f"m={m}" for m in DEFAULT_SWEEP)]
    head += ["median ops line / sub-line", f"ceiling at s={speedup:g} line / sub-line"]
    head += ["tokenizer"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 2) + " --- |"]
    for row in rows:
        n = row["n"]
        line, subline = row["line_coverage"], row["subline_coverage"]
        cells = [row["corpus"], str(n), f"{n - len(row['round_trip_failures'])}/{n}"]
        cells += [f"{percent(line['pooled'])} / {percent(line['median'])}"]
        cells += [f"{percent(subline['pooled'])} / {percent(subline['median'])}"]
        cells += [percent(row["sweep_pooled"][str(m)]) for m in DEFAULT_SWEEP]
        cells += [f"{row['line_ops_median']:g} / {row['subline_ops_median']:g}"]
        cells += [f"{row['line_speedup_ceiling']:.1f}× / {row['subline_speedup_ceiling']:.1f}×"]
        cells += [row["tokenizer"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: check, analyse, print and optionally save the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.coverage",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("corpora", nargs="+", type=Path, help="JSONL files in the edit schema")
    parser.add_argument("--tokenizer", type=Path, required=True, help="folder with tokenizer.json")
    parser.add_argument("--kernel-speedup", type=float, default=10.0, help="copy speedup s")
    parser.add_argument("--out-md", type=Path, help="write the Markdown table here")
    parser.add_argument("--out-json", type=Path, help="write the full summaries here")
    args = parser.parse_args(argv)
    if args.kernel_speedup <= 0:
        parser.error("--kernel-speedup must be positive")
    try:
        corpora = [(path, load_jsonl(path)) for path in args.corpora]
        with Progress() as progress:
            rows = [
                corpus_row(path, examples, args.tokenizer, args.kernel_speedup, progress)
                for path, examples in corpora
            ]
    except (UserError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    table = markdown_table(rows)
    if args.out_md:
        args.out_md.write_text(f"{table}\nMachine: {describe_machine()}.\n", encoding="utf-8")
    if args.out_json:
        document = {"machine": describe_machine(), "corpora": rows}
        args.out_json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(table)
    failures = [failure for row in rows for failure in row["round_trip_failures"]]
    for failure in failures:
        print(f"round-trip failure: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
