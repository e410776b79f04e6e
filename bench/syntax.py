"""Syntax-safe edits benchmark: the guarantee, its cost, and no false rejections.

* ``--guarantee``: a random-weight model is the adversary. For each edit it samples
  (temperature 1, several seeds) in program mode and rewrite mode, with and without the
  syntax constraint, and counts the edits that finished (did not spend their budget) and the
  share of those whose file parses (``ast.parse``; ``json.loads``; plus validation against
  the schema for ``json-schema``). Constrained, that share must be 100 %; an edit that raises
  is counted as an error, never skipped. ``--stop-bias`` adds a constant to the logits of the
  end-of-sequence tokens so the adversary tries to stop early and often (a uniform writer over
  150k tokens almost never stops on its own); it is the same for both arms.
* ``--cost``: the Python grammar's mask time per token (fill the packed bitmask, then accept
  the token, on the after-files of HEvalFix-Py, once cold and once with every mask cached;
  each token must be in its mask), and forwards per edit with and without the constraint for
  forced oracle programs and forced rewrites (each must be byte-exact).
* ``--stdlib``: every ``.py`` file of the installed CPython standard library that
  ``ast.parse`` accepts must be accepted by the grammar of the running Python; disagreements
  either way are listed by file name.

No part flag runs all three.

* ``--syncode`` (optional, needs PyPI ``syncode``; see :mod:`bench.syncode_peer`): SynCode
  beside the Python grammar on every prefix of the HEvalFix-Py after-files, mask time per
  token (thread CPU clock, one process) and agreement on the allowed tokens; skipped with a
  line saying why where SynCode is not installed. Small run (a few minutes on two cores):

    python -m bench.syntax --edits 4 --seeds 2 --max-new-tokens 24 --cost-edits 5 \\
        --stdlib-limit 200 --out-md syntax.md --out-json syntax.json

Full tables (README):

    python -m bench.syntax --edits 50 --seeds 3 --max-new-tokens 48 --cost-edits 40 \\
        --out-md bench/results/syntax.md --out-json bench/results/syntax.json
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import statistics
import sys
import sysconfig
import time
import tokenize
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.harness import QWEN2_TOKENIZER, machine, pick_model
from bench.masks import DEFAULT_DATA
from cad.grammar import allocate_token_bitmask
from cad.grammar.syntax import SyntaxConstraint, SyntaxMatcher, SyntaxMismatch, syntax_machine
from cad.grammar.syntax.languages import GrammarError, PythonMachine
from cad.grammar.syntax.python_syntax import LATEST, SUPPORTED_VERSIONS, python_syntax
from cad.grammar.vocab import Vocabulary
from cad.resolver import oracle
from cad.selector import Decoder, LoadedModel, Sampling
from cad.selector.rewrite import rewrite, rewrite_forced, stop_tokens
from cad.selector.stats import DecodeResult
from cad.training.datasets import EditExample, load_edits

LANGUAGES = ("python", "json", "json-schema")
RUNNING = sys.version_info[:2] if sys.version_info[:2] in SUPPORTED_VERSIONS else LATEST
"""The Python version the constraint is built for: the one whose ``ast.parse`` judges."""
MODES = ("program", "rewrite")
JSON_INSTRUCTION = "Change one value."


# -- what parses ---------------------------------------------------------------------------


def python_parses(text: str) -> bool:
    """Whether the interpreter's parser accepts ``text`` as a module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False
    return True


def json_parses(text: str, schema: Any = None) -> bool:
    """Whether ``text`` is one JSON value (no NaN or Infinity), valid against ``schema``
    when one is given."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    if schema is None:
        return True
    import jsonschema

    return jsonschema.Draft202012Validator(schema).is_valid(value)


def parses(language: str, text: str, schema: Any = None) -> bool:
    """Whether ``text`` is a whole file of ``language`` by the reference parser."""
    if language == "python":
        return python_parses(text)
    return json_parses(text, schema if language == "json-schema" else None)


# -- the tallies ---------------------------------------------------------------------------


@dataclass
class Tally:
    """Sampled edits of one (language, mode, constrained) arm: how many ran, finished,
    parsed among the finished, and raised (with their ids)."""

    runs: int = 0
    finished: int = 0
    parsed: int = 0
    errors: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)

    def add(self, name: str, result: DecodeResult | None, ok: bool) -> None:
        """Count one run: ``result`` None when it raised; ``ok`` whether its file parses."""
        self.runs += 1
        if result is None:
            self.errors.append(name)
        elif not result.stats.truncated:
            self.finished += 1
            self.parsed += ok
            if not ok:
                self.broken.append(name)

    @property
    def share(self) -> float | None:
        """Parsing share of the finished edits (None when none finished)."""
        return self.parsed / self.finished if self.finished else None


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- documents -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """A file to edit: its language's name, text, instruction and JSON Schema if typed."""

    id: str
    language: str
    text: str
    instruction: str
    schema: Any = None


