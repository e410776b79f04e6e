"""JSON Schema coverage: our front end against XGrammar and llguidance on the same files.

For every JSONSchemaBench record (``{schema, tests: [{valid, data}]}``) and every engine:
does the schema compile; is each valid instance accepted written three ways (compact
``json.dumps(x, separators=(",", ":"))``, ordinary ``json.dumps(x)``, pretty-printed
``json.dumps(x, indent=2)``); is each invalid instance (ordinary spelling) rejected. Object
keys are put in the order the grammars write them (``in_grammar_order``; XGrammar and
llguidance use the same declared-properties-first order), the same text for every engine.

Acceptance is checked without tokens (ours: ``CompiledGrammar.accepts``; XGrammar:
``accept_string``; llguidance: a byte-level tokenizer), and on a sample also token by token
with the real tokenizer, to confirm the two agree. Counts are deterministic; the compile
times printed beside them are not (run alone on a quiet machine for those).

    python -m bench.schema_coverage --limit 60                # small, ~1 minute
    python -m bench.schema_coverage --out-md docs/schema-coverage-table.md   # all 1,006 files
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(os.environ.get("CAD_JSONSCHEMABENCH", "/work/shared/data/jsonschemabench"))
TOKENIZERS = Path(__file__).parents[1] / "tests" / "fixtures" / "tokenizers"
SPELLINGS = ("compact", "ordinary", "pretty")


def spell(value: Any, spelling: str) -> str:
    """The JSON text of ``value`` in one of ``SPELLINGS``."""
    if spelling == "compact":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if spelling == "ordinary":
        return json.dumps(value)
    return json.dumps(value, indent=2)


def load_records(limit: int | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, record) for every file, or a deterministic sample of ``limit`` of them."""
    paths = sorted(glob.glob(str(DATA / "*.json")))
    if limit is not None and limit < len(paths):
        paths = sorted(random.Random(0).sample(paths, limit))
    return [(Path(p).stem, json.loads(Path(p).read_text())) for p in paths]


class Engine:
    """One engine configuration: compile a schema, check texts."""

    name: str

    def compile(self, schema: dict[str, Any]) -> Any:
        raise NotImplementedError

    def accepts(self, compiled: Any, text: str) -> bool:
        raise NotImplementedError

    def token_accepts(self, compiled: Any, text: str) -> bool:
        raise NotImplementedError


class Ours(Engine):
    def __init__(self, tokenizer: Any, vocab: Any, *, ignore_unsupported: bool) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.ignore = ignore_unsupported
        self.name = "cad" + (" --ignore-unsupported" if ignore_unsupported else "")
        self.engines: Counter[str] = Counter()

    def compile(self, schema: dict[str, Any]) -> Any:
        from cad.grammar import compile

        compiled = compile(schema, self.vocab, format="json-schema", ignore_unsupported=self.ignore)
        self.engines[compiled.engine] += 1
        return compiled

    def accepts(self, compiled: Any, text: str) -> bool:
        return bool(compiled.accepts(text.encode("utf-8")))

    def token_accepts(self, compiled: Any, text: str) -> bool:
        matcher = compiled.matcher()
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return all(matcher.accept_token(t) for t in ids) and matcher.accept_token(
            self.vocab.eos_token_id
        )


class XGrammar(Engine):
    name = "XGrammar 0.2.8"

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.encode = tokenizer
        self.eos = tokenizer.eos_token_id

    def compile(self, schema: dict[str, Any]) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True)

    def accepts(self, compiled: Any, text: str) -> bool:
        matcher = self.xgr.GrammarMatcher(compiled)
        return bool(matcher.accept_string(text) and matcher.is_completed())

    def token_accepts(self, compiled: Any, text: str) -> bool:
        matcher = self.xgr.GrammarMatcher(compiled)
        ids = self.encode.encode(text, add_special_tokens=False)
        return all(matcher.accept_token(t) for t in ids) and matcher.accept_token(self.eos)


class _ByteTokens:
    """A tokenizer with one token per byte, so llguidance can check text without tokens."""

    def __init__(self) -> None:
        self.eos_token_id = 256
        self.bos_token_id = None
        self.tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
        self.special_token_ids = [256]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode("utf-8") if isinstance(text, str) else text)


