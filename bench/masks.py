"""Per-token mask time and compile time: the native masking core against XGrammar and llguidance.

Every engine runs in one process on the SAME token streams (MaskBench style: per token, fill
the packed bitmask, then accept the token; the end-of-sequence mask is included), interleaved
grammar by grammar with the engine order rotated, so that noise from other jobs hits every
engine alike. Each grammar starts cold (fresh compile, empty caches): first visits to a state
are in the numbers. ``cad`` compiles with its precompute worker (it builds masks in the
background while the first document runs); ``--engines cad,cad-lazy`` adds cad without it,
and ``cad-ready`` adds cad decoding only once its worker has finished (as a decode does when
the model's forwards between two masks give the worker time; the wait is in no figure, and its
compile, the same call as ``cad``'s, is not timed: it mostly follows ``cad``'s compile of the
same schema, whose memoised translation pieces it would reuse).
Workloads, for each tokenizer:

* JSON-Schema (compact) and JSON-Schema (pretty): JSONSchemaBench schemas with their valid
  instances written compactly, and as ``json.dumps(x, indent=2)`` (keys in schema order).
  Peers get their compact settings for the first and flexible whitespace for the second; a
  schema a front end refuses, or an instance it rejects, is counted, never fatal.
* JSON: each engine's own JSON grammar (ours: the built-in EBNF; XGrammar: its built-in JSON
  grammar; llguidance: the empty schema) on compact and pretty instances.
* FunQL: the built-in FunQL grammar (the same text for every engine) and GeoQuery queries.
* Program FSM: the oracle programs of real edits fed token by token to a fresh program
  matcher for the document (ours only: the peers have no document-bounded program language),
  plus the program token index built cold and loaded from the on-disk cache.

Usage (the integrator's full tables; a few minutes per tokenizer):

    python -m bench.masks --schemas 40 --docs 10 --edits heval-python --reference \\
        --out bench/results/masks

writes ``masks.md`` (table), ``masks.json`` (all numbers) and ``masks.png`` (plot). Small run:
``python -m bench.masks --schemas 5 --docs 3 --program-edits 5``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA = next(
    (
        folder / "shared" / "data"
        for folder in REPOSITORY.parents
        if (folder / "shared" / "data").is_dir()
    ),
    REPOSITORY.parent / "shared" / "data",
)
"""``shared/data`` beside the repository (or beside a folder holding it, for a worktree)."""
TOKENIZERS = REPOSITORY / "tests" / "fixtures" / "tokenizers"
FUNQL_QUERIES = [
    "answer(count(state(loc_2(countryid('usa')))))",
    "answer(population_1(cityid('austin','tx')))",
    "answer(largest(state(all)))",
    "answer(exclude(river(all),traverse_2(stateid('texas'))))",
    "answer(highest(mountain(loc_2(stateid('alaska')))))",
    "answer(capital(loc_1(largest(city(all)))))",
    "answer(intersection(state(next_to_2(stateid('utah'))),state(traverse_1(riverid('colorado')))))",
    "answer(len(longest(river(loc_2(countryid('usa'))))))",
    "answer(count(city(loc_2(stateid('new york')))))",
    "answer(smallest(density_1(state(all))))",
]


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}
clock = time.perf_counter
"""Wall time by default; ``--clock thread`` counts this thread's CPU time only, which keeps
comparisons meaningful on a busy machine (the published tables use wall time, measured alone)."""


@dataclass
class Item:
    """One grammar of a workload and the documents run through it."""

    kind: str  # "json-schema", "ebnf" or "json"
    source: Any
    documents: list[str]
    pretty: bool = False


@dataclass
class Row:
    """What one engine measured on one workload."""

    masks: list[float] = field(default_factory=list)
    compiles: list[float] = field(default_factory=list)
    by_grammar: list[float | None] = field(default_factory=list)
    """Each grammar's compile time, None where it failed (timed engines only)."""
    common: list[float] = field(default_factory=list)
    """Compile times of the grammars every timed engine compiled."""
    grammars: int = 0
    compile_failures: int = 0
    documents: int = 0
    rejected: int = 0

    def summary(self) -> dict[str, Any]:
        """Percentiles in microseconds (masks) and milliseconds (compile)."""
        masks = np.array(self.masks) * 1e6
        return {
            "grammars": self.grammars,
            "compile_failures": self.compile_failures,
            "documents": self.documents,
            "rejected": self.rejected,
            "masks": len(self.masks),
            "mask_p50_us": float(np.percentile(masks, 50)) if len(masks) else float("nan"),
            "mask_p90_us": float(np.percentile(masks, 90)) if len(masks) else float("nan"),
            "mask_p99_us": float(np.percentile(masks, 99)) if len(masks) else float("nan"),
            "compile_p50_ms": 1e3 * statistics.median(self.compiles)
            if self.compiles
            else float("nan"),
            "compile_common_p50_ms": 1e3 * statistics.median(self.common)
            if self.common
            else float("nan"),
        }