def python_documents(edits: list[EditExample], count: int) -> list[Document]:
    """The before-files of the first ``count`` edits."""
    return [Document(e.id, "python", e.before, e.instruction) for e in edits[:count]]


def json_documents(data: Path, count: int, typed: bool) -> list[Document]:
    """Valid JSONSchemaBench instances (objects or arrays of 3 to 40 lines when indented),
    one per schema file in name order; with their schemas when ``typed``."""
    found: list[Document] = []
    for path in sorted((data / "jsonschemabench").glob("*.json")):
        if len(found) >= count:
            break
        bench = json.loads(path.read_text())
        for test in bench.get("tests", []):
            value = test.get("data")
            text = json.dumps(value, indent=2) + "\n"
            if test.get("valid") and isinstance(value, dict | list) and 3 <= text.count("\n") <= 40:
                language = "json-schema" if typed else "json"
                schema = bench["schema"] if typed else None
                found.append(Document(path.stem, language, text, JSON_INSTRUCTION, schema))
                break
    return found


# -- the guarantee -------------------------------------------------------------------------


def bias_stops(loaded: LoadedModel, bias: float) -> Any:
    """Add ``bias`` to the end-of-sequence logits of every forward; returns the hook handle
    (``.remove()`` undoes it)."""
    stops = sorted(stop_tokens(loaded))

    def hook(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
        output[..., stops] += bias
        return output

    return loaded.model.get_output_embeddings().register_forward_hook(hook)


def constraint_for(loaded: LoadedModel, document: Document) -> SyntaxConstraint:
    """The whole-file constraint for ``document`` (raises ``SyntaxMismatch`` or
    ``GrammarError`` when it cannot hold the file)."""
    language = "json" if document.language == "json-schema" else document.language
    built = syntax_machine(
        language,
        loaded.tokenizer,
        vocab_size=loaded.vocab_size,
        schema=document.schema,
        python_version=RUNNING,
    )
    return SyntaxConstraint.for_region(built, "", document.text)


def sample(
    loaded: LoadedModel,
    document: Document,
    mode: str,
    constraint: SyntaxConstraint | None,
    seed: int,
    max_new_tokens: int,
) -> DecodeResult:
    """One sampled edit of ``document`` (temperature 1)."""
    sampling = Sampling(temperature=1.0, seed=seed)
    if mode == "program":
        decoder = Decoder(loaded, max_new_tokens=max_new_tokens, sampling=sampling)
        return decoder.edit(document.text, document.instruction, syntax=constraint)
    return rewrite(
        loaded, document.text, document.instruction, max_new_tokens=max_new_tokens,
        sampling=sampling, syntax=constraint,
    )  # fmt: skip


def independent_seed(document: int, seed: int) -> int:
    """The sampling seed of run ``seed`` on the ``document``-th document: distinct for every
    pair, since a random model's samples hardly depend on the document, so a seed shared by
    every document would make all their runs one draw."""
    return seed * 1_000_003 + document


def guarantee(
    loaded: LoadedModel,
    documents: list[Document],
    seeds: int,
    max_new_tokens: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Sample every document in both modes, unconstrained and constrained (interleaved);
    the tallies per arm, and the documents the constraint could not hold."""
    tallies: dict[tuple[str, str, bool], Tally] = {}
    refused: list[str] = []
    for position, document in enumerate(documents):
        try:
            constraint = constraint_for(loaded, document)
        except (SyntaxMismatch, GrammarError, ValueError) as exc:
            refused.append(f"{document.language}:{document.id}: {exc}")
            continue
        for mode in MODES:
            for seed in range(seeds):
                for held in (False, True):
                    tally = tallies.setdefault((document.language, mode, held), Tally())
                    name = f"{document.id}/seed{seed}"
                    try:
                        result = sample(
                            loaded, document, mode, constraint if held else None,
                            independent_seed(position, seed), max_new_tokens,
                        )  # fmt: skip
                    except Exception as exc:
                        log(f"  {document.language} {mode} held={held} {name}: {exc!r}")
                        tally.add(name, None, False)
                        continue
                    tally.add(name, result, parses(document.language, result.text, document.schema))
        log(f"  guarantee: {document.language} {document.id} done")
    rows = [
        {"language": language, "mode": mode, "constrained": held, **asdict(tally),
         "share": tally.share}
        for (language, mode, held), tally in tallies.items()
    ]  # fmt: skip
    return {"rows": rows, "refused": refused}


# -- the cost ------------------------------------------------------------------------------


def mask_pass(matcher_for: Callable[[], SyntaxMatcher], streams: list[list[int]]) -> dict:
    """Per token: fill the bitmask, check the token is in it, accept it. Timings in µs;
    ``rejected``: tokens missing from their mask or refused (each a false rejection)."""
    fills: list[float] = []
    accepts: list[float] = []
    rejected = 0
    for ids in streams:
        matcher = matcher_for()
        bitmask = allocate_token_bitmask(1, matcher.vocab_size)
        for token in ids:
            began = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask)
            filled = time.perf_counter()
            allowed = bool(int(bitmask[0, token >> 5]) >> (token & 31) & 1)
            taken = time.perf_counter()
            ok = matcher.accept_token(token)
            accepts.append((time.perf_counter() - taken) * 1e6)
            fills.append((filled - began) * 1e6)
            if not (allowed and ok):
                rejected += 1
                break
    return {
        "tokens": len(fills),
        "fill_p50_us": percentile(fills, 0.5),
        "fill_p99_us": percentile(fills, 0.99),
        "accept_p50_us": percentile(accepts, 0.5),
        "accept_p99_us": percentile(accepts, 0.99),
        "rejected": rejected,
    }


def mask_cost(loaded: LoadedModel, edits: list[EditExample]) -> dict[str, Any]:
    """The Python grammar's mask time on the after-files of ``edits`` (ending with the
    end-of-sequence token), cold (a fresh machine: no mask cached) then warm (second pass)."""
    began = time.perf_counter()
    vocabulary = Vocabulary.for_tokenizer(loaded.tokenizer, loaded.vocab_size)
    built = PythonMachine(python_syntax(RUNNING), vocabulary)
    build_s = time.perf_counter() - began
    eos = built.eos_token_id
    streams = [
        loaded.tokenizer.encode(e.after, add_special_tokens=False)
        + ([eos] if eos is not None else [])
        for e in edits
    ]
    cold = mask_pass(lambda: SyntaxMatcher(built), streams)
    warm = mask_pass(lambda: SyntaxMatcher(built), streams)
    return {"files": len(streams), "build_s": build_s, "cold": cold, "warm": warm}


def forward_cost(loaded: LoadedModel, edits: list[EditExample]) -> dict[str, Any]:
    """Forced oracle programs and forced rewrites with and without the constraint: exact
    results, forwards, wall-clock and the host's milliseconds per forward per edit."""
    methods: dict[str, Callable[[EditExample, SyntaxConstraint | None], DecodeResult]] = {
        "program": lambda e, c: Decoder(loaded).edit(
            e.before, e.instruction, program=oracle(e.before, e.after), syntax=c
        ),
        "rewrite": lambda e, c: rewrite_forced(loaded, e.before, e.instruction, e.after, syntax=c),
    }
    built = syntax_machine(
        "python", loaded.tokenizer, vocab_size=loaded.vocab_size, python_version=RUNNING
    )
    skipped: list[str] = []
    runs: dict[tuple[str, bool], list[tuple[int, float, bool, float]]] = {}
    failures: list[str] = []
    for example in edits:
        if not (python_parses(example.before) and python_parses(example.after)):
            skipped.append(example.id)
            continue
        constraint = SyntaxConstraint.for_region(built, "", example.before)
        for name, run in methods.items():
            for held in (False, True):
                try:
                    result = run(example, constraint if held else None)
                except Exception as exc:
                    failures.append(f"{name} held={held} {example.id}: {exc!r}")
                    continue
                exact = result.text == example.after
                if not exact:
                    failures.append(f"{name} held={held} {example.id}: not byte-exact")
                runs.setdefault((name, held), []).append(
                    (result.stats.forwards, result.stats.wall_s, exact, result.stats.host_s)
                )
    rows = []
    for (name, held), values in runs.items():
        forwards = [value[0] for value in values]
        rows.append({
            "mode": name, "constrained": held, "edits": len(values),
            "exact": sum(value[2] for value in values), "forwards": sum(forwards),
            "forwards_median": statistics.median(forwards),
            "wall_median_s": statistics.median(value[1] for value in values),
            "host_ms_per_forward_median": statistics.median(
                1000 * value[3] / (value[0] + 1) for value in values
            ),
        })  # fmt: skip
    return {"rows": rows, "skipped": skipped, "failures": failures}


# -- no false rejections -------------------------------------------------------------------


def stdlib_files(root: Path) -> list[Path]:
    """The standard library's ``.py`` files in name order, installed packages left out."""
    skip = {"site-packages", "dist-packages"}
    return sorted(path for path in root.rglob("*.py") if not skip & set(path.parts))


def read_source(path: Path) -> str | None:
    """The text of a source file decoded by its coding declaration (None if it cannot be)."""
    try:
        data = path.read_bytes()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding).removeprefix("\ufeff")
    except (SyntaxError, UnicodeDecodeError, LookupError, OSError):
        return None


