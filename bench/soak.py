"""Memory of a long-lived process: the Python syntax machine over real files for as long as a
language server runs.

One machine (the one ``cad serve`` shares between edits) steps real Python files as a
syntax-constrained decode does, one document after another: the constraint of the whole file
as an edited region (``SyntaxConstraint.for_region``), then a mask and the token at every
step of the file's tokens, then the whole-file check. The resident set is sampled as it goes.
A bounded machine keeps it flat once warm; one that interns states without bound grows with
every token.

    python -m bench.soak --minutes 60 --files /usr/lib/python3.11 \\
        --out-json bench/results/soak-python-syntax.json --out-md bench/results/soak-python-syntax.md
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.harness import QWEN2_TOKENIZER, machine
from cad.grammar.syntax import SyntaxConstraint, SyntaxMatcher, syntax_machine

PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_FILE_TOKENS = 6000
"""Longer files are left out: a decode edits files a model's context holds."""


def resident_mb() -> float:
    """This process's resident set in MB, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 1e6


@dataclass(frozen=True)
class Sample:
    """The state of the run after ``documents`` documents."""

    seconds: float
    documents: int
    tokens: int
    resident_mb: float
    entries: int
    resets: int


def python_files(root: Path, seed: int) -> Iterator[str]:
    """The parsing Python files under ``root``, in a shuffled order, round after round."""
    paths = sorted(root.rglob("*.py"))
    texts = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
            ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        texts.append(text)
    if not texts:
        raise SystemExit(f"error: no Python file under {root} parses")
    rng = random.Random(seed)
    while True:
        rng.shuffle(texts)
        yield from texts


def soak(root: Path, minutes: float, every: int, seed: int) -> list[Sample]:
    """Step documents through one machine for ``minutes``; a sample every ``every``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(QWEN2_TOKENIZER)
    shared = syntax_machine("python", tokenizer)
    recogniser = shared.syntax
    samples = [Sample(0.0, 0, 0, resident_mb(), recogniser.entries(), recogniser.resets)]
    start = time.monotonic()
    deadline = start + minutes * 60
    documents = tokens = 0
    for text in python_files(root, seed):
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) > MAX_FILE_TOKENS:
            continue
        SyntaxConstraint.for_region(shared, "", text, "")
        matcher = SyntaxMatcher(shared)
        for token in ids:
            shared.packed(matcher.state)
            if not matcher.accept_token(token):
                raise SystemExit("error: a parsing file was refused; the machine is wrong")
        del matcher
        documents += 1
        tokens += len(ids)
        if documents % every == 0:
            samples.append(
                Sample(
                    round(time.monotonic() - start, 1),
                    documents,
                    tokens,
                    round(resident_mb(), 1),
                    recogniser.entries(),
                    recogniser.resets,
                )
            )
        if time.monotonic() >= deadline:
            break
    return samples


def summary(samples: list[Sample], warm_minutes: float) -> dict[str, float]:
    """Resident set after warm-up: its range and the growth over the rest of the run."""
    warm = [s for s in samples if s.seconds >= warm_minutes * 60] or samples[-1:]
    resident = [s.resident_mb for s in warm]
    return {
        "warm_from_s": warm[0].seconds,
        "resident_min_mb": min(resident),
        "resident_median_mb": statistics.median(resident),
        "resident_max_mb": max(resident),
        "growth_after_warm_up_mb": round(warm[-1].resident_mb - warm[0].resident_mb, 1),
        "documents": samples[-1].documents,
        "tokens": samples[-1].tokens,
        "resets": samples[-1].resets,
    }


def markdown(samples: list[Sample], result: dict[str, float], minutes: float) -> str:
    lines = [
        f"Python syntax machine, one process, {minutes:g} minutes: "
        f"{result['documents']:,} documents, {result['tokens']:,} tokens, "
        f"{result['resets']} resets of interned states ({machine()}).",
        "",
        "| minutes | documents | tokens | resident MB | interned entries |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    step = max(1, len(samples) // 12)
    for sample in [*samples[::step], samples[-1]]:
        lines.append(
            f"| {sample.seconds / 60:.1f} | {sample.documents:,} | {sample.tokens:,} | "
            f"{sample.resident_mb:.0f} | {sample.entries:,} |"
        )
    lines += [
        "",
        f"After warm-up ({result['warm_from_s'] / 60:.0f} min): resident "
        f"{result['resident_min_mb']:.0f}–{result['resident_max_mb']:.0f} MB (median "
        f"{result['resident_median_mb']:.0f}), growth {result['growth_after_warm_up_mb']:+.0f} MB.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=Path, required=True, help="Folder of Python files.")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--warm-minutes", type=float, default=5.0)
    parser.add_argument("--every", type=int, default=25, help="Documents between samples.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args()
    samples = soak(args.files, args.minutes, args.every, args.seed)
    result = summary(samples, args.warm_minutes)
    report = markdown(samples, result, args.minutes)
    print(report, end="")
    if args.out_json:
        payload = {"summary": result, "samples": [asdict(s) for s in samples]}
        args.out_json.write_text(json.dumps(payload, indent=1) + "\n")
    if args.out_md:
        args.out_md.write_text(report)


if __name__ == "__main__":
    main()
