"""Side by side with the tools users would pick instead: per edit, milliseconds, output tokens
per second and forwards of cad (rewrite mode and speculative program mode following the oracle
program), transformers' ``generate`` (plain decoding with a static cache; prompt-lookup
decoding at 10 draft tokens and at cad's draft budget) and vLLM (plain decoding, n-gram
speculative decoding at a few draft lengths, suffix decoding), on the same edits and the same
model weights, every method forced to the gold file and checked byte for byte.

    python -m bench.peers --model qwen2.5-0.5b --corpus heval-python --split test \\
        --out-json peers.json --out-md peers.md

An architecture name (``qwen2.5-0.5b``, ``tiny``) is built at random init and saved once
(safetensors, with the real Qwen2 tokenizer) to a temporary folder that cad, transformers and
vLLM all load; a model folder is used as it is. cad and transformers run in this process;
vLLM runs in the engine environment (``--engine-python``, by default ``.venv-engine``), one
child process per configuration, exchanging JSON with ``bench/peers_vllm.py``. A peer that
cannot run here is a table row that says why. How each method is forced, and why forcing
leaves its speed alone, is in ``docs/peers.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from bench.engine_load import model_folder
from bench.harness import machine, spread, synchronize, write_results
from bench.rewrite import Programs, load_configs, model_methods, select
from cad.grammar import ProgramTokenIndex
from cad.resolver import Document
from cad.selector import LoadedModel, load_model
from cad.selector.architectures import ARCHITECTURES
from cad.selector.draft_config import DraftConfig
from cad.selector.loading import enable_compile
from cad.selector.prompt import rewrite_prompt
from cad.training.datasets import EditExample, load_edits

REPOSITORY = Path(__file__).resolve().parent.parent
ENGINE_PYTHON = REPOSITORY / ".venv-engine" / "bin" / "python"
VLLM_MODULE = "bench.peers_vllm"
PLD_DRAFT = 10
NO_VLLM_ON_GPU = (
    "not run: vLLM is not installed on the GPU machine (its wheel is larger than the 64 MiB "
    "that can be carried to it)"
)
NO_SUFFIX = (
    "not run: suffix decoding needs arctic-inference, which the engine environment lacks "
    "(PyPI has only its source; vLLM imports it for this method)"
)
CAD_METHODS = ("cad:rewrite", "cad:program")


@dataclass(frozen=True)
class Edit:
    """One corpus edit with what every whole-file method is given: the rewrite prompt's tokens
    and the gold file's tokens (end of sequence not included)."""

    example: EditExample
    prompt: list[int]
    gold: list[int]


@dataclass
class Run:
    """One method on one edit: exact or not, wall-clock, forwards after the prompt's (None
    where the method does not report them), the time spent forcing it to the gold, and the
    host's work around the forwards (drafting, masks, layout, acceptance; None where the
    method does not report it)."""

    exact: bool
    wall_s: float = 0.0
    forwards: int | None = None
    forcing_s: float = 0.0
    note: str = ""
    host_s: float | None = None


Method = Callable[[Edit], Run]


class GoldForcing(LogitsProcessor):
    """A transformers logits processor that lets greedy decoding choose only the next gold
    token: its score becomes plus infinity, above every finite score, so the choice is the gold
    file and then the end of sequence. One write per row, never a pass over the vocabulary
    (on a busy CPU a vocabulary-wide write can cost more than a small model's forward). The
    position comes from the length of the sequence so far, so one processor serves every call
    of one ``generate``."""

    def __init__(self, prompt_length: int, gold: list[int], stop: int) -> None:
        self.prompt_length = prompt_length
        self.targets = [*gold, stop]
        self.spent_s = 0.0

    def target(self, position: int) -> int | None:
        """The gold token at sequence position ``position`` (None before the reply or after
        its end)."""
        index = position - self.prompt_length
        return self.targets[index] if 0 <= index < len(self.targets) else None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        began = time.perf_counter()
        token = self.target(input_ids.shape[1])
        if token is not None:
            scores[:, token] = float("inf")
        self.spent_s += time.perf_counter() - began
        return scores


