"""Multi-file programs on real git histories: every multi-file commit must round-trip byte for
byte, and on commits that move code between files the multi-file oracle is priced against
per-file programs.

    python -m bench.multi_file corpus REPO... --out /tmp/cad-corpora/multi.jsonl [--max-files 6]
    python -m bench.multi_file check /tmp/cad-corpora/multi.jsonl [--workers 2] \\
        [--out-json FILE] [--out-md FILE]

``corpus`` keeps the commits of each repository that change 2 to ``--max-files`` text files
(``cad data git --max-files``), with ids ``<repository>:<hash>``. ``check`` prints, per
repository, how many commits the line and sub-line multi-file oracle programs (and the
per-file programs) turn into the files after the commit exactly, printed, parsed back and
resolved; then, over the commits with a cross-file copy of at least ``MOVE_LINES`` lines
(code moved, extracted or renamed), the ops, generated tokens, program tokens and forwards
of the line oracle written across files and written file by file. Forwards are replayed
without a model (``cad.selector.decoder.replay_forced``, the shipped accelerator draft
configuration, Qwen2 tokenizer): a per-file program against its own file; a multi-file
section as the single-file program over all files joined into one document, plus one
forward for every token of its section tags and ``file`` attributes (a bound: the decoder
forces most of them for free). Exits 1 when any program fails to round-trip.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

from bench.harness import QWEN2_TOKENIZER
from cad.resolver import (
    CopyFrom,
    CopyLines,
    CopySpan,
    DeleteFile,
    EditFile,
    FileOp,
    Gen,
    MultiProgram,
    Op,
    Program,
    Workspace,
    apply_changes,
    format_multi,
    format_program,
    oracle_multi,
    parse_multi,
    per_file_programs,
    resolve_multi,
    section_header,
    split_lines,
)
from cad.training.datasets import MultiEditExample, load_examples, write_jsonl
from cad.training.git_history import history_edits

MOVE_LINES = 5
"""The fewest lines a block must have, copied from a file that no longer holds it into
another, for its commit to count as moving code (a small function)."""
THRESHOLDS = (1, 3, 5, 10, 20)
"""Move sizes, in lines, the forwards are also reported for."""
GRANULARITIES = ("line", "subline")


def build_corpus(repos: list[Path], max_files: int) -> list[MultiEditExample]:
    """The multi-file commits of every repository, ids prefixed with its name."""
    edits = []
    for repo in repos:
        name = repo.parent.name if repo.name in ("repo", ".git") else repo.name
        for edit in history_edits(repo, max_files=max_files):
            if isinstance(edit, MultiEditExample):
                edits.append(MultiEditExample(f"{name}:{edit.id}", edit.instruction, edit.files))
    return edits


def round_trip_failure(edit: MultiEditExample) -> str | None:
    """Why a line or sub-line program (multi-file, or per-file) of ``edit``, printed and
    parsed back, does not give the files after it exactly; ``None`` when all do."""
    before, after = edit.before_files, edit.after_files
    for granularity in GRANULARITIES:
        for build in (oracle_multi, per_file_programs):
            try:
                program = build(before, after, granularity=granularity)
                result = apply_changes(
                    before, resolve_multi(parse_multi(format_multi(program)), before)
                )
            except ValueError as exc:
                return f"{edit.id} ({build.__name__}, {granularity}): {exc}"
            if result != after:
                return f"{edit.id} ({build.__name__}, {granularity}): other files"
    return None


def moved_lines(program: MultiProgram, workspace: Workspace, after: dict[str, str]) -> int:
    """The most lines one cross-file copy of ``program`` moves: copies text that its file
    no longer holds after the edit (or that left with the file, deleted)."""
    most = 0
    for section in program.sections:
        if isinstance(section, DeleteFile):
            continue
        for op in section.ops:
            if not isinstance(op, CopyFrom) or not isinstance(op.copy, CopyLines):
                continue
            if isinstance(section, EditFile) and op.file == section.file:
                continue
            source = workspace.document(op.file)
            text = "".join(source.lines[op.copy.start - 1 : op.copy.end])
            left = after.get(workspace.paths[op.file - 1])
            if left is None or text not in left:
                most = max(most, op.copy.end - op.copy.start + 1)
    return most


class Pricer:
    """Ops, generated tokens, program tokens and replayed forwards of programs (one per
    worker process: the tokenizer and the program token index load once)."""

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        from cad.grammar import ProgramTokenIndex
        from cad.selector.draft_config import load_draft_config

        self.tokenizer = AutoTokenizer.from_pretrained(str(QWEN2_TOKENIZER))
        self.index = ProgramTokenIndex.for_tokenizer(self.tokenizer, len(self.tokenizer))
        self.config = load_draft_config(device="cuda")

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def forwards(self, document: str, ops: tuple[Op, ...]) -> int:
        from cad.selector.decoder import replay_forced

        stats = replay_forced(
            self.index,
            lambda text: self.tokenizer.encode(text, add_special_tokens=False),
            document,
            Program(ops),
            budget=self.config.budget,
            prior=self.config.program,
        )
        return stats.forwards

    def per_file(self, program: MultiProgram, workspace: Workspace) -> dict[str, int]:
        """The edit as one single-file program per written file."""
        totals: Counter[str] = Counter()
        for section in program.sections:
            if isinstance(section, DeleteFile):
                continue
            ops: tuple[Op, ...] = section.ops  # type: ignore[assignment]
            own = workspace.document(section.file).text if isinstance(section, EditFile) else ""
            totals["ops"] += len(ops)
            totals["generated_tokens"] += sum(
                self.count(op.text) for op in ops if isinstance(op, Gen)
            )
            totals["program_tokens"] += self.count(format_program(Program(ops)))
            totals["forwards"] += self.forwards(own, ops)
        return dict(totals)

    def multi(self, program: MultiProgram, workspace: Workspace) -> dict[str, int]:
        """The edit as one multi-file program, replayed over all files joined."""
        joined, offsets = joined_files(workspace)
        totals: Counter[str] = Counter(
            ops=program.op_count, program_tokens=self.count(format_multi(program))
        )
        for section in program.sections:
            tags = section_header(section)
            if isinstance(section, DeleteFile):
                totals["forwards"] += self.count(tags)
                continue
            own = section.file if isinstance(section, EditFile) else None
            closer = "</edit>" if isinstance(section, EditFile) else "</create>"
            ops = tuple(shifted(op, own, offsets) for op in section.ops)
            extra = sum(
                self.count(f' file="{op.file}"') for op in section.ops if isinstance(op, CopyFrom)
            )
            totals["generated_tokens"] += sum(
                self.count(op.text) for op in ops if isinstance(op, Gen)
            )
            totals["forwards"] += self.forwards(joined, ops) + self.count(tags + closer) + extra
        return dict(totals)


def joined_files(workspace: Workspace) -> tuple[str, list[int]]:
    """All files as one document (a file without a final line break gets one, so every
    file starts a line) and the line before each file's first."""
    parts, offsets, lines = [], [], 0
    for document in workspace.documents:
        text = document.text
        if text and not text.endswith(("\n", "\r")):
            text += "\n"
        parts.append(text)
        offsets.append(lines)
        lines += len(split_lines(text))
    return "".join(parts), offsets