def check_files(paths: Iterable[Path], root: Path, version: tuple[int, int]) -> dict[str, Any]:
    """Compare ``ast.parse`` with the grammar of ``version`` on each file (decoded by its
    coding declaration, fed as UTF-8): counts, and the disagreements by relative name."""
    syntax = python_syntax(version)
    counts = {"checked": 0, "ast_accepts": 0, "grammar_accepts": 0, "unreadable": 0}
    rejected: list[str] = []
    accepted: list[str] = []
    for path in paths:
        text = read_source(path)
        if text is None:
            counts["unreadable"] += 1
            continue
        counts["checked"] += 1
        reference = python_parses(text)
        ours = syntax.accepts(text.encode("utf-8", "surrogatepass"))
        counts["ast_accepts"] += reference
        counts["grammar_accepts"] += ours
        name = str(path.relative_to(root))
        if reference and not ours:
            rejected.append(name)
        elif ours and not reference:
            accepted.append(name)
    return {**counts, "false_rejections": rejected, "false_acceptances": accepted}


def stdlib(limit: int | None) -> dict[str, Any]:
    """The standard-library check for the running Python (its own files, its own parser)."""
    version = sys.version_info[:2]
    if version not in SUPPORTED_VERSIONS:
        return {"skipped": f"Python {version[0]}.{version[1]} has no grammar"}
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = stdlib_files(root)[:limit]
    began = time.perf_counter()
    result = check_files(paths, root, version)
    return {"python": f"{version[0]}.{version[1]}", **result, "wall_s": time.perf_counter() - began}