class ForwardCounter:
    """Counts the model's forwards during a ``generate`` (transformers does not report them)."""

    def __init__(self, model: Any) -> None:
        self.calls = 0
        self.handle = model.register_forward_hook(self.hook)

    def hook(self, module: Any, args: Any, output: Any) -> None:
        self.calls += 1

    def close(self) -> None:
        self.handle.remove()


def _decoded(loaded: LoadedModel, tokens: list[int], stop: int) -> tuple[list[int], str]:
    if tokens and tokens[-1] == stop:
        tokens = tokens[:-1]
    text = loaded.tokenizer.decode(
        tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    return tokens, text


def transformers_methods(loaded: LoadedModel, budget: int, compile: str) -> dict[str, Method]:
    """transformers ``generate``, greedy, batch 1: plain decoding through a static cache
    (compiled where transformers compiles it, on accelerators; ``compile="on"`` on every
    device), and prompt-lookup decoding (``prompt_lookup_num_tokens``) at 10 and ``budget``
    draft tokens with its default n-gram size and dynamic cache.

    Every row gets :class:`GoldForcing` as its ``logits_processor``. ``generate`` also hands
    its processors to the prompt-lookup candidate generator, which tries each draft token
    against them and cuts a draft at the first token a processor sets to minus infinity; the
    forcing processor never does (it raises the gold token instead), so the drafts are those
    the peer proposes without it, and it does not turn into a drafter that knows the gold."""
    from transformers import CompileConfig

    model = loaded.model
    stop = loaded.tokenizer.eos_token_id
    compile_config = CompileConfig(fullgraph=False) if compile == "on" else None
    if compile_config is not None:
        compile_config._compile_all_devices = True

    def generate(edit: Edit, **options: Any) -> Run:
        forcing = GoldForcing(len(edit.prompt), edit.gold, stop)
        counter = ForwardCounter(model)
        ids = torch.tensor([edit.prompt], device=loaded.device)
        try:
            synchronize(loaded)
            began = time.perf_counter()
            with torch.inference_mode():
                output = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=len(edit.gold) + 1,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    eos_token_id=stop,
                    pad_token_id=stop,
                    logits_processor=LogitsProcessorList([forcing]),
                    **options,
                )
            synchronize(loaded)
            wall = time.perf_counter() - began
        finally:
            counter.close()
        tokens, text = _decoded(loaded, output[0, len(edit.prompt) :].tolist(), stop)
        exact = text == edit.example.after and tokens == edit.gold
        return Run(exact, wall, counter.calls - 1, forcing.spent_s)

    static: dict[str, Any] = {"cache_implementation": "static"}
    if compile_config is not None:
        static["compile_config"] = compile_config
    return {
        "transformers:ar-static": lambda e: generate(e, **static),
        "transformers:pld-10": lambda e: generate(e, prompt_lookup_num_tokens=PLD_DRAFT),
        f"transformers:pld-{budget}": lambda e: generate(e, prompt_lookup_num_tokens=budget),
    }


def cad_methods(loaded: LoadedModel, config_name: str, config: DraftConfig) -> dict[str, Method]:
    """cad's rows, taken from the rewrite benchmark: rewrite mode with the draft configuration
    shipped for the device, and speculative program mode following the line oracle program,
    both forced to the gold file (byte-exact is checked there)."""
    index = ProgramTokenIndex.for_tokenizer(loaded.tokenizer, loaded.vocab_size)
    table = model_methods(loaded, {config_name: config}, Programs(loaded.tokenizer, index, config))
    chosen = {"cad:rewrite": table[f"rewrite:{config_name}"], "cad:program": table["program"]}

    def wrap(call: Callable[[EditExample], Any]) -> Method:
        def run(edit: Edit) -> Run:
            try:
                outcome = call(edit.example)
            except AssertionError as exc:
                return Run(False, note=str(exc))
            return Run(True, outcome.wall_s, outcome.forwards, host_s=sum(outcome.host))

        return run

    return {name: wrap(call) for name, call in chosen.items()}


