"""Per-token mask time and compile time: our DPDA/Earley engines vs XGrammar and llguidance.

All engines run in one process on the same tokenised documents (MaskBench style: for each
token, compute the allowed-token mask, then accept the token; the end-of-sequence mask is
included). Workloads: JSON (the built-in JSON grammar, documents from JSONSchemaBench test
instances), JSON-Schema (JSONSchemaBench schemas with their valid instances, compact, keys
in schema order) and FunQL (GeoQuery-style queries). Usage:

    python -m bench.masks --schemas 30 --docs 20 --out-md docs/masking-table.md
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
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import cad.grammar.cfg as cfg
from cad.grammar.cfg.builtin_grammars import FUNQL, JSON
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.json_schema import schema_to_rules
from cad.grammar.vocab import Vocabulary

DATA = Path(os.environ.get("CAD_JSONSCHEMABENCH", "/work/shared/data/jsonschemabench"))
TOKENIZERS = Path(__file__).parents[1] / "tests" / "fixtures" / "tokenizers"
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


def ordered(value: Any, schema: Any, root: Any) -> Any:
    """Object keys in schema declaration order (what fixed-order engines expect)."""
    while isinstance(schema, dict) and str(schema.get("$ref", "")).startswith("#"):
        target = root
        for part in schema["$ref"][2:].split("/") if schema["$ref"] != "#" else []:
            target = target[part]
        schema = target
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        declared = schema.get("properties", {})
        out = {k: ordered(value[k], declared[k], root) for k in declared if k in value}
        out.update(
            {
                k: ordered(v, schema.get("additionalProperties", {}), root)
                for k, v in value.items()
                if k not in declared
            }
        )
        return out
    if isinstance(value, list):
        return [ordered(v, schema.get("items", {}), root) for v in value]
    return value


def compact(value: Any) -> str:
    """Compact JSON text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def workloads(schemas: int, docs: int) -> dict[str, list[tuple[str, Any, list[str]]]]:
    """(format, grammar source, documents) per workload, deterministic and bounded."""
    records = []
    for path in sorted(glob.glob(str(DATA / "*.json"))):
        name = Path(path).name
        if name.startswith(("BFCL", "JME")):
            record = json.loads(Path(path).read_text())
            valid = [t["data"] for t in record["tests"] if t["valid"]]
            if valid:
                records.append((record["schema"], valid))
    random.Random(0).shuffle(records)
    schema_items = []
    for schema, valid in records:
        try:
            schema_to_rules(schema)
        except GrammarError:
            continue
        schema_items.append(
            ("json-schema", schema, [compact(ordered(v, schema, schema)) for v in valid])
        )
        if len(schema_items) == schemas:
            break
    json_docs = [compact(v) for _, valid in records[:docs] for v in valid[:1]]
    return {
        "JSON": [("ebnf", JSON, json_docs)],
        "JSON-Schema": schema_items,
        "FunQL": [("ebnf", FUNQL, FUNQL_QUERIES[:docs])],
    }


class Runner:
    """One engine behind a uniform compile / fill-mask / accept interface."""

    name: str

    def compile(self, kind: str, source: Any) -> Any:
        raise NotImplementedError

    def run(self, compiled: Any, tokens: list[int], eos: int, times: list[float]) -> bool:
        raise NotImplementedError


class OurRunner(Runner):
    def __init__(self, vocab: Vocabulary, engine: str) -> None:
        self.vocab = vocab
        self.engine = engine
        self.name = f"cad {engine}"
        self.engines_used: dict[str, int] = {}

    def compile(self, kind: str, source: Any) -> Any:
        engine = self.engine if self.engine != "auto" else "auto"
        compiled = cfg.compile(source, self.vocab, format=kind, engine=engine)  # type: ignore[arg-type]
        self.engines_used[compiled.engine] = self.engines_used.get(compiled.engine, 0) + 1
        return compiled

    def run(self, compiled: Any, tokens: list[int], eos: int, times: list[float]) -> bool:
        matcher = compiled.matcher()
        for token in [*tokens, eos]:
            started = time.perf_counter()
            mask = matcher.allowed_tokens()
            times.append(time.perf_counter() - started)
            if not mask[token] or not matcher.accept_token(token):
                return False
        return True


class XGrammarRunner(Runner):
    name = "XGrammar 0.2.8"

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgrammar.allocate_token_bitmask(1, vocab_size)

    def compile(self, kind: str, source: Any) -> Any:
        if kind == "json-schema":
            return self.compiler.compile_json_schema(
                json.dumps(source), any_whitespace=False, separators=(",", ":")
            )
        return self.compiler.compile_grammar(source)

    def run(self, compiled: Any, tokens: list[int], eos: int, times: list[float]) -> bool:
        matcher = self.xgr.GrammarMatcher(compiled)
        for token in [*tokens, eos]:
            started = time.perf_counter()
            matcher.fill_next_token_bitmask(self.bitmask)
            times.append(time.perf_counter() - started)
            if not matcher.accept_token(token):
                return False
        return True