def in_schema_order(value: Any, schema: Any, root: Any) -> Any:
    """``value`` with object keys in the order the schema declares them (declared first)."""
    while isinstance(schema, dict) and str(schema.get("$ref", "")).startswith("#"):
        target = root
        for part in schema["$ref"][2:].split("/") if schema["$ref"] != "#" else []:
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = target
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        declared = schema.get("properties", {})
        if not isinstance(declared, dict):
            declared = {}
        extra = schema.get("additionalProperties", {})
        out = {k: in_schema_order(value[k], declared[k], root) for k in declared if k in value}
        out.update({k: in_schema_order(v, extra, root) for k, v in value.items() if k not in out})
        return out
    if isinstance(value, list):
        return [in_schema_order(v, schema.get("items", {}), root) for v in value]
    return value


def compact(value: Any) -> str:
    """Compact JSON text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def pretty(value: Any) -> str:
    """JSON as people's files look: ``json.dumps(value, indent=2)``."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def schema_records(
    folder: Path, count: int, offset: int = 0
) -> list[tuple[dict[str, Any], list[Any]]]:
    """``count`` JSONSchemaBench schemas (a fixed shuffle of every file) with valid instances,
    after skipping the first ``offset`` such schemas: ``offset=count`` gives a second set of
    the same shuffle, disjoint from the first, for checking on schemas the first never saw."""
    paths = sorted(glob.glob(str(folder / "*.json")))
    if not paths:
        raise SystemExit(f"error: no JSONSchemaBench files in {folder}; pass --data")
    random.Random(0).shuffle(paths)
    records = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        valid = [test["data"] for test in record["tests"] if test["valid"]]
        if valid and isinstance(record["schema"], dict):
            records.append((record["schema"], valid))
        if len(records) == offset + count:
            break
    return records[offset:]


def workloads(data: Path, schemas: int, docs: int, schema_offset: int = 0) -> dict[str, list[Item]]:
    """The grammar workloads (the program FSM is separate), deterministic and bounded."""
    from cad.grammar.cfg.builtin_grammars import FUNQL, JSON

    records = schema_records(data / "jsonschemabench", schemas, schema_offset)
    ordered = [(s, [in_schema_order(v, s, s) for v in valid]) for s, valid in records]
    instances = [valid[0] for _, valid in ordered[:docs]]
    return {
        "JSON-Schema compact": [
            Item("json-schema", s, [compact(v) for v in valid]) for s, valid in ordered
        ],
        "JSON-Schema pretty": [
            Item("json-schema", s, [pretty(v) for v in valid], pretty=True) for s, valid in ordered
        ],
        "JSON": [
            Item("json", JSON, [compact(v) for v in instances] + [pretty(v) for v in instances])
        ],
        "FunQL": [Item("ebnf", FUNQL, FUNQL_QUERIES[: max(docs, 1)])],
    }


class Runner:
    """One engine behind a uniform compile / (fill, accept)* interface."""

    name: str
    times_compile = True
    """Whether its compile time is a figure of its own: not for a runner whose compile repeats
    another runner's on the same schema right after it, reusing what that one memoised."""

    def compile(self, item: Item) -> Any:
        raise NotImplementedError

    def run(self, compiled: Any, tokens: list[int], times: list[float]) -> bool:
        raise NotImplementedError


