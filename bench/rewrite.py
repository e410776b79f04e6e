"""Rewrite- and program-mode benchmark: per edit, forwards and wall-clock of AR regeneration,
prompt-lookup decoding (10 draft tokens, and as many as rewrite mode's draft budget), rewrite
mode with calibrated draft graphs, and program mode with the oracle program (one decision per
forward, speculative, and the sub-line oracle priced in forwards) — same model, same process,
every method forced to the gold file, so all produce the same bytes and acceptance is measured
even with random weights.

    python -m bench.rewrite --model qwen2.5-0.5b --device cpu --dtype float32 \\
        --corpus heval-python --split test --out-json r.json --out-md r.md --plot r.png

With the target forced, how many forwards a method takes does not depend on the weights, so
``--replay`` counts them without a model (the same draft and acceptance code, no forwards;
tests check the counts equal those of real decoding): minutes for hundreds of edits. It also
times the host's work per forward (drafting, layout-free acceptance, bookkeeping) with no
model at all.

    python -m bench.rewrite --replay --corpus releases.jsonl --split test --out-md counts.md

Every method reports the host's time per forward apart from its forwards (``host ms/fwd``:
the p50 and p90 over every forward of every edit; with a model, from
``DecodeStats.host_per_forward_s``: drafting, layout, masks, acceptance and bookkeeping).

``--split test`` keeps the edits that ``cad calibrate --holdout`` leaves out, so the shipped
draft configuration is measured on edits it was not calibrated on. ``--configs`` lists the
draft configurations to run: ``default`` (the shipped accelerator one), ``cpu`` (the shipped
CPU one) and/or JSON files from ``cad calibrate``, each a rewrite row of its own; the first
one's budget is the equal budget given to prompt lookup, and its program budget (the same
unless it gives one) is program mode's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.harness import QWEN2_TOKENIZER, machine, pick_model, spread, synchronize
from cad.grammar import ProgramTokenIndex
from cad.resolver import CopySpan, Document, Program, oracle
from cad.selector import (
    Decoder,
    DraftConfig,
    DraftConfigError,
    LoadedModel,
    load_draft_config,
    prompt_lookup,
    regenerate,
)
from cad.selector.baselines import prompt_lookup_steps
from cad.selector.decoder import replay_forced
from cad.selector.program_cost import Pricing, subline_oracle
from cad.selector.prompt import program_prompt, rewrite_prompt
from cad.selector.rewrite import replay_rewrite, rewrite_forced
from cad.selector.stats import HOST_PARTS, DecodeResult
from cad.training.datasets import EditExample, load_edits, select_split

PLD_DRAFT = 10
TARGETS = {"program_over_rewrite": 0.5, "pld_over_rewrite": 2.0}


PHASES = (*HOST_PARTS, "choose", "decode")
"""The phases of a decode split per forward (:class:`cad.selector.stats.DecodeStats`): the
host's parts, the model's token choices and the forwards after the prompt's."""
PHASE_LABELS = {
    "draft": "drafting",
    "layout": "layout",
    "mask": "masks",
    "accept": "acceptance",
    "bookkeeping": "bookkeeping",
    "choose": "choices",
    "decode": "forwards",
}
"""Each phase's column heading."""


@dataclass(frozen=True)
class Outcome:
    """One method on one edit: its forwards, its wall-clock and draft tokens when it ran
    with a model, the host's seconds of each of its forwards (the prompt's first), and with
    a model the seconds of each phase of :data:`PHASES`."""

    forwards: int
    wall_s: float = 0.0
    drafted: int = 0
    host: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)


