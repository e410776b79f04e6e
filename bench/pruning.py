"""Earley state size with and without dependency-based pruning on long inputs.

Reports, per input: live Earley items at the end and at most, the peak Python heap while
parsing (tracemalloc) and the parse time, for the pruned engine and for the same engine
keeping every set. Usage: ``python -m bench.pruning [--scale N] [--out-md PATH]``."""

from __future__ import annotations

import argparse
import json
import random
import time
import tracemalloc
from pathlib import Path

from cad.grammar.cfg.builtin_grammars import ARITHMETIC, FUNQL, JSON
from cad.grammar.cfg.earley import EarleyAutomaton
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.grammar_ir import lower
from cad.grammar.cfg.transforms import simplify


def long_inputs(scale: int) -> dict[str, tuple[str, bytes]]:
    """Deterministic long sentences of the built-in grammars (``scale`` sets the length)."""
    rng = random.Random(0)
    records = [
        {
            "id": i,
            "name": f"item {i}",
            "tags": ["a", "b"][: i % 3],
            "price": i * 1.25,
            "ok": i % 2 == 0,
        }
        for i in range(20 * scale)
    ]
    document = json.dumps({"items": records, "meta": {"count": len(records)}}).encode()
    expression = "+".join(
        f"({rng.randint(1, 99)}*{rng.randint(1, 99)}-{rng.randint(1, 9)})"
        for _ in range(60 * scale)
    )
    query = "answer(count(state(loc_2(countryid('usa')))))"
    for _ in range(4 * scale):
        query = f"answer(exclude({query[7:-1]},state(next_to_2(stateid('texas')))))"
    return {
        "json": (JSON, document),
        "arithmetic": (ARITHMETIC, expression.encode()),
        "funql": (FUNQL, query.encode()),
    }


def measure(grammar_text: str, data: bytes, prune: bool) -> dict[str, float]:
    """Parse ``data`` byte by byte; live items, peak heap and time."""
    grammar = simplify(lower(parse_ebnf(grammar_text)))
    tracemalloc.start()
    started = time.perf_counter()
    automaton = EarleyAutomaton(grammar, prune=prune)
    config = automaton.initial()
    most = 0
    for byte in data:
        config = automaton.step(config, byte)
        if config < 0:
            raise ValueError("benchmark input is not in the language")
        most = max(most, automaton.live_items(config))
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert automaton.is_accepting(config)
    return {
        "final": automaton.live_items(config),
        "max": most,
        "peak_mb": peak / 2**20,
        "seconds": elapsed,
    }


def main() -> None:
    """Run the measurement and print (and optionally write) a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=int, default=4)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args()
    lines = [
        "| input | bytes | pruning | live items (end) | live items (max) | peak heap MB | parse s |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for name, (text, data) in long_inputs(args.scale).items():
        for prune in (True, False):
            row = measure(text, data, prune)
            lines.append(
                f"| {name} | {len(data)} | {'on' if prune else 'off'} | {row['final']} | {row['max']} "
                f"| {row['peak_mb']:.1f} | {row['seconds']:.2f} |"
            )
    table = "\n".join(lines)
    print(table)
    if args.out_md:
        args.out_md.write_text(table + "\n")


if __name__ == "__main__":
    main()