class CadRunner(Runner):
    """Our engines: the native core, with or without its precompute worker, or the Python
    reference (``backend="python"``). ``ready``: each grammar's documents run only once its
    worker has finished."""

    def __init__(
        self, vocabulary: Any, backend: str, precompute: bool = True, ready: bool = False
    ) -> None:
        from cad.grammar import allocate_token_bitmask

        self.vocabulary = vocabulary
        self.backend = backend
        self.precompute = precompute
        self.ready = ready
        self.name = "cad python" if backend == "python" else "cad native"
        if backend == "native" and not precompute:
            self.name = "cad native, lazy"
        if ready:
            self.name = "cad native, masks built"
            self.times_compile = False
        self.bitmask = allocate_token_bitmask(1, vocabulary.size)
        self.engines: dict[str, int] = {}

    def compile(self, item: Item) -> Any:
        from cad.grammar import compile

        kind = "ebnf" if item.kind == "json" else item.kind
        compiled = compile(
            item.source,
            self.vocabulary,
            format=kind,  # type: ignore[arg-type]
            backend=self.backend,  # type: ignore[arg-type]
            precompute=self.precompute,
        )
        self.engines[compiled.engine] = self.engines.get(compiled.engine, 0) + 1
        return compiled

    def run(self, compiled: Any, tokens: list[int], times: list[float]) -> bool:
        while self.ready and compiled.mask_stats()["worker_running"]:
            time.sleep(0.001)
        matcher = compiled.matcher()
        bitmask = self.bitmask
        for token in tokens:
            started = clock()
            matcher.fill_next_token_bitmask(bitmask)
            times.append(clock() - started)
            if not matcher.accept_token(token):
                return False
        return True


class XGrammarRunner(Runner):
    name = "XGrammar 0.2.8"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=[eos]
        )
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgrammar.allocate_token_bitmask(1, vocab_size)

    def compile(self, item: Item) -> Any:
        if item.kind == "json-schema":
            if item.pretty:
                return self.compiler.compile_json_schema(
                    json.dumps(item.source), any_whitespace=True
                )
            return self.compiler.compile_json_schema(
                json.dumps(item.source), any_whitespace=False, separators=(",", ":")
            )
        if item.kind == "json":
            return self.compiler.compile_builtin_json_grammar()
        return self.compiler.compile_grammar(item.source)

    def run(self, compiled: Any, tokens: list[int], times: list[float]) -> bool:
        matcher = self.xgr.GrammarMatcher(compiled)
        for token in tokens:
            started = clock()
            matcher.fill_next_token_bitmask(self.bitmask)
            times.append(clock() - started)
            if not matcher.accept_token(token):
                return False
        return True