def vllm_configs(drafts: list[int], ngram: tuple[int, int], suffix: int) -> dict[str, dict | None]:
    """vLLM's configurations by row name: plain decoding for a draft length of 0, n-gram
    (prompt lookup) speculative decoding at each other draft length, suffix decoding with
    ``suffix`` draft tokens at most (none for 0)."""
    low, high = ngram
    configs: dict[str, dict | None] = {}
    for k in drafts:
        if k == 0:
            configs["vllm:ar"] = None
            continue
        configs[f"vllm:ngram-{k}"] = {
            "method": "ngram",
            "num_speculative_tokens": k,
            "prompt_lookup_min": low,
            "prompt_lookup_max": high,
        }
    if suffix:
        configs["vllm:suffix"] = {"method": "suffix", "num_speculative_tokens": suffix}
    return configs


def engine_environment(engine_python: Path, threads: str) -> dict[str, str]:
    """The environment of a vLLM child: a KV cache space, the OpenMP and allocator libraries
    vLLM's CPU backend asks to be preloaded where they are found (Intel OpenMP from the engine
    environment, tcmalloc from the system), and the cores its workers bind (``threads``:
    ``all`` for every core this process may use, or vLLM's own ``auto``, which keeps one core
    for its scheduler)."""
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p]
    found = sorted((engine_python.parent.parent / "lib").glob("libiomp5.so"))
    for folder in (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"), Path("/usr/lib")):
        found += sorted(folder.glob("libtcmalloc_minimal.so.*"))[:1]
    preload += [str(p) for p in found if str(p) not in preload]
    if preload:
        env["LD_PRELOAD"] = ":".join(dict.fromkeys(preload))
    if threads == "all":
        cores = sorted(os.sched_getaffinity(0))
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, cores))
    elif threads != "auto":
        env["VLLM_CPU_OMP_THREADS_BIND"] = threads
    return env


