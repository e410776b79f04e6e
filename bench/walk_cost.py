"""The cost of the mask walk's hot loop per trie node.

Each walk is a grammar's first mask at its initial state, freshly compiled without the
precompute worker, on a grammar that no shared cache (string slice, region cache) can serve:
a bounded run of printable ASCII longer than a region holds, so the walk steps most of the
trie with a new configuration at every depth. The thread's CPU time of the fill divided by
the trie nodes it stepped (``cad.grammar._native.trie_nodes_stepped``) is the time per node,
including what a first visit does around the walk; cycles are that time times the clock.

Usage: ``python -m bench.walk_cost --tokenizer qwen2 --walks 20``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

GRAMMAR = 'root ::= [ -~]{0,100} "\\n"'
"""Printable ASCII up to 100 characters: more configurations than a region holds."""


def nominal_ghz() -> float | None:
    """The clock ``/proc/cpuinfo`` reports for the first core, in GHz (None elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) / 1000
    except OSError:
        return None
    return None


def walk_costs(vocabulary: object, walks: int) -> list[tuple[int, int]]:
    """(CPU nanoseconds, trie nodes stepped) of ``walks`` first masks, each on a fresh compile."""
    from cad.grammar import _native, allocate_token_bitmask
    from cad.grammar.cfg import compile

    bitmask = allocate_token_bitmask(1, vocabulary.size)  # type: ignore[attr-defined]
    costs = []
    for _ in range(walks):
        matcher = compile(GRAMMAR, vocabulary, format="ebnf", precompute=False).matcher()
        nodes = _native.trie_nodes_stepped()
        started = time.thread_time_ns()
        matcher.fill_next_token_bitmask(bitmask)
        elapsed = time.thread_time_ns() - started
        costs.append((elapsed, _native.trie_nodes_stepped() - nodes))
    return costs


def main(argv: list[str] | None = None) -> int:
    """Print the nodes per walk and the time (and cycles) per node: fastest and median."""
    parser = argparse.ArgumentParser(prog="python -m bench.walk_cost", description=__doc__)
    parser.add_argument("--tokenizer", default="qwen2", help="a fixture tokenizer's folder")
    parser.add_argument("--walks", type=int, default=20)
    parser.add_argument("--ghz", type=float, default=nominal_ghz(), help="clock for cycles")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from bench.masks import TOKENIZERS
    from cad.grammar import Vocabulary

    vocabulary = Vocabulary.from_tokenizer(
        AutoTokenizer.from_pretrained(TOKENIZERS / args.tokenizer)
    )
    costs = walk_costs(vocabulary, args.walks)
    per_node = sorted(elapsed / nodes for elapsed, nodes in costs)
    fastest, median = per_node[0], statistics.median(per_node)
    print(
        f"{args.tokenizer}: {costs[0][1]} of {vocabulary.native_trie.node_count} trie nodes "
        f"per walk; ns per node: fastest {fastest:.2f}, median {median:.2f}"
    )
    if args.ghz:
        print(
            f"cycles per node at {args.ghz:.2f} GHz: fastest {fastest * args.ghz:.1f}, "
            f"median {median * args.ghz:.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