class LlguidanceRunner(Runner):
    name = "llguidance 1.9.1"

    def __init__(self, tokenizer: Any, vocab_size: int, eos: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.llg = llguidance
        self.fill = llguidance.numpy.fill_next_token_bitmask
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=eos)
        self.bitmask = llguidance.numpy.allocate_token_bitmask(1, vocab_size)

    def compile(self, item: Item) -> Any:
        matcher_class = self.llg.LLMatcher
        if item.kind == "json-schema":
            grammar = matcher_class.grammar_from_json_schema(
                item.source, defaults={"whitespace_flexible": item.pretty}
            )
        elif item.kind == "json":
            grammar = matcher_class.grammar_from_json_schema(
                {}, defaults={"whitespace_flexible": True}
            )
        else:
            from llguidance.gbnf_to_lark import gbnf_to_lark

            grammar = matcher_class.grammar_from_lark(
                gbnf_to_lark(re.sub(r"\n\s+\|", " |", item.source))
            )
        matcher = matcher_class(self.tokenizer, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return grammar

    def run(self, compiled: Any, tokens: list[int], times: list[float]) -> bool:
        matcher = self.llg.LLMatcher(self.tokenizer, compiled)
        for token in tokens:
            started = clock()
            self.fill(matcher, self.bitmask, 0)
            times.append(clock() - started)
            if not matcher.consume_token(token):
                return False
        return True


def bench_grammars(
    runners: list[Runner], items: list[Item], encode: Callable[[str], list[int]], eos: int
) -> dict[str, Row]:
    """Compile each grammar with every engine (order rotated) and run its documents."""
    rows = {runner.name: Row() for runner in runners}
    for index, item in enumerate(items):
        streams = [[*encode(document), eos] for document in item.documents]
        shift = index % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            row = rows[runner.name]
            row.grammars += 1
            row.documents += len(streams)
            started = clock()
            try:
                compiled = runner.compile(item)
            except Exception:
                row.compile_failures += 1
                row.rejected += len(streams)
                if runner.times_compile:
                    row.by_grammar.append(None)
                continue
            if runner.times_compile:
                row.compiles.append(clock() - started)
                row.by_grammar.append(row.compiles[-1])
            for stream in streams:
                try:
                    accepted = runner.run(compiled, stream, row.masks)
                except Exception:
                    accepted = False
                row.rejected += not accepted
            del compiled  # a grammar's precompute worker stops with it, before the next engine
    timed = [rows[runner.name] for runner in runners if runner.times_compile]
    for row in timed:
        row.common = [
            seconds
            for index, seconds in enumerate(row.by_grammar)
            if seconds is not None and all(other.by_grammar[index] is not None for other in timed)
        ]
    return rows


def program_streams(
    edits: str, count: int, encode: Callable[[str], list[int]]
) -> list[tuple[list[int], list[int]]]:
    """(line widths, token stream of the oracle program, op by op) for ``count`` edits."""
    from cad.resolver import Document, format, oracle
    from cad.training.datasets import load_edits

    streams = []
    for example in load_edits(edits)[:count]:
        text = format(oracle(example.before, example.after, granularity="line"))
        chunks = [op + "\n" for op in text.split("\n")[:-1]] + ["</program>"]
        tokens = [token for chunk in chunks for token in encode(chunk)]
        streams.append(([len(line) for line in Document(example.before).lines], tokens))
    return streams


def bench_program(vocabulary: Any, streams: list, eos: int, reference: bool) -> dict[str, Row]:
    """Fill and accept every token of every program with a fresh matcher per document."""
    from cad.grammar import ProgramMatcher, ProgramTokenIndex, allocate_token_bitmask
    from cad.grammar.program_fsm import ReferenceProgramMatcher
    from cad.grammar.program_index import ReferenceProgramIndex

    makers: dict[str, Callable[[list[int]], Any]] = {}
    native_index = ProgramTokenIndex.for_vocabulary(vocabulary)
    makers["cad native"] = lambda widths: ProgramMatcher(native_index, widths)
    if reference:
        reference_index = ReferenceProgramIndex.build(vocabulary)
        makers["cad python"] = lambda widths: ReferenceProgramMatcher(reference_index, widths)
    bitmask = allocate_token_bitmask(1, vocabulary.size)
    rows = {name: Row(grammars=len(streams)) for name in makers}
    for index, (widths, tokens) in enumerate(streams):
        names = list(makers)
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            row = rows[name]
            matcher = makers[name](widths)
            row.documents += 1
            for token in [*tokens, eos]:
                started = clock()
                matcher.fill_next_token_bitmask(bitmask)
                row.masks.append(clock() - started)
                if not matcher.accept_token(token):
                    row.rejected += 1
                    break
    return rows


def index_times(vocabulary: Any, repeats: int = 3) -> dict[str, float]:
    """Seconds to build the program token index (cold) and to load it from the on-disk cache
    (warm), medians of ``repeats``; the vocabulary's own tables are built beforehand."""
    from cad.grammar import ProgramTokenIndex

    vocabulary.native_trie  # noqa: B018  (built once per vocabulary, not part of either time)
    cold, warm = [], []
    for _ in range(repeats):
        started = clock()
        ProgramTokenIndex.for_vocabulary(vocabulary, use_cache=False)
        cold.append(clock() - started)
        ProgramTokenIndex.for_vocabulary(vocabulary)
        started = clock()
        loaded = ProgramTokenIndex.for_vocabulary(vocabulary)
        warm.append(clock() - started)
        assert loaded.loaded_from_cache
    return {
        "index_cold_ms": 1e3 * statistics.median(cold),
        "index_warm_ms": 1e3 * statistics.median(warm),
    }


STATISTICS = (
    "mask_p50_us",
    "mask_p90_us",
    "mask_p99_us",
    "compile_p50_ms",
    "compile_common_p50_ms",
)


def over_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary per workload and engine from several runs: the median of each statistic,
    the p99's range, and the counts (equal in every run)."""
    combined: dict[str, Any] = {}
    for workload, per_engine in runs[0].items():
        combined[workload] = {}
        for engine, first in per_engine.items():
            rows = [run[workload][engine] for run in runs]
            row = dict(first)
            for key in STATISTICS:
                row[key] = float(np.median([r[key] for r in rows]))
            row["mask_p99_us_range"] = [min(r["mask_p99_us"] for r in rows),
                                        max(r["mask_p99_us"] for r in rows)]  # fmt: skip
            row["runs"] = rows
            combined[workload][engine] = row
    return combined


def markdown(results: dict[str, Any]) -> str:
    """The table of every tokenizer, workload and engine."""
    runs = results.get("runs", 1)
    lines = [
        f"Machine: {results['machine']}. Masks: µs per token (fill of the packed bitmask); "
        f"compile: ms per grammar; median of {runs} cold run{'s' if runs > 1 else ''} "
        "(p99: its range over runs). Compile p50 over the grammars each engine compiled, and "
        "over those every engine timed compiled (an engine that refuses the hardest grammars "
        "has a lower median of its own).",
        "",
        "| tokenizer | workload | engine | grammars | masks | mask p50 µs | mask p90 µs | "
        "mask p99 µs | compile p50 ms | compile p50 ms, all compiled | compile failures | "
        "docs rejected |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for tokenizer, per_workload in results["tokenizers"].items():
        for workload, per_engine in per_workload["workloads"].items():
            for engine, row in per_engine.items():
                low, high = row.get("mask_p99_us_range", [row["mask_p99_us"]] * 2)
                spread = f" ({low:.0f}–{high:.0f})" if runs > 1 else ""
                lines.append(
                    f"| {tokenizer} | {workload} | {engine} | {row['grammars']} | {row['masks']} "
                    f"| {row['mask_p50_us']:.2f} | {row['mask_p90_us']:.2f} | "
                    f"{row['mask_p99_us']:.2f}{spread} | {row['compile_p50_ms']:.2f} | "
                    f"{row.get('compile_common_p50_ms', float('nan')):.2f} | "
                    f"{row['compile_failures']} | {row['rejected']} of {row['documents']} |"
                )
    lines.append("")
    for tokenizer, per_workload in results["tokenizers"].items():
        index = per_workload["program_index"]
        lines.append(
            f"Program token index ({tokenizer}): built cold in {index['index_cold_ms']:.1f} ms, "
            f"loaded from the on-disk cache in {index['index_warm_ms']:.1f} ms."
        )
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    """Mask p50 (bar) and p99 (marker) per workload and engine, one panel per tokenizer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokenizers = list(results["tokenizers"])
    figure, axes = plt.subplots(
        1, len(tokenizers), figsize=(7 * len(tokenizers), 4.5), squeeze=False
    )
    for axis, tokenizer in zip(axes[0], tokenizers, strict=True):
        per_workload = results["tokenizers"][tokenizer]["workloads"]
        workload_names = list(per_workload)
        engines = sorted({engine for rows in per_workload.values() for engine in rows})
        width = 0.8 / max(len(engines), 1)
        for offset, engine in enumerate(engines):
            xs, p50, p99 = [], [], []
            for position, workload in enumerate(workload_names):
                row = per_workload[workload].get(engine)
                if row and row["masks"]:
                    xs.append(position + offset * width)
                    p50.append(row["mask_p50_us"])
                    p99.append(row["mask_p99_us"])
            bars = axis.bar(xs, p50, width, label=f"{engine} p50")
            axis.scatter(
                xs, p99, marker="v", color=bars.patches[0].get_facecolor() if bars.patches else None
            )
        axis.set_yscale("log")
        axis.set_xticks([p + 0.4 - width / 2 for p in range(len(workload_names))])
        axis.set_xticklabels(workload_names, rotation=20, ha="right", fontsize=8)
        axis.set_ylabel("µs per mask (bar: p50, ▼: p99)")
        axis.set_title(tokenizer)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    """Run every workload for each tokenizer; write the table, the JSON and the plot."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.masks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="holds jsonschemabench/")
    parser.add_argument("--schemas", type=int, default=40)
    parser.add_argument(
        "--schema-offset",
        type=int,
        default=0,
        help="skip the first N schemas of the shuffle: --schema-offset 40 --schemas 40 is the "
        "second set, 40 schemas the default run never uses",
    )
    parser.add_argument("--docs", type=int, default=10, help="JSON instances and FunQL queries")
    parser.add_argument(
        "--edits",
        default="heval-python",
        help="edit corpus: heval-python, heval-js or a JSONL file",
    )
    parser.add_argument("--program-edits", type=int, default=30)
    parser.add_argument("--tokenizers", default="qwen2,llama3")
    parser.add_argument(
        "--engines",
        default="cad,xgrammar,llguidance",
        help="of cad, cad-lazy (cad without its precompute worker, on a vocabulary of its own), "
        "cad-ready (cad decoding once its worker has finished, on a vocabulary of its own), "
        "xgrammar, llguidance",
    )
    parser.add_argument(
        "--reference", action="store_true", help="also run the Python reference engines"
    )
    parser.add_argument("--out", type=Path, help="write OUT.md, OUT.json and OUT.png")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="repeat everything, each run cold (fresh vocabulary tables, the schema front end's "
        "memoised pieces forgotten); the table gives the "
        "median of each statistic over runs and the p99's range",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.schema_offset < 0:
        parser.error("--schema-offset must not be negative")
    global clock
    clock = CLOCKS[args.clock]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from cad.grammar import Vocabulary
    from cad.grammar.cfg.json_schema import clear_memoised

    if not (args.data / "jsonschemabench").is_dir():
        print(
            f"error: {args.data / 'jsonschemabench'} does not exist; pass --data", file=sys.stderr
        )
        return 1
    loads = workloads(args.data, args.schemas, args.docs, args.schema_offset)
    wanted = set(args.engines.split(","))
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": " ".join(sys.argv),
        "clock": args.clock,
        "runs": args.runs,
        "tokenizers": {},
    }
    for tokenizer_name in args.tokenizers.split(","):
        tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / tokenizer_name)

        def encode(text: str, tokenizer: Any = tokenizer) -> list[int]:
            return tokenizer.encode(text, add_special_tokens=False)

        runs: list[dict[str, Any]] = []
        for run in range(args.runs):
            clear_memoised()  # each run translates every schema as a new process would
            vocabulary = Vocabulary.from_tokenizer(tokenizer)
            eos = vocabulary.eos_token_id
            runners: list[Runner] = []
            if "cad" in wanted:
                runners.append(CadRunner(vocabulary, "native"))
            if "cad-lazy" in wanted:
                lazy_vocabulary = Vocabulary.from_tokenizer(tokenizer)
                runners.append(CadRunner(lazy_vocabulary, "native", precompute=False))
            if "cad-ready" in wanted:
                ready_vocabulary = Vocabulary.from_tokenizer(tokenizer)
                runners.append(CadRunner(ready_vocabulary, "native", ready=True))
            if args.reference:
                runners.append(CadRunner(vocabulary, "python"))
            if "xgrammar" in wanted:
                runners.append(XGrammarRunner(tokenizer, vocabulary.size, eos))
            if "llguidance" in wanted:
                runners.append(LlguidanceRunner(tokenizer, vocabulary.size, eos))
            per_workload: dict[str, Any] = {}
            for workload, items in loads.items():
                rows = bench_grammars(runners, items, encode, eos)
                per_workload[workload] = {name: row.summary() for name, row in rows.items()}
                print(f"{tokenizer_name} run {run + 1} {workload}: done", file=sys.stderr,
                      flush=True)  # fmt: skip
            streams = program_streams(args.edits, args.program_edits, encode)
            rows = bench_program(vocabulary, streams, eos, args.reference)
            per_workload["Program FSM"] = {name: row.summary() for name, row in rows.items()}
            runs.append(per_workload)
        results["tokenizers"][tokenizer_name] = {
            "workloads": over_runs(runs),
            "program_index": index_times(vocabulary),
        }
    table = markdown(results)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(table)
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
        plot(results, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