def vllm_probe(engine_python: Path, device: torch.device, folder: Path) -> dict[str, Any]:
    """What the engine environment can run for the model in ``folder``: ``problem``, why no
    vLLM row can run (None where they can), and ``suffix``, whether suffix decoding's library
    is installed."""
    if device.type == "cuda":
        return {"problem": NO_VLLM_ON_GPU}
    if not engine_python.is_file():
        return {
            "problem": f"not run: no engine environment at {engine_python} (README: .venv-engine)"
        }
    done = subprocess.run(
        [str(engine_python), "-m", VLLM_MODULE, "--probe", str(folder)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        return {"problem": f"not run: {engine_python} cannot import vLLM"}
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if answer["problem"]:
        answer["problem"] = f"not run: {answer['problem']}"
    return answer


def run_vllm(
    engine_python: Path,
    folder: Path,
    dtype: str,
    config: dict | None,
    edits: list[Edit],
    env: dict[str, str],
    work: Path,
    log: Path | None,
) -> tuple[dict[str, Run], dict[str, Any]]:
    """One vLLM configuration in a child process of the engine environment: its runs by edit
    id (each output checked against the gold bytes here), and what it reported besides."""
    longest = max(len(e.prompt) + len(e.gold) for e in edits)
    job = {
        "model": str(folder),
        "dtype": dtype,
        "max_model_len": -(-(longest + 64) // 256) * 256,
        "speculative": config,
        "edits": [
            {"id": e.example.id, "prompt": e.prompt, "gold": e.gold, "after": e.example.after}
            for e in edits
        ],
    }
    job_path, result_path = work / "vllm-job.json", work / "vllm-result.json"
    job_path.write_text(json.dumps(job))
    result_path.unlink(missing_ok=True)
    sink = log.open("ab") if log else subprocess.DEVNULL
    try:
        subprocess.run(
            [str(engine_python), "-m", VLLM_MODULE, str(job_path), str(result_path)],
            cwd=REPOSITORY,
            env=env,
            stdout=sink,
            stderr=sink,
            check=False,
        )
    finally:
        if log:
            sink.close()
    if not result_path.is_file():
        return {}, {"error": "not run: the vLLM child wrote no result (see --vllm-log)"}
    result = json.loads(result_path.read_text())
    if "error" in result:
        return {}, {"error": f"not run: {result['error']}"}
    afters = {e.example.id: e.example.after for e in edits}
    runs = {}
    for row in result["rows"]:
        exact = row["text"] == afters[row["id"]] and row["tokens_match"]
        note = "" if row["tokens_match"] else "other tokens than the gold ones"
        runs[row["id"]] = Run(exact, row["wall_s"], row["forwards"], row["constraint_s"], note)
    extra = {key: result[key] for key in ("vllm", "start_s")}
    extra["drafted"] = sum(row["drafted"] for row in result["rows"])
    extra["accepted"] = sum(row["accepted"] for row in result["rows"])
    return runs, extra


def prepare(examples: list[EditExample], loaded: LoadedModel) -> list[Edit]:
    """Every edit's rewrite prompt and gold tokens (the same for every whole-file method)."""
    tokenizer = loaded.tokenizer
    return [
        Edit(
            e,
            rewrite_prompt(tokenizer, Document(e.before), e.instruction),
            tokenizer.encode(e.after, add_special_tokens=False),
        )
        for e in examples
    ]


def select_range(examples: list[EditExample], tokenizer: Any, low: int) -> list[EditExample]:
    """Edits whose longer side (before or after) holds at least ``low`` tokens."""
    if not low:
        return examples
    return [
        e
        for e in examples
        if max(len(tokenizer.encode(e.before)), len(tokenizer.encode(e.after))) >= low
    ]


def summarise(runs: dict[str, dict[str, Run]], edits: list[Edit]) -> dict[str, Any]:
    """Per method: exact edits, and over them milliseconds per edit, output tokens per second
    and forwards (median and spread); per-edit ratios of its wall-clock to each cad mode's
    over the edits both got exact; the best peer configuration by median milliseconds."""
    tokens = {e.example.id: len(e.gold) for e in edits}
    out: dict[str, Any] = {}
    for name, by_id in runs.items():
        exact = {i: r for i, r in by_id.items() if r.exact}
        entry: dict[str, Any] = {"edits": len(by_id), "exact": len(exact)}
        if exact:
            entry["ms"] = spread([1000 * r.wall_s for r in exact.values()])
            entry["tokens_per_s"] = spread([tokens[i] / r.wall_s for i, r in exact.items()])
            entry["forcing_ms"] = spread([1000 * r.forcing_s for r in exact.values()])
            hosted = [1000 * r.host_s for r in exact.values() if r.host_s is not None]
            if hosted:
                entry["host_ms"] = spread(hosted)
            counted = [float(r.forwards) for r in exact.values() if r.forwards is not None]
            if counted:
                entry["forwards"] = spread(counted)
        for mode in CAD_METHODS:
            both = [i for i in exact if i in runs.get(mode, {}) and runs[mode][i].exact]
            if mode != name and both:
                ratios = [exact[i].wall_s / runs[mode][i].wall_s for i in both]
                entry[f"over_{mode}"] = spread(ratios)
        out[name] = entry
    complete = {
        n: s
        for n, s in out.items()
        if n not in CAD_METHODS and s["edits"] and s["exact"] == s["edits"]
    }
    if complete:
        best = min(complete, key=lambda n: complete[n]["ms"]["median"])
        out["best_peer"] = best
    return out


def label(name: str, result: dict[str, Any]) -> str:
    """A row's description in the table (``result``: the run's budgets and settings)."""
    ngram = result["ngram"]
    if name.startswith("vllm:ngram-"):
        k = name.removeprefix("vllm:ngram-")
        return f"vLLM, n-gram speculative, {k} draft tokens (n-grams {ngram[0]}–{ngram[1]})"
    if name.startswith("transformers:pld-"):
        k = name.removeprefix("transformers:pld-")
        return f"transformers `generate`, prompt lookup, {k} draft tokens"
    budget, compiled = result["budget"], result["hf_compiled"]
    program_budget = result.get("program_budget", budget)
    return {
        "cad:rewrite": f"cad rewrite mode (draft budget {budget})",
        "cad:program": f"cad program mode, oracle program, speculative (budget {program_budget})",
        "transformers:ar-static": "transformers `generate`, static cache"
        + (", compiled" if compiled else ""),
        "vllm:ar": "vLLM, plain decoding",
        "vllm:suffix": "vLLM, suffix decoding",
    }[name]


def _cell(s: dict[str, float], digits: int, unit: str = "") -> str:
    """Median (interquartile range), the quartiles held inside the sample's range (with two
    or three samples the estimate can fall outside it)."""
    low, high = max(s["q1"], s["min"]), min(s["q3"], s["max"])
    return f"{s['median']:.{digits}f}{unit} ({low:.{digits}f}–{high:.{digits}f})"


def markdown(result: dict[str, Any]) -> str:
    """The peer table: one row per method, medians per edit with their interquartile range;
    a method that could not run says why."""
    summary, notes = result["summary"], result["notes"]
    lines = [
        f"{result['corpus']} ({result['n']} edits, split {result['split']}"
        f"{result['range']}), {result['model']}, {result['dtype']}, {result['machine']}; "
        f"cad's forwards: {result.get('cad_runtime', 'eager forwards')}; "
        "every method forced to the gold file; medians per edit (IQR)",
        "",
        "| method | exact | ms per edit | of it host ms | output tokens/s | forwards "
        "| ÷ cad rewrite | ÷ cad program |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in result["methods"]:
        described = label(name, result)
        if name in notes:
            lines.append(f"| {described} | {notes[name]} | | | | | | |")
            continue
        s = summary[name]
        cells = [described, f"{s['exact']}/{s['edits']}"]
        cells.append(_cell(s["ms"], 0) if "ms" in s else "")
        cells.append(_cell(s["host_ms"], 0) if "host_ms" in s else "n/a")
        cells.append(_cell(s["tokens_per_s"], 1) if "tokens_per_s" in s else "")
        cells.append(_cell(s["forwards"], 0) if "forwards" in s else "n/a")
        for mode in CAD_METHODS:
            key = f"over_{mode}"
            cells.append(_cell(s[key], 2, "×") if key in s else "")
        lines.append("| " + " | ".join(cells) + " |")
    best = summary.get("best_peer")
    if best:
        s = summary[best]
        parts = [f"{label(best, result)}, {s['ms']['median']:.0f} ms per edit"]
        for mode in CAD_METHODS:
            if f"over_{mode}" in s:
                ratio = s[f"over_{mode}"]["median"]
                parts.append(f"{ratio:.2f}× the time of {label(mode, result)}")
        lines += ["", "Best peer configuration: " + "; ".join(parts) + "."]
    return "\n".join(lines) + "\n"


def parse_ints(text: str) -> list[int]:
    """``"4,10,96"`` → ``[4, 10, 96]``; empty → ``[]``."""
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line entry point; returns the result it wrote."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        default="qwen2.5-0.5b",
        help="architecture at random init (tiny, qwen2.5-0.5b, ...) or folder",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--dtype", default="float32", help="every method's weights: float32 or bfloat16"
    )
    parser.add_argument("--corpus", default="heval-python")
    parser.add_argument("--split", default="test", choices=["all", "train", "valid", "test"])
    parser.add_argument("--limit", type=int, default=0, help="first N edits only (0 = all)")
    parser.add_argument(
        "--min-tokens", type=int, default=0, help="skip edits whose longer side has fewer tokens"
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        help="skip edits whose longer side has more tokens (0 = none)",
    )
    parser.add_argument(
        "--methods",
        default="cad,transformers,vllm",
        help="comma-separated families to run: cad, transformers, vllm",
    )
    parser.add_argument(
        "--cad-compile",
        default="auto",
        choices=["auto", "on", "off"],
        help="cad's compiled runtime (auto: on accelerators only)",
    )
    parser.add_argument(
        "--hf-compile",
        default="auto",
        choices=["auto", "on"],
        help="transformers' static cache compiled (auto: where transformers "
        "compiles it, on accelerators)",
    )
    parser.add_argument("--engine-python", type=Path, default=ENGINE_PYTHON)
    parser.add_argument(
        "--vllm-drafts",
        default="0,4,10,96",
        help="n-gram num_speculative_tokens values (0: plain decoding)",
    )
    parser.add_argument("--vllm-ngram", default="1,3", help="prompt_lookup_min,max")
    parser.add_argument(
        "--vllm-suffix",
        type=int,
        default=32,
        help="suffix decoding's num_speculative_tokens (0: no suffix row)",
    )
    parser.add_argument(
        "--vllm-threads",
        default="auto",
        help="cores vLLM's CPU workers bind: all, auto (vLLM's default: one "
        "core kept for its scheduler) or a list such as 0-1",
    )
    parser.add_argument("--vllm-log", type=Path, help="append the vLLM children's output here")
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    families = {f for f in args.methods.split(",") if f}
    ngram = tuple(parse_ints(args.vllm_ngram))
    if len(ngram) != 2:
        parser.error("--vllm-ngram takes MIN,MAX")
    with tempfile.TemporaryDirectory(prefix="cad-peers-") as scratch:
        work = Path(scratch)
        folder = model_folder(args.model, work)
        loaded = load_model(str(folder), device=args.device, dtype=args.dtype)
        on_cpu = loaded.device.type == "cpu"
        config_name = "cpu" if on_cpu else "default"
        config = load_configs([config_name])[config_name]
        budget = config.budget
        cad_compile = args.cad_compile == "on" or (args.cad_compile == "auto" and not on_cpu)
        hf_compiled = args.hf_compile == "on" or not on_cpu
        examples = select(load_edits(args.corpus), args.split, 0, loaded.tokenizer, args.max_tokens)
        examples = select_range(examples, loaded.tokenizer, args.min_tokens)
        examples = examples[: args.limit] if args.limit else examples
        edits = prepare(examples, loaded)
        table: dict[str, Method] = {}
        cad_model = loaded
        if "cad" in families:
            if cad_compile:
                cad_model = load_model(str(folder), device=args.device, dtype=args.dtype)
                enable_compile(cad_model)
            table.update(cad_methods(cad_model, config_name, config))
        cad_runtime = cad_model.forward_path
        if "transformers" in families:
            table.update(transformers_methods(loaded, budget, args.hf_compile))
        runs: dict[str, dict[str, Run]] = {name: {} for name in table}
        for name, call in table.items():
            call(edits[0])
            for i, edit in enumerate(edits, 1):
                runs[name][edit.example.id] = run = call(edit)
                print(
                    f"[{name} {i}/{len(edits)}] {edit.example.id} ({len(edit.gold)} tokens): "
                    f"{'exact' if run.exact else 'NOT EXACT'} {1000 * run.wall_s:.0f} ms "
                    f"forwards {run.forwards}",
                    flush=True,
                )
        notes: dict[str, str] = {}
        reports: dict[str, Any] = {}
        configs = {}
        if "vllm" in families:
            configs = vllm_configs(parse_ints(args.vllm_drafts), ngram, args.vllm_suffix)
            probed = vllm_probe(args.engine_python, loaded.device, folder)
            env = engine_environment(args.engine_python, args.vllm_threads)
            for name, spec in configs.items():
                if probed["problem"]:
                    notes[name] = probed["problem"]
                    continue
                if name == "vllm:suffix" and not probed["suffix"]:
                    notes[name] = NO_SUFFIX
                    continue
                found, report = run_vllm(
                    args.engine_python, folder, args.dtype, spec, edits, env, work, args.vllm_log
                )
                reports[name] = report
                if "error" in report:
                    notes[name] = report["error"]
                    continue
                runs[name] = found
                exact = sum(r.exact for r in found.values())
                print(
                    f"[{name}] {exact}/{len(edits)} exact, median "
                    f"{statistics.median(1000 * r.wall_s for r in found.values()):.0f} ms",
                    flush=True,
                )
            reports["environment"] = {
                k: env[k]
                for k in ("LD_PRELOAD", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE")
                if k in env
            }
    span = ""
    if args.min_tokens or args.max_tokens:
        span = f", {args.min_tokens}–{args.max_tokens or '∞'} tokens"
    result = {
        "corpus": Path(args.corpus).name,
        "split": args.split,
        "range": span,
        "n": len(edits),
        "model": f"{args.model} (random init)" if args.model in ARCHITECTURES else args.model,
        "dtype": args.dtype,
        "machine": machine(),
        "budget": budget,
        "program_budget": config.program_draft_budget,
        "cad_compiled": cad_compile,
        "cad_runtime": cad_runtime,
        "hf_compiled": hf_compiled,
        "ngram": list(ngram),
        "methods": [*table, *configs],
        "notes": notes,
        "vllm": reports,
        "summary": summarise(runs, edits),
        "rows": {name: {i: vars(r) for i, r in by_id.items()} for name, by_id in runs.items()},
    }
    write_results(result, markdown(result), args.out_json, args.out_md)
    return result


if __name__ == "__main__":
    main()
