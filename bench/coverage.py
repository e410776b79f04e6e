"""Coverage table for corpora: exact round-trip check, then copy coverage per corpus.

    python -m bench.coverage heval-py.jsonl heval-js.jsonl releases.jsonl \
        --tokenizer tests/fixtures/tokenizers/qwen2 --out-md docs/coverage.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.harness import machine
from resolver import analyze_edit, format_program, oracle, parse, resolve
from resolver.coverage import DEFAULT_SWEEP, summarize
from server.program_commands import load_tokenizer_pieces
from training.datasets import load_jsonl


def round_trip_failures(path: Path) -> list[str]:
    """Ids whose line or sub-line oracle program does not reproduce ``after`` exactly."""
    failures = []
    for example in load_jsonl(path):
        for granularity in ("line", "subline"):
            program = parse(format_program(oracle(example.before, example.after, granularity=granularity)))
            if resolve(program, example.before) != example.after:
                failures.append(f"{example.id} ({granularity})")
    return failures


def corpus_row(path: Path, tokenizer: Path, kernel_speedup: float) -> dict:
    """Round-trip result and coverage summary of one corpus."""
    pieces, count = load_tokenizer_pieces(tokenizer)
    examples = load_jsonl(path)
    results = [analyze_edit(e.before, e.after, pieces, count, sweep=DEFAULT_SWEEP) for e in examples]
    return {"corpus": path.stem, "round_trip_failures": round_trip_failures(path),
            **summarize(results, kernel_speedup)}


def markdown(rows: list[dict], tokenizer: Path) -> str:
    """The README table."""
    sweep = [str(m) for m in DEFAULT_SWEEP]
    head = ("| corpus | edits | exact round-trip | line pooled / median | sub-line pooled / median | "
            + " | ".join(f"m={m}" for m in sweep) + " | ops (line / sub-line) | ceiling line / sub-line |")
    lines = [
        f"Copy coverage of gold output tokens ({tokenizer.name} tokenizer); sub-line = token-level "
        f"oracle, m = minimum copy length in tokens; ceiling = 1/((1-f)+f/s) at s = "
        f"{rows[0]['kernel_speedup']:g}. Machine: {machine()}.",
        "",
        head,
        "|" + " --- |" * (7 + len(sweep)),
    ]
    for r in rows:
        n = r["n"]
        exact = f"{n - len({f.split(' (')[0] for f in r['round_trip_failures']})}/{n}"
        lines.append(
            f"| {r['corpus']} | {n} | {exact} "
            f"| {r['line_coverage']['pooled']:.1%} / {r['line_coverage']['median']:.1%} "
            f"| {r['subline_coverage']['pooled']:.1%} / {r['subline_coverage']['median']:.1%} | "
            + " | ".join(f"{r['sweep_pooled'][m]:.1%}" for m in sweep)
            + f" | {r['line_ops_median']:g} / {r['subline_ops_median']:g} "
            f"| {r['line_speedup_ceiling']:.1f}× / {r['subline_speedup_ceiling']:.1f}× |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--kernel-speedup", type=float, default=10.0)
    parser.add_argument("--out-md", type=Path)
    parser.add_argument("--out-json", type=Path)
    args = parser.parse_args()
    rows = [corpus_row(path, args.tokenizer, args.kernel_speedup) for path in args.corpora]
    if args.out_json:
        args.out_json.write_text(json.dumps(rows, indent=2))
    table = markdown(rows, args.tokenizer)
    if args.out_md:
        args.out_md.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