class Llguidance(Engine):
    def __init__(self, tokenizer: Any, vocab_size: int, *, lenient: bool) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.lenient = lenient
        self.name = "llguidance 1.9.1" + (" lenient" if lenient else "")
        self.bytes = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokens()))
        self.real = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self.encode = tokenizer

    def compile(self, schema: dict[str, Any]) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": True, "lenient": self.lenient}
        )
        matcher = self.llg.LLMatcher(self.bytes, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return grammar

    def accepts(self, compiled: Any, text: str) -> bool:
        matcher = self.llg.LLMatcher(self.bytes, compiled)
        return bool(matcher.consume_tokens(list(text.encode("utf-8"))) and matcher.is_accepting())

    def token_accepts(self, compiled: Any, text: str) -> bool:
        matcher = self.llg.LLMatcher(self.real, compiled)
        ids = self.encode.encode(text, add_special_tokens=False)
        return bool(matcher.consume_tokens(ids) and matcher.is_accepting())


@dataclass
class Tally:
    """Counts for one engine."""

    compiled: int = 0
    valid: Counter[str] = field(default_factory=Counter)
    rejected: int = 0
    token_checked: int = 0
    token_disagreements: int = 0
    compile_seconds: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence the native peers, which log every rejection to file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def run(
    engines: list[Engine], records: list[tuple[str, dict[str, Any]]], token_every: int
) -> dict[str, Tally]:
    """Tally every engine over every record."""
    from cad.grammar.cfg.json_schema import in_grammar_order

    tallies = {engine.name: Tally() for engine in engines}
    for position, (_, record) in enumerate(records):
        schema = record["schema"]
        valid = [in_grammar_order(t["data"], schema) for t in record["tests"] if t["valid"]]
        invalid = [in_grammar_order(t["data"], schema) for t in record["tests"] if not t["valid"]]
        for engine in engines:
            tally = tallies[engine.name]
            tokens = bool(token_every) and position % token_every == 0
            with quiet_stderr():
                _tally_one(engine, tally, schema, valid, invalid, tokens)
        if (position + 1) % 100 == 0:
            print(f"  {position + 1}/{len(records)} files", flush=True)
    return tallies


def _tally_one(
    engine: Engine, tally: Tally, schema: Any, valid: list[Any], invalid: list[Any], tokens: bool
) -> None:
    started = time.perf_counter()
    try:
        compiled = engine.compile(schema)
    except Exception as error:  # every peer raises its own types
        tally.failures[_reason(error)] += 1
        return
    tally.compile_seconds.append(time.perf_counter() - started)
    tally.compiled += 1
    for value in valid:
        for spelling in SPELLINGS:
            tally.valid[spelling] += _safe(engine.accepts, compiled, spell(value, spelling))
    for value in invalid:
        tally.rejected += not _safe(engine.accepts, compiled, spell(value, "ordinary"))
    if tokens and valid:
        text = spell(valid[0], "pretty")
        tally.token_checked += 1
        free = _safe(engine.accepts, compiled, text)
        tally.token_disagreements += free != _safe(engine.token_accepts, compiled, text)


def _safe(check: Any, compiled: Any, text: str) -> bool:
    try:
        return bool(check(compiled, text))
    except Exception:
        return False


def _reason(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = re.sub(r"^\[[0-9:]+\] \S+:[0-9]+: ", "", text)
    if "cannot be enforced" in text:
        return text.split(":")[0]
    return text[:90]


def table(tallies: dict[str, Tally], records: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The Markdown table (counts only)."""
    files = len(records)
    valid = sum(t["valid"] for _, r in records for t in r["tests"])
    invalid = sum(not t["valid"] for _, r in records for t in r["tests"])
    lines = [
        f"| engine | schemas compiled (of {files}) | valid accepted, compact (of {valid}) "
        f"| valid accepted, `json.dumps` | valid accepted, `indent=2` | invalid rejected (of {invalid}) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, tally in tallies.items():
        lines.append(
            f"| {name} | {tally.compiled} | {tally.valid['compact']} | {tally.valid['ordinary']} "
            f"| {tally.valid['pretty']} | {tally.rejected} |"
        )
    return lines


def main() -> None:
    """Run the engines over the files and print (optionally write) the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, help="a deterministic sample of this many files")
    parser.add_argument(
        "--engines", default="cad,cad-ignore,xgrammar,llguidance,llguidance-lenient"
    )
    parser.add_argument("--tokenizer", default="qwen2")
    parser.add_argument(
        "--token-every", type=int, default=10, help="token-level check on every N-th file (0: none)"
    )
    parser.add_argument("--out-md", type=Path)
    parser.add_argument(
        "--failures", type=int, default=8, help="compile failure reasons to list per engine"
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from cad.grammar import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tokenizer)
    factories = {
        "cad": lambda: Ours(tokenizer, vocab, ignore_unsupported=False),
        "cad-ignore": lambda: Ours(tokenizer, vocab, ignore_unsupported=True),
        "xgrammar": lambda: XGrammar(tokenizer, vocab.size),
        "llguidance": lambda: Llguidance(tokenizer, vocab.size, lenient=False),
        "llguidance-lenient": lambda: Llguidance(tokenizer, vocab.size, lenient=True),
    }
    engines = [factories[name]() for name in args.engines.split(",")]
    records = load_records(args.limit)
    tallies = run(engines, records, args.token_every)
    lines = table(tallies, records)
    print("\n".join(lines))
    for engine in engines:
        tally = tallies[engine.name]
        median = (
            1e3 * statistics.median(tally.compile_seconds)
            if tally.compile_seconds
            else float("nan")
        )
        extra = f", engines {dict(engine.engines)}" if isinstance(engine, Ours) else ""
        print(
            f"\n{engine.name}: compile p50 {median:.1f} ms (noisy){extra}; token-level check on "
            f"{tally.token_checked} pretty-printed instances, {tally.token_disagreements} disagreements"
        )
        for reason, count in tally.failures.most_common(args.failures):
            print(f"  {count:4d} × {reason}")
    if args.out_md:
        args.out_md.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