def shifted(op: FileOp, own: int | None, offsets: list[int]) -> Op:
    """An op of a section as an op over the joined files."""
    if isinstance(op, Gen):
        return op
    file = op.file if isinstance(op, CopyFrom) else own
    copy = op.copy if isinstance(op, CopyFrom) else op
    assert file is not None
    at = offsets[file - 1]
    if isinstance(copy, CopyLines):
        return CopyLines(copy.start + at, copy.end + at)
    assert isinstance(copy, CopySpan)
    return CopySpan(copy.start_line + at, copy.start_col, copy.end_line + at, copy.end_col)


_PRICER: Pricer | None = None


def _start_worker() -> None:
    global _PRICER
    _PRICER = Pricer()


def measure(edit: MultiEditExample) -> dict[str, object]:
    """One commit: its round trip and, when it moves code, both programs priced."""
    before, after = edit.before_files, edit.after_files
    program = oracle_multi(before, after)
    workspace = Workspace(before)
    row: dict[str, object] = {
        "id": edit.id,
        "files": len(edit.files),
        "failure": round_trip_failure(edit),
        "moved_lines": moved_lines(program, workspace, after),
    }
    if row["moved_lines"]:
        assert _PRICER is not None
        row["multi"] = _PRICER.multi(program, workspace)
        row["per_file"] = _PRICER.per_file(per_file_programs(before, after), workspace)
    return row


def _ratio(moves: list[dict], key: str) -> dict[str, float]:
    """Per-file over multi-file ``key``, pooled over ``moves`` and as the median edit."""
    multi = sum(row["multi"][key] for row in moves)
    per_edit = [row["per_file"][key] / row["multi"][key] for row in moves if row["multi"][key]]
    return {
        "pooled": sum(row["per_file"][key] for row in moves) / multi if multi else 0.0,
        "median": statistics.median(per_edit) if per_edit else 0.0,
    }


