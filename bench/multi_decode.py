"""Edits that move code between files, decoded with a model: forwards and wall-clock per edit
for one multi-file program against the same edit made file by file.

    python -m bench.multi_decode CORPUS.jsonl --model MODEL [--device cpu] [--dtype float32] \\
        [--limit 10] [--max-tokens 6000] [--out-json FILE] [--out-md FILE]

CORPUS holds multi-file commits (``python -m bench.multi_file corpus``). The commits chosen
move a block of at least ``MOVE_LINES`` lines from one file to another (as
``bench.multi_file`` finds them), with at most ``--max-tokens`` tokens in all their files
before the edit, in id order. Every method is forced to the commit's files after it (the
model runs every forward, so forwards and wall-clock are real without trained weights):

* **multi-file program** — the multi-file oracle program, decoded once over all files
  (:class:`cad.selector.MultiDecoder`);
* **per-file program** — each written file's own oracle program (copies from its own old
  text only), one decode per file;
* **per-file rewrite** — rewrite mode drafting each file from its old text;
* **rewrite drafted from all files** — rewrite mode over every file at once
  (:func:`cad.selector.multi_rewrite.rewrite_files`): each file that stays is rewritten with
  drafts from it and then every other file; a created file is rewritten from nothing;
* **AR** — each file regenerated token by token.

A deleted file costs the per-file methods nothing. MODEL is an architecture name (random
init, real tokenizer) or a model folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness import machine, pick_model, spread, synchronize
from bench.multi_file import MOVE_LINES, moved_lines
from cad.resolver import (
    CreateFile,
    DeleteFile,
    EditFile,
    Gen,
    Program,
    Workspace,
    apply_changes,
    oracle_multi,
    per_file_programs,
)
from cad.selector import Decoder, LoadedModel, MultiDecoder, regenerate
from cad.selector.multi_rewrite import rewrite_files
from cad.selector.rewrite import rewrite_forced
from cad.training.datasets import MultiEditExample, load_examples

CONTEXT_MARGIN = 1024
"""Context tokens kept free beside the prompt, copies and generated text (instruction, file
headers, program tags, draft tree)."""
METHODS = (
    "multi-file program",
    "per-file program",
    "per-file rewrite",
    "rewrite drafted from all files",
    "AR",
)


def choose_edits(
    corpus: Path, loaded: LoadedModel, limit: int, max_tokens: int
) -> list[MultiEditExample]:
    """The first ``limit`` commits (by id) that move code, whose files before the edit hold
    at most ``max_tokens`` tokens, and whose decode fits the model's context: the prompt
    (every file, numbered), a copy of every file and what the program generates."""
    chosen = []
    edits = sorted(
        (e for e in load_examples(corpus) if isinstance(e, MultiEditExample)), key=lambda e: e.id
    )
    for edit in edits:
        before = edit.before_files
        tokens = sum(len(loaded.tokenizer.encode(text)) for text in before.values())
        if not before or tokens > max_tokens:
            continue
        program = oracle_multi(before, edit.after_files)
        generated = sum(
            len(loaded.tokenizer.encode(op.text))
            for section in program.sections
            if not isinstance(section, DeleteFile)
            for op in section.ops
            if isinstance(op, Gen)
        )
        fits = 3 * tokens + generated + CONTEXT_MARGIN <= loaded.context_length
        if fits and moved_lines(program, Workspace(before), edit.after_files) >= MOVE_LINES:
            chosen.append(edit)
        if len(chosen) == limit:
            break
    return chosen


def timed(loaded: LoadedModel, run: Callable[[], Any]) -> tuple[Any, float]:
    """``run()`` and its wall-clock, the device synchronised on both sides."""
    synchronize(loaded)
    start = time.perf_counter()
    result = run()
    synchronize(loaded)
    return result, time.perf_counter() - start


def measure(
    loaded: LoadedModel, edit: MultiEditExample, methods: tuple[str, ...] = METHODS
) -> dict[str, dict[str, float]]:
    """Forwards and wall-clock of each of ``methods`` on ``edit`` (the multi-file program
    always); raises if one is not exact."""
    before, after = edit.before_files, edit.after_files
    row: dict[str, dict[str, float]] = {}
    program = oracle_multi(before, after)
    result, wall = timed(
        loaded,
        lambda: MultiDecoder(loaded, max_new_tokens=1 << 20).edit(
            before, edit.instruction, program=program
        ),
    )
    if result.stats.truncated or apply_changes(before, result.changes) != after:
        reason = (
            "ran out of context" if result.stats.truncated else "did not give the files after it"
        )
        raise RuntimeError(f"{edit.id}: the multi-file program {reason}")
    row["multi-file program"] = {"forwards": result.stats.forwards, "wall_s": wall}
    decoder = Decoder(loaded, max_new_tokens=1 << 20)
    file_by_file = tuple(
        method for method in ("per-file program", "per-file rewrite", "AR") if method in methods
    )
    totals = {method: {"forwards": 0.0, "wall_s": 0.0} for method in file_by_file}
    per_file = per_file_programs(before, after)
    for section in per_file.sections:
        if isinstance(section, DeleteFile):
            continue
        path = section.path if isinstance(section, CreateFile) else list(before)[section.file - 1]
        assert isinstance(section, EditFile | CreateFile)
        old, new = before.get(path, ""), after[path]
        runs = {
            method: run
            for method, run in {
                "per-file program": partial(
                    decoder.edit, old, edit.instruction, program=Program(section.ops)
                ),
                "per-file rewrite": partial(rewrite_forced, loaded, old, edit.instruction, new),
                "AR": partial(regenerate, loaded, old, edit.instruction, new),
            }.items()
            if method in file_by_file
        }
        for method, run in runs.items():
            outcome, wall = timed(loaded, run)
            if outcome.text != new:
                raise RuntimeError(f"{edit.id}: {method} did not give {path}")
            totals[method]["forwards"] += outcome.stats.forwards
            totals[method]["wall_s"] += wall
    row.update(totals)
    if "rewrite drafted from all files" in methods:
        row["rewrite drafted from all files"] = rewrite_all(loaded, edit)
    return row


def rewrite_all(loaded: LoadedModel, edit: MultiEditExample) -> dict[str, float]:
    """Forwards and wall-clock of rewriting every file that stays with drafts from all files,
    and every created file from nothing."""
    before, after = edit.before_files, edit.after_files
    staying = [path for path in before if path in after and before[path] != after[path]]
    ordered = {path: before[path] for path in staying}
    ordered.update((path, text) for path, text in before.items() if path not in ordered)
    targets = {path: after[path] for path in staying}
    forwards, wall = 0.0, 0.0
    if staying:
        result, wall = timed(
            loaded,
            partial(
                rewrite_files,
                loaded,
                ordered,
                edit.instruction,
                editable=len(staying),
                targets=targets,
            ),
        )
        if result.changes != targets:
            raise RuntimeError(f"{edit.id}: rewriting all files did not give the files after it")
        forwards = result.stats.forwards
    for path in after:
        if path not in before:
            outcome, seconds = timed(
                loaded, partial(rewrite_forced, loaded, "", edit.instruction, after[path])
            )
            forwards += outcome.stats.forwards
            wall += seconds
    return {"forwards": forwards, "wall_s": wall}


def summarize(rows: list[dict[str, Any]], methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    """Per method: forwards and wall-clock per edit (median and spread), pooled, and the
    median per-edit ratio to the multi-file program."""
    summary: dict[str, Any] = {}
    for method in methods:
        entry: dict[str, Any] = {}
        for key in ("forwards", "wall_s"):
            values = [row["methods"][method][key] for row in rows]
            ratios = [
                row["methods"][method][key] / row["methods"][METHODS[0]][key]
                for row in rows
                if row["methods"][METHODS[0]][key]
            ]
            entry[key] = {
                **spread(values),
                "pooled": sum(values),
                "over_multi": statistics.median(ratios) if ratios else 0.0,
            }
        summary[method] = entry
    return summary


def markdown(summary: dict[str, Any], header: str) -> str:
    """The table: per method, forwards and wall-clock per edit and their ratio to the
    multi-file program."""
    lines = [
        header,
        "",
        "| method | forwards per edit, median (IQR) | ÷ multi-file (median edit) "
        "| wall per edit, median (IQR) | ÷ multi-file (median edit) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for method in summary:
        forwards, wall = summary[method]["forwards"], summary[method]["wall_s"]
        lines.append(
            f"| {method} | {forwards['median']:.0f} ({forwards['q1']:.0f}–{forwards['q3']:.0f}) "
            f"| {forwards['over_multi']:.2f}× | {wall['median']:.2f} s "
            f"({wall['q1']:.2f}–{wall['q3']:.2f}) | {wall['over_multi']:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.multi_decode",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=6000)
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help="comma-separated methods to run (the multi-file program always runs)",
    )
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    methods = (METHODS[0], *(m for m in METHODS[1:] if m in args.methods.split(",")))
    unknown = set(args.methods.split(",")) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    loaded = pick_model(args.model, args.device, args.dtype)
    edits = choose_edits(args.corpus, loaded, args.limit, args.max_tokens)
    if not edits:
        print("error: no commit of the corpus moves code within --max-tokens", file=sys.stderr)
        return 1
    measure(loaded, edits[0], methods)  # warm up: token indexes, tokenizer and kernels
    rows = []
    for done, edit in enumerate(edits, 1):
        row = measure(loaded, edit, methods)
        rows.append({"id": edit.id, "files": len(edit.files), "methods": row})
        print(f"{done}/{len(edits)} {edit.id}", file=sys.stderr, flush=True)
    summary = summarize(rows, methods)
    header = (
        f"{len(rows)} commits moving code ({args.corpus.name}), {args.model}, {args.dtype}, "
        f"{machine()}; every method forced to the files after the commit"
    )
    table = markdown(summary, header)
    print(table)
    if args.out_json is not None:
        payload = {"header": header, "summary": summary, "rows": rows}
        args.out_json.write_text(json.dumps(payload, indent=1) + "\n")
    if args.out_md is not None:
        args.out_md.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