class HostTimer:
    """Times a model-free replay's host work per forward: called after each step with its
    kind (``setup``, ``draft``, ``accept``, ``forward``: the forward's work is done)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._current = 0.0
        self._last = time.perf_counter()

    def __call__(self, kind: str) -> None:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        if kind == "forward":
            self.samples.append(self._current)
            self._current = 0.0
        elif kind != "setup":
            self._current += elapsed


Method = Callable[[EditExample], Outcome]


SHIPPED = {"default": "cuda", "cpu": "cpu"}
"""Names of the shipped draft configurations: the accelerator one and the CPU one."""


def load_configs(names: list[str]) -> dict[str, DraftConfig]:
    """``default`` is the shipped accelerator configuration, ``cpu`` the shipped CPU one;
    anything else a JSON file, named by its stem."""
    configs = {}
    for name in names:
        if name in SHIPPED:
            configs[name] = load_draft_config(device=SHIPPED[name])
        else:
            configs[Path(name).stem] = load_draft_config(name)
    return configs


def method_names(configs: dict[str, DraftConfig], replaying: bool = False) -> list[str]:
    """The measured methods, in table order (``replaying``: with the perfect-draft bound)."""
    return [
        "ar",
        "pld",
        "pld-budget",
        *(["perfect-draft"] if replaying else []),
        *(f"rewrite:{name}" for name in configs),
        "program-sequential",
        "program",
        "program-subline",
    ]


class Programs:
    """The oracle programs of an edit (line, and sub-line priced in forwards), computed once."""

    def __init__(self, tokenizer, index: ProgramTokenIndex, config: DraftConfig) -> None:
        self.tokenizer = tokenizer
        self.pricing = Pricing(index, self.encode, config.program_draft_budget, config.program)
        self.cache: dict[str, tuple[Program, Program]] = {}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def pieces(self, text: str) -> list[tuple[int, int]]:
        encoded = self.tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        return encoded["offset_mapping"]

    def __call__(self, example: EditExample) -> tuple[Program, Program]:
        if example.id not in self.cache:
            line = oracle(example.before, example.after)
            sub = subline_oracle(example.before, example.after, self.pricing, pieces=self.pieces)
            self.cache[example.id] = (line, sub)
        return self.cache[example.id]


def _timed(result: DecodeResult, example: EditExample, name: str) -> Outcome:
    if result.text != example.after:
        raise AssertionError(f"{name} was not byte-exact on {example.id}")
    stats = result.stats
    phases = {phase: getattr(stats, f"{phase}_s") for phase in PHASES}
    return Outcome(
        stats.forwards, stats.wall_s, stats.drafted_tokens, list(stats.host_per_forward_s), phases
    )


def model_methods(
    loaded: LoadedModel, configs: dict[str, DraftConfig], programs: Programs
) -> dict[str, Method]:
    """Every method run with the model: real forwards, real wall-clock."""
    first = next(iter(configs.values()))
    budget = first.budget
    decoders = {
        "program-sequential": Decoder(loaded, max_new_tokens=8192, config=first, draft_budget=0),
        "program": Decoder(loaded, max_new_tokens=8192, config=first),
        "program-subline": Decoder(loaded, max_new_tokens=8192, config=first),
    }
    table: dict[str, Method] = {
        "ar": lambda e: _timed(regenerate(loaded, e.before, e.instruction, e.after), e, "ar"),
        "pld": lambda e: _timed(
            prompt_lookup(loaded, e.before, e.instruction, e.after, num_draft=PLD_DRAFT), e, "pld"
        ),
        "pld-budget": lambda e: _timed(
            prompt_lookup(loaded, e.before, e.instruction, e.after, num_draft=budget),
            e,
            "pld-budget",
        ),
    }
    for name, config in configs.items():

        def run(e: EditExample, config: DraftConfig = config, name: str = name) -> Outcome:
            result = rewrite_forced(loaded, e.before, e.instruction, e.after, config=config)
            return _timed(result, e, f"rewrite:{name}")

        table[f"rewrite:{name}"] = run
    for name, decoder in decoders.items():

        def decode(e: EditExample, decoder: Decoder = decoder, name: str = name) -> Outcome:
            program = programs(e)[name == "program-subline"]
            return _timed(decoder.edit(e.before, e.instruction, program=program), e, name)

        table[name] = decode
    return table


def perfect_draft_forwards(tokens: int, budget: int) -> int:
    """Forwards after the prompt's for a drafter that always drafts the gold continuation:
    every forward accepts ``budget`` drafted tokens plus the model's own next one, and the
    prompt's forward verifies a draft too (rewrite mode's count). No drafter at this budget,
    from any source, needs fewer: the lower bound of rewrite mode's forwards."""
    return max(0, -(-(tokens - budget) // (budget + 1)))


def replay_methods(
    tokenizer, configs: dict[str, DraftConfig], programs: Programs, index: ProgramTokenIndex
) -> dict[str, Method]:
    """Every method's forwards counted without a model (forced targets need no logits), and
    its host work per forward timed."""
    first = next(iter(configs.values()))
    budget = first.budget
    stop = tokenizer.eos_token_id
    encode = programs.encode

    def pld(example: EditExample, draft: int) -> Outcome:
        prompt = rewrite_prompt(tokenizer, Document(example.before), example.instruction)
        steps = prompt_lookup_steps(prompt, encode(example.after), draft, 3)
        host: list[float] = []
        began = time.perf_counter()
        for _ in steps:
            now = time.perf_counter()
            host.append(now - began)
            began = now
        return Outcome(len(host), host=host)

    def program(example: EditExample, name: str) -> Outcome:
        chosen = programs(example)[name == "program-subline"]
        subline = any(isinstance(op, CopySpan) for op in chosen.ops)
        prompt = program_prompt(tokenizer, Document(example.before), example.instruction,
                                subline=subline)  # fmt: skip
        timer = HostTimer()
        stats = replay_forced(
            index,
            encode,
            example.before,
            chosen,
            budget=0 if name == "program-sequential" else first.program_draft_budget,
            prior=first.program,
            prompt_tokens=len(prompt),
            clock=timer,
            tokenizer=tokenizer,
        )
        return Outcome(stats.forwards, drafted=stats.drafted_tokens, host=timer.samples)

    table: dict[str, Method] = {
        "ar": lambda e: Outcome(len(encode(e.after))),
        "pld": lambda e: pld(e, PLD_DRAFT),
        "pld-budget": lambda e: pld(e, budget),
        "perfect-draft": lambda e: Outcome(perfect_draft_forwards(len(encode(e.after)), budget)),
    }
    for name, config in configs.items():

        def run(e: EditExample, config: DraftConfig = config) -> Outcome:
            prompt = rewrite_prompt(tokenizer, Document(e.before), e.instruction)
            timer = HostTimer()
            drafted = replay_rewrite(encode(e.before), encode(e.after), config, stop=stop,
                                     prompt_tokens=len(prompt), clock=timer)  # fmt: skip
            return Outcome(len(drafted) - 1, drafted=sum(drafted), host=timer.samples)

        table[f"rewrite:{name}"] = run
    for name in ("program-sequential", "program", "program-subline"):
        table[name] = lambda e, name=name: program(e, name)
    return table


def measure(table: dict[str, Method], example: EditExample, tokens: int, loaded=None) -> dict:
    """Forwards (and wall-clock with a model) of every method on one edit."""
    row: dict = {"id": example.id, "tokens": tokens}
    for name, call in table.items():
        if loaded is not None:
            synchronize(loaded)
        outcome = call(example)
        if loaded is not None:
            synchronize(loaded)
        row[name] = {"forwards": outcome.forwards, "wall_s": outcome.wall_s,
                     "drafted": outcome.drafted,
                     "host_s": [round(s, 7) for s in outcome.host]}  # fmt: skip
        if outcome.phases:
            row[name]["phases_s"] = {k: round(v, 7) for k, v in outcome.phases.items()}
    return row


def phase_split(rows: list[dict], name: str) -> dict[str, float] | None:
    """Milliseconds per forward of each phase of :data:`PHASES` for ``name``: every edit's
    seconds summed over every forward (the prompt's included) of every edit; ``None``
    without a model."""
    timed = [r[name] for r in rows if "phases_s" in r[name]]
    forwards = sum(len(r["host_s"]) for r in timed)
    if not timed or not forwards:
        return None
    return {p: 1e3 * sum(r["phases_s"][p] for r in timed) / forwards for p in PHASES}


def host_percentiles(rows: list[dict], name: str) -> dict[str, float] | None:
    """The p50 and p90 (ms) of the host's time per forward over every forward of every
    edit of ``name``, and the number of forwards; ``None`` where the method has no host
    timings."""
    samples = sorted(1e3 * s for r in rows for s in r[name].get("host_s", []))
    if not samples:
        return None
    if len(samples) == 1:
        return {"p50": samples[0], "p90": samples[0], "n": 1}
    deciles = statistics.quantiles(samples, n=10, method="inclusive")
    return {"p50": statistics.median(samples), "p90": deciles[8], "n": len(samples)}


def _ratio(rows: list[dict], numerator: str, denominator: str, key: str) -> dict[str, float]:
    return spread([r[numerator][key] / max(r[denominator][key], 1e-9) for r in rows])


def summarise(rows: list[dict], names: list[str], timed: bool) -> dict:
    """Median and spread per method, and per-edit ratios: prompt lookup at the equal budget
    over each method, and each method over rewrite mode (the first configuration)."""
    rewrite = next(n for n in names if n.startswith("rewrite:"))
    out: dict = {}
    for name in names:
        out[name] = {"forwards": spread([float(r[name]["forwards"]) for r in rows])}
        host = host_percentiles(rows, name)
        if host is not None:
            out[name]["host_ms"] = host
        split = phase_split(rows, name)
        if split is not None:
            out[name]["phase_ms"] = split
        if timed:
            out[name]["wall_s"] = spread([r[name]["wall_s"] for r in rows])
        if name not in ("ar", "pld", "pld-budget", "perfect-draft"):
            out[name]["pld_budget_over_method_forwards"] = _ratio(rows, "pld-budget", name,
                                                                  "forwards")  # fmt: skip
            if timed:
                out[name]["pld_budget_over_method_wall"] = _ratio(rows, "pld-budget", name,
                                                                  "wall_s")  # fmt: skip
        if name.startswith("program"):
            out[name]["method_over_rewrite_forwards"] = _ratio(rows, name, rewrite, "forwards")
            if timed:
                out[name]["method_over_rewrite_wall"] = _ratio(rows, name, rewrite, "wall_s")
    return out


def _label(name: str, configs: dict[str, DraftConfig]) -> str:
    first = next(iter(configs.values()))
    budget, program_budget = first.budget, first.program_draft_budget
    if name.startswith("rewrite:"):
        config = configs[name.split(":", 1)[1]]
        return (
            f"rewrite + draft graph ({name.split(':', 1)[1]} config: budget {config.budget}, "
            f"min reach {config.min_reach:g})"
        )
    return {
        "ar": "AR regeneration",
        "pld": f"prompt lookup ({PLD_DRAFT} draft tokens)",
        "pld-budget": f"prompt lookup ({budget} draft tokens, equal budget)",
        "perfect-draft": f"any drafter at budget {budget}, drafts always right (lower bound)",
        "program-sequential": "program mode, oracle program, one decision per forward",
        "program": f"program mode, oracle program, speculative (budget {program_budget})",
        "program-subline": f"program mode, sub-line oracle, speculative (budget {program_budget})",
    }[name]


def _short_label(name: str) -> str:
    """A method's name on a plot axis; the table gives the full description."""
    if name.startswith("rewrite:"):
        return "rewrite\n" + name.split(":", 1)[1]
    return {
        "ar": "AR",
        "pld": "prompt\nlookup",
        "pld-budget": "prompt\nlookup B",
        "perfect-draft": "perfect\ndrafts",
        "program-sequential": "program\n1/fwd",
        "program": "program\nspec.",
        "program-subline": "program\nsub-line",
    }[name]


def _cell(s: dict[str, float], digits: int) -> str:
    return f"{s['median']:.{digits}f} ({s['q1']:.{digits}f}–{s['q3']:.{digits}f})"


def markdown(result: dict, configs: dict[str, DraftConfig]) -> str:
    """The results table: medians per edit with their interquartile range."""
    summary, timed = result["summary"], result["timed"]
    how = "forwards replayed without a model" if not timed else f"{result['model']}, "
    how += "" if not timed else f"{result['dtype']}, {result['device']}, {result['forward_path']}"
    sizes = ""
    if result.get("min_tokens"):
        sizes += f", at least {result['min_tokens']} tokens"
    if result["max_tokens"]:
        sizes += f", at most {result['max_tokens']} tokens"
    lines = [
        f"{result['corpus']} ({result['n']} edits, split {result['split']}{sizes}), {how}; "
        "target forced (oracle); medians per edit (IQR); host ms per forward over every "
        "forward (p50 / p90)",
        "",
    ]
    keys = [("forwards", "forwards", 1)]
    ratios = [("pld_budget_over_method_forwards", "PLD (equal budget) forwards ÷ method"),
              ("method_over_rewrite_forwards", "method forwards ÷ rewrite")]  # fmt: skip
    if timed:
        keys.append(("wall_s", "wall (s)", 2))
        ratios += [("pld_budget_over_method_wall", "PLD (equal budget) wall ÷ method"),
                   ("method_over_rewrite_wall", "method wall ÷ rewrite")]  # fmt: skip
    header = ["method", *(label for _, label, _ in keys), "host ms/fwd p50 / p90"]
    header += [label for _, label in ratios]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| --- |" + " ---: |" * (len(header) - 1))
    for name in result["methods"]:
        s = summary[name]
        cells = [_label(name, configs)]
        cells += [_cell(s[key], digits if key != "forwards" else 0) for key, _, digits in keys]
        host = s.get("host_ms")
        cells.append(f"{host['p50']:.3f} / {host['p90']:.3f}" if host else "")
        cells += [_cell(s[key], 2) + "×" if key in s else "" for key, _ in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    split = [name for name in result["methods"] if "phase_ms" in summary[name]]
    if split:
        lines += [
            "",
            "Where each forward's time goes, ms per forward (every forward of every edit, "
            "the prompt's included): the host's parts, then the model's token choices and "
            "the forwards after the prompt's (AR and prompt lookup project their logits "
            "inside the forward, cad's modes when they choose)",
            "",
            "| method | " + " | ".join(PHASE_LABELS[phase] for phase in PHASES) + " |",
            "| --- |" + " ---: |" * len(PHASES),
        ]
        for name in split:
            cells = [f"{summary[name]['phase_ms'][phase]:.3f}" for phase in PHASES]
            lines.append(f"| {_label(name, configs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], names: list[str], title: str, path: Path, timed: bool) -> None:
    """Box plots of forwards (and wall-clock) per edit for every method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [_short_label(n) for n in names]
    panels = [("forwards", "forwards per edit")]
    if timed:
        panels.append(("wall_s", "wall-clock per edit (s)"))
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels) + 1, 4.5), squeeze=False)
    for axis, (key, ylabel) in zip(axes[0], panels, strict=True):
        axis.boxplot([[max(r[n][key], 1e-3) for r in rows] for n in names], tick_labels=labels)
        axis.set_yscale("log")
        axis.set_ylabel(ylabel)
        axis.tick_params(axis="x", labelsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def select(
    examples: list[EditExample],
    split: str,
    limit: int,
    tokenizer=None,
    max_tokens: int = 0,
    min_tokens: int = 0,
) -> list[EditExample]:
    """The ``split`` part of the corpus (``all``, or train/valid/test of ``split_by_id``),
    edits of at most ``max_tokens`` and at least ``min_tokens`` tokens (the longer of before
    and after) when set, first ``limit`` when set."""
    examples = select_split(examples, split)
    if (max_tokens or min_tokens) and tokenizer is not None:
        sizes = [max(len(tokenizer.encode(e.before)), len(tokenizer.encode(e.after)))
                 for e in examples]  # fmt: skip
        examples = [
            e for e, size in zip(examples, sizes, strict=True)
            if (not max_tokens or size <= max_tokens) and size >= min_tokens
        ]  # fmt: skip
    return examples[:limit] if limit else examples


def main(argv: list[str] | None = None) -> dict:
    """Command line entry point; returns the result it wrote."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--replay", action="store_true",
                        help="count forwards without a model (the Qwen2 tokenizer's tokens)")  # fmt: skip
    parser.add_argument("--tokenizer", type=Path, default=QWEN2_TOKENIZER,
                        help="tokenizer folder for --replay")  # fmt: skip
    parser.add_argument("--corpus", default="heval-python")
    parser.add_argument("--split", default="test", choices=["all", "train", "valid", "test"])
    parser.add_argument("--limit", type=int, default=0, help="first N edits only (0 = all)")
    parser.add_argument("--max-tokens", type=int, default=0,
                        help="skip edits longer than N tokens before or after (0 = none)")  # fmt: skip
    parser.add_argument("--min-tokens", type=int, default=0,
                        help="skip edits shorter than N tokens before and after (0 = none)")  # fmt: skip
    parser.add_argument(
        "--configs",
        default="default",
        help="comma-separated: default (the shipped accelerator configuration), cpu (the "
        "shipped CPU one) and/or config files",
    )
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument(
        "--compile", action="store_true", help="decode through the compiled static-cache runtime"
    )
    parser.add_argument(
        "--triton",
        action="store_true",
        help="decode through CUDA graphs with the fused Triton kernels (a GPU)",
    )
    parser.add_argument(
        "--no-graphs",
        action="store_true",
        help="decode with transformers' eager forward (no CUDA graphs on a GPU, no packed "
        "weights on a CPU)",
    )
    args = parser.parse_args(argv)
    try:
        configs = load_configs([c for c in args.configs.split(",") if c])
    except DraftConfigError as exc:
        parser.error(str(exc))
    loaded = None
    if args.replay:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
        vocab_size = len(tokenizer)
    else:
        graphs = False if args.no_graphs else None
        loaded = pick_model(
            args.model,
            args.device,
            args.dtype,
            compile=args.compile,
            graphs=graphs,
            triton=args.triton,
        )
        tokenizer, vocab_size = loaded.tokenizer, loaded.vocab_size
    index = ProgramTokenIndex.for_tokenizer(tokenizer, vocab_size)
    first = next(iter(configs.values()))
    programs = Programs(tokenizer, index, first)
    examples = select(
        load_edits(args.corpus), args.split, args.limit, tokenizer, args.max_tokens, args.min_tokens
    )
    if loaded is None:
        table = replay_methods(tokenizer, configs, programs, index)
    else:
        table = model_methods(loaded, configs, programs)
        measure(table, examples[0], 0, loaded)
    names = method_names(configs, replaying=loaded is None)
    rows = []
    for i, example in enumerate(examples, 1):
        tokens = len(tokenizer.encode(example.after))
        rows.append(measure(table, example, tokens, loaded))
        shown = " ".join(f"{n} {rows[-1][n]['forwards']}" for n in names)
        print(f"[{i}/{len(examples)}] {example.id} ({tokens} tokens): {shown}", flush=True)
    timed = loaded is not None
    result = {
        "corpus": Path(args.corpus).name,
        "split": args.split,
        "max_tokens": args.max_tokens,
        "min_tokens": args.min_tokens,
        "n": len(rows),
        "timed": timed,
        "model": loaded.name if loaded else f"tokenizer {Path(args.tokenizer).name}",
        "dtype": str(loaded.dtype).removeprefix("torch.") if loaded else "",
        "device": machine() if loaded else "",
        "compiled": args.compile,
        "triton": args.triton,
        "forward_path": loaded.forward_path if loaded else "",
        "methods": names,
        "budget": first.budget,
        "configs": {name: replace(config, rates={}).to_json() for name, config in configs.items()},
        "summary": summarise(rows, names, timed),
        "rows": rows,
    }
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result, configs)
    if args.out_md:
        args.out_md.write_text(text)
    if args.plot:
        title = f"{result['model']} {result['dtype']} {result['device']}; {result['corpus']}"
        plot(rows, names, title, args.plot, timed)
    print(text)
    return result


if __name__ == "__main__":
    main()