class LlguidanceRunner(Runner):
    name = "llguidance 1.9.1"

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.llg = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self.bitmask = llguidance.numpy.allocate_token_bitmask(1, vocab_size)

    def compile(self, kind: str, source: Any) -> Any:
        if kind == "json-schema":
            grammar = self.llg.LLMatcher.grammar_from_json_schema(
                source, defaults={"whitespace_flexible": False}
            )
        else:
            from llguidance.gbnf_to_lark import gbnf_to_lark

            one_line_rules = re.sub(r"\n\s+\|", " |", source)
            grammar = self.llg.LLMatcher.grammar_from_lark(gbnf_to_lark(one_line_rules))
        matcher = self.llg.LLMatcher(self.tokenizer, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return grammar

    def run(self, compiled: Any, tokens: list[int], eos: int, times: list[float]) -> bool:
        import llguidance.numpy

        matcher = self.llg.LLMatcher(self.tokenizer, compiled)
        for token in [*tokens, eos]:
            started = time.perf_counter()
            llguidance.numpy.fill_next_token_bitmask(matcher, self.bitmask, 0)
            times.append(time.perf_counter() - started)
            if not matcher.consume_token(token):
                return False
        return True


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values`` or NaN."""
    return float(np.percentile(values, q)) if values else float("nan")


def bench(
    runner: Runner,
    items: list[tuple[str, Any, list[str]]],
    encode: Callable[[str], list[int]],
    eos: int,
) -> dict[str, Any]:
    """Compile each grammar, run its documents; timings and failure counts."""
    compile_times: list[float] = []
    mask_times: list[float] = []
    failures = rejected = 0
    for kind, source, documents in items:
        started = time.perf_counter()
        try:
            compiled = runner.compile(kind, source)
        except Exception:
            failures += 1
            continue
        compile_times.append(time.perf_counter() - started)
        for document in documents:
            if not runner.run(compiled, encode(document), eos, mask_times):
                rejected += 1
    return {
        "compile_p50_ms": 1e3 * statistics.median(compile_times) if compile_times else float("nan"),
        "mask_p50_us": 1e6 * percentile(mask_times, 50),
        "mask_p99_ms": 1e3 * percentile(mask_times, 99),
        "masks": len(mask_times),
        "compile_failures": failures,
        "rejected_docs": rejected,
    }


def runners(tokenizer: Any, vocab: Vocabulary) -> Iterator[Runner]:
    """Our engines first, then the peers that import."""
    yield OurRunner(vocab, "auto")
    yield OurRunner(vocab, "earley")
    yield XGrammarRunner(tokenizer, vocab.size)
    yield LlguidanceRunner(tokenizer, vocab.size)


def main() -> None:
    """Run every workload for both tokenizers and write one Markdown table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schemas", type=int, default=30)
    parser.add_argument("--docs", type=int, default=10)
    parser.add_argument("--tokenizers", default="qwen2,llama3")
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    loads = workloads(args.schemas, args.docs)
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "| tokenizer | workload | engine | grammars | masks | mask p50 µs | mask p99 ms | compile p50 ms | compile failures | docs rejected |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tokenizer_name in args.tokenizers.split(","):
        tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / tokenizer_name)
        vocab = Vocabulary.from_tokenizer(tokenizer)
        cfg.compile('root ::= "x"', vocab)

        def encode(text: str, tokenizer: Any = tokenizer) -> list[int]:
            return tokenizer.encode(text, add_special_tokens=False)

        for runner in runners(tokenizer, vocab):
            for workload, items in loads.items():
                row = bench(runner, items, encode, vocab.eos_token_id)
                name = runner.name
                if isinstance(runner, OurRunner) and runner.engine == "auto":
                    name += (
                        " ("
                        + ", ".join(f"{k}×{v}" for k, v in sorted(runner.engines_used.items()))
                        + ")"
                    )
                    runner.engines_used.clear()
                line = (
                    f"| {tokenizer_name} | {workload} | {name} | {len(items)} | {row['masks']} | {row['mask_p50_us']:.1f} "
                    f"| {row['mask_p99_ms']:.2f} | {row['compile_p50_ms']:.2f} | {row['compile_failures']} | {row['rejected_docs']} |"
                )
                lines.append(line)
                print(line, flush=True)
    if args.out_md:
        args.out_md.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