# -- output --------------------------------------------------------------------------------


def _share(row: dict) -> str:
    return "–" if row["share"] is None else f"{100 * row['share']:.1f} %"


def markdown(results: dict[str, Any]) -> str:
    """The tables of whichever parts ran."""
    out = [f"Machine: {results['machine']}; model: {results['model']}.", ""]
    if "guarantee" in results:
        part = results["guarantee"]
        out += [
            f"**Guarantee** ({part['seeds']} seeds, temperature 1, max {part['max_new_tokens']} "
            f"new tokens, stop bias {part['stop_bias']}):",
            "",
            "| language | mode | syntax | runs | finished | parse among finished | errors |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for row in part["rows"]:
            syntax = "constrained" if row["constrained"] else "none"
            out.append(
                f"| {row['language']} | {row['mode']} | {syntax} | {row['runs']} | "
                f"{row['finished']} | {row['parsed']}/{row['finished']} ({_share(row)}) | "
                f"{len(row['errors'])} |"
            )
        out += [
            f"- refused (file does not parse or schema not compiled): {x}" for x in part["refused"]
        ]
        out.append("")
    if "cost" in results:
        masks = results["cost"]["masks"]
        out += [
            f"**Mask cost**, Python grammar, {masks['files']} after-files of HEvalFix-Py "
            f"(machine set up in {masks['build_s']:.2f} s; masks are built on first use, in the "
            "cold pass):",
            "",
            "| pass | tokens | fill p50 µs | fill p99 µs | accept p50 µs | accept p99 µs | rejected |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in ("cold", "warm"):
            row = masks[name]
            out.append(
                f"| {name} | {row['tokens']} | {row['fill_p50_us']:.1f} | {row['fill_p99_us']:.1f} "
                f"| {row['accept_p50_us']:.1f} | {row['accept_p99_us']:.1f} | {row['rejected']} |"
            )
        forwards = results["cost"]["forwards"]
        out += [
            "",
            "**Forwards per edit**, forced oracle (HEvalFix-Py):",
            "",
            "| mode | syntax | edits | byte-exact | forwards | median forwards | median wall s "
            "| median host ms per forward |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in forwards["rows"]:
            syntax = "constrained" if row["constrained"] else "none"
            out.append(
                f"| {row['mode']} | {syntax} | {row['edits']} | {row['exact']} | "
                f"{row['forwards']} | {row['forwards_median']} | {row['wall_median_s']:.2f} | "
                f"{row['host_ms_per_forward_median']:.3f} |"
            )
        out += [f"- failed: {x}" for x in forwards["failures"]]
        out.append("")
    if "stdlib" in results:
        part = results["stdlib"]
        if "skipped" in part:
            out += [f"**Standard library**: skipped ({part['skipped']}).", ""]
        else:
            out += [
                f"**Standard library** (Python {part['python']}): {part['checked']} files "
                f"checked, ast.parse accepts {part['ast_accepts']}, the grammar accepts "
                f"{part['grammar_accepts']}; false rejections {len(part['false_rejections'])}, "
                f"false acceptances {len(part['false_acceptances'])} ({part['wall_s']:.1f} s).",
                "",
            ]
            out += [f"- rejected, ast.parse accepts: {x}" for x in part["false_rejections"]]
            out += [f"- accepted, ast.parse rejects: {x}" for x in part["false_acceptances"]]
    if "syncode" in results:
        out += _syncode_markdown(results["syncode"])
    return "\n".join(out).rstrip() + "\n"


def syncode(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """The SynCode arm (:mod:`bench.syncode_peer`), or why it is skipped."""
    from transformers import AutoTokenizer

    from bench.syncode_peer import MODES, SyncodeMasks, side_by_side, syncode_missing

    if args.syncode_mode not in MODES:
        raise SystemExit(f"unknown SynCode mode {args.syncode_mode!r}; choose from {MODES}")
    missing = syncode_missing()
    if missing is not None:
        log(f"SynCode arm skipped: {missing}")
        return {"skipped": missing}
    tokenizer = AutoTokenizer.from_pretrained(QWEN2_TOKENIZER)
    vocabulary = Vocabulary.for_tokenizer(tokenizer)
    eos = [] if vocabulary.eos_token_id is None else [vocabulary.eos_token_id]
    streams = [
        tokenizer.encode(edit.after, add_special_tokens=False) + eos
        for edit in load_edits("heval-python")[: args.syncode_files]
    ]
    began = time.perf_counter()
    peer = SyncodeMasks(tokenizer, args.syncode_mode)
    ready_s = time.perf_counter() - began
    log(f"  SynCode {args.syncode_mode}: mask store ready in {ready_s:.1f} s")
    part = side_by_side(vocabulary, streams, peer, args.syncode_samples, args.syncode_examples, log)
    return {"mode": args.syncode_mode, "syncode_setup_s": ready_s, **part}


def _syncode_markdown(part: dict[str, Any]) -> list[str]:
    if "skipped" in part:
        return [f"**SynCode side by side**: skipped ({part['skipped']}).", ""]
    ours, theirs, gold, sets = part["ours"], part["syncode"], part["gold"], part["sets"]
    prefixes = max(1, sets["prefixes"])
    out = [
        f"**SynCode side by side** (SynCode {part['mode']}, its own Python grammar, indentation "
        f"on; {part['files']} after-files of HEvalFix-Py, {part['tokens']} prefixes; thread CPU "
        f"time in one process, one thread; SynCode's mask store ready in "
        f"{part['syncode_setup_s']:.1f} s):",
        "",
        "| engine | work per token | p50 µs | p99 µs |",
        "| --- | --- | ---: | ---: |",
        f"| ours | fill the bitmask | {ours['fill_p50_us']:.1f} | {ours['fill_p99_us']:.1f} |",
        f"| ours | fill + accept the token | {ours['fill_accept_p50_us']:.1f} | "
        f"{ours['fill_accept_p99_us']:.1f} |",
        f"| ours, second pass | fill, every mask built | {ours['warm_fill_p50_us']:.1f} | "
        f"{ours['warm_fill_p99_us']:.1f} |",
        f"| SynCode | decode, parse, look the mask up | {theirs['mask_p50_us']:.1f} | "
        f"{theirs['mask_p99_us']:.1f} |",
        "",
        f"- gold next token allowed by both {gold['both']}, only ours {gold['ours_only']}, only "
        f"SynCode {gold['syncode_only']}, neither {gold['neither']}; SynCode's parser failed "
        f"(step left unconstrained) {theirs['unconstrained_steps']} times",
        f"- allowed sets at {sets['prefixes']} sampled prefixes: on average ours "
        f"{sets['ours_allowed'] / prefixes:.0f} tokens, SynCode "
        f"{sets['syncode_allowed'] / prefixes:.0f}; allowed by ours only "
        f"{sets['only_ours'] / prefixes:.0f}, by SynCode only {sets['only_syncode'] / prefixes:.0f}",
    ]
    for example in gold["examples"]:
        out.append(
            f"- gold token {example['token']} after …{example['tail']!r}: ours "
            f"{'allows' if example['ours'] else 'refuses'}, SynCode "
            f"{'allows' if example['syncode'] else 'refuses'}"
        )
    for example in sets["examples"]:
        verdict = (
            f"ast.parse accepts it completed by {example['witness']!r}"
            if example["witness"] is not None
            else "no completion found (short search)"
        )
        out.append(
            f"- only {example['allowed_by']} allows {example['token']} after "
            f"…{example['tail']!r}: {verdict}"
        )
    out.append("")
    return out


def _documents(args: argparse.Namespace, edits: list[EditExample]) -> Iterator[Document]:
    for language in args.languages.split(","):
        if language not in LANGUAGES:
            raise SystemExit(f"unknown language {language!r}; choose from {', '.join(LANGUAGES)}")
        if language == "python":
            yield from python_documents(edits, args.edits)
        else:
            yield from json_documents(args.data, args.edits, language == "json-schema")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guarantee", action="store_true", help="sampled edits that parse")
    parser.add_argument("--cost", action="store_true", help="mask time and forwards")
    parser.add_argument("--stdlib", action="store_true", help="the standard library check")
    parser.add_argument("--syncode", action="store_true", help="SynCode side by side")
    parser.add_argument("--syncode-mode", default="grammar_mask", help="or grammar_strict")
    parser.add_argument("--syncode-files", type=int, default=20, help="after-files to read")
    parser.add_argument("--syncode-samples", type=int, default=3, help="set comparisons a file")
    parser.add_argument("--syncode-examples", type=int, default=6, help="examples listed")
    parser.add_argument("--model", default="tiny", help="architecture (random init) or folder")
    parser.add_argument("--languages", default="python,json", help=f"of {','.join(LANGUAGES)}")
    parser.add_argument("--edits", type=int, default=50, help="documents per language")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--stop-bias", type=float, default=10.0)
    parser.add_argument("--cost-edits", type=int, default=40)
    parser.add_argument("--stdlib-limit", type=int, help="check only the first N files")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="holds jsonschemabench/")
    parser.add_argument("--out-md", type=Path)
    parser.add_argument("--out-json", type=Path)
    args = parser.parse_args(argv)
    everything = not (args.guarantee or args.cost or args.stdlib or args.syncode)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    results: dict[str, Any] = {"machine": machine(), "model": args.model}
    if everything or args.guarantee or args.cost:
        loaded = pick_model(args.model, "cpu", "float32")
        results["model"] = loaded.name
        edits = load_edits("heval-python")
        if everything or args.guarantee:
            documents = list(_documents(args, edits))
            handle = bias_stops(loaded, args.stop_bias) if args.stop_bias else None
            part = guarantee(loaded, documents, args.seeds, args.max_new_tokens, log)
            if handle is not None:
                handle.remove()
            results["guarantee"] = {
                "seeds": args.seeds, "max_new_tokens": args.max_new_tokens,
                "stop_bias": args.stop_bias, **part,
            }  # fmt: skip
        if everything or args.cost:
            results["cost"] = {
                "masks": mask_cost(loaded, edits[: args.cost_edits]),
                "forwards": forward_cost(loaded, edits[: args.cost_edits]),
            }
            log("  cost done")
    if everything or args.stdlib:
        results["stdlib"] = stdlib(args.stdlib_limit)
    if args.syncode:
        results["syncode"] = syncode(args, log)
    table = markdown(results)
    print(table)
    if args.out_md:
        args.out_md.write_text(table)
    if args.out_json:
        args.out_json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