def summarize(rows: list[dict]) -> dict[str, object]:
    """Round trips per repository, and the priced move commits pooled and per edit (at
    ``MOVE_LINES``, and the forwards at every size of ``THRESHOLDS``)."""
    repos: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        repo = repos[row["id"].split(":", 1)[0]]
        repo["commits"] += 1
        repo[f"files_{row['files']}"] += 1
        repo["exact"] += row["failure"] is None
    moves = [row for row in rows if row["moved_lines"] >= MOVE_LINES]
    keys = ("ops", "generated_tokens", "program_tokens", "forwards")
    pooled = {
        key: {scheme: sum(row[scheme][key] for row in moves) for scheme in ("multi", "per_file")}
        for key in keys
    }
    by_size = {}
    for lines in THRESHOLDS:
        chosen = [row for row in rows if row["moved_lines"] >= lines]
        by_size[str(lines)] = {"commits": len(chosen), "forwards": _ratio(chosen, "forwards")}
    return {
        "repositories": {name: dict(counts) for name, counts in repos.items()},
        "commits": len(rows),
        "exact": sum(row["failure"] is None for row in rows),
        "failures": [row["failure"] for row in rows if row["failure"]],
        "move_lines": MOVE_LINES,
        "moves": len(moves),
        "pooled": pooled,
        "per_file_over_multi": {key: _ratio(moves, key) for key in keys},
        "forwards_by_move_size": by_size,
    }


def markdown(summary: dict) -> str:
    """The two tables: round trips per repository, and the move commits priced."""
    lines = ["| repository | multi-file commits | 2 / 3 / 4 / 5 / 6 files | exact round trip |"]
    lines.append("| --- | ---: | ---: | ---: |")
    for name, counts in summary["repositories"].items():
        sizes = " / ".join(str(counts.get(f"files_{n}", 0)) for n in range(2, 7))
        lines.append(
            f"| {name} | {counts['commits']} | {sizes} | {counts['exact']}/{counts['commits']} |"
        )
    lines.append(f"| all | {summary['commits']} | | {summary['exact']}/{summary['commits']} |")
    lines += ["", f"Commits moving code ({summary['moves']}: a block of at least "
              f"{summary['move_lines']} lines leaves one file for another), line oracle:", ""]  # fmt: skip
    lines.append("| | multi-file program | per-file programs | per-file / multi (pooled, median) |")
    lines.append("| --- | ---: | ---: | ---: |")
    for key, label in (
        ("ops", "ops"),
        ("generated_tokens", "generated tokens"),
        ("program_tokens", "program tokens"),
        ("forwards", "forwards (replayed)"),
    ):
        pooled, ratio = summary["pooled"][key], summary["per_file_over_multi"][key]
        lines.append(
            f"| {label} | {pooled['multi']:,} | {pooled['per_file']:,} | "
            f"{ratio['pooled']:.2f}× / {ratio['median']:.2f}× |"
        )
    lines += [
        "",
        "| moved block of at least | commits | forwards per-file / multi (pooled, median) |",
    ]
    lines.append("| ---: | ---: | ---: |")
    for size, entry in summary["forwards_by_move_size"].items():
        ratio = entry["forwards"]
        lines.append(
            f"| {size} lines | {entry['commits']} | {ratio['pooled']:.2f}× / {ratio['median']:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def check(corpora: list[Path], workers: int, progress: Callable[[int, int], None]) -> dict:
    """Measure every multi-file edit of the corpora, ``workers`` processes at a time."""
    edits = [e for path in corpora for e in load_examples(path) if isinstance(e, MultiEditExample)]
    rows = []
    with Pool(workers, initializer=_start_worker) as pool:
        for done, row in enumerate(pool.imap_unordered(measure, edits, chunksize=4), 1):
            rows.append(row)
            progress(done, len(edits))
    rows.sort(key=lambda row: row["id"])
    return {"rows": rows, **summarize(rows)}


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.multi_file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    corpus = commands.add_parser("corpus", help="multi-file commits of git repositories")
    corpus.add_argument("repos", nargs="+", type=Path)
    corpus.add_argument("--out", type=Path, required=True)
    corpus.add_argument("--max-files", type=int, default=6)
    checking = commands.add_parser("check", help="round trips and move commits priced")
    checking.add_argument("corpora", nargs="+", type=Path)
    checking.add_argument("--workers", type=int, default=2)
    checking.add_argument("--out-json", type=Path)
    checking.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    if args.command == "corpus":
        edits = build_corpus(args.repos, args.max_files)
        write_jsonl(args.out, edits)
        print(f"wrote {len(edits)} multi-file edits to {args.out}", file=sys.stderr)
        return 0

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            print(f"{done}/{total}", file=sys.stderr, flush=True)

    result = check(args.corpora, args.workers, progress)
    table = markdown(result)
    print(table)
    if args.out_md:
        args.out_md.write_text(table, encoding="utf-8")
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for failure in result["failures"]:
        print(f"round-trip failure: {failure}", file=sys.stderr)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
