"""Calibrating the rewrite-mode draft graph from decoding traces, in the manner of Spiffy.

1. **Traces.** Each edit is decoded in rewrite mode with a generous tracing configuration
   (every source, long candidates, a moderate budget, uniform rates) and every drafting step
   is recorded: where in the output it drafted, whether the decoder was copying the document
   or editing it, and which candidates it proposed. Without a model the gold file is forced
   and the decode loop is *replayed* without forwards (acceptance against a forced target
   needs no logits); with a model, rewrite decoding runs for real, forced to the gold file or
   following the model's own greedy output, which also traces the model's top-k alternatives.
2. **Statistics.** A candidate's accepted length is its common prefix with what was actually
   written. Per drafting state, source (``aligned:o``, ``ngram:r``, ``output:r``,
   ``topk:j``) and depth ``d`` this gives how often the source was accepted through depth
   ``d`` and how often it was tried there.
3. **Sources.** A source is kept when its *unique* gain (tokens it accepted beyond the best
   other candidate of the same step) is a noticeable share of all accepted tokens; ranks are
   kept contiguously, so the configuration says how many alignment offsets, n-gram anchors,
   repeats of the output and top-k branches to draft.
4. **Lengths.** Each pair ``(source, depth)`` is a formula node of a static draft graph; as in
   Spiffy's calibration, the connected set of ``graph_size`` nodes with the largest total
   count is chosen. Counts shrink with depth, so the best set takes a prefix of every source,
   and its depth is that source's calibrated length.
5. **Rates.** ``rates[state][source][bucket]`` is the conditional acceptance at that depth,
   smoothed towards the shallower bucket; at run time they give every node its reach
   probability, and pruning to the budget ranks nodes by the geometric-mean score.
6. **Budget.** The traces are replayed with the calibrated graph pruned to each candidate
   budget and reach threshold (nodes less likely to be accepted are not verified); the pair
   chosen minimises the modelled cost, one unit per forward plus ``token_cost`` units per
   verified draft token (memory-bound accelerators: a few hundredths; compute-bound CPUs: a
   few tenths).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from cad.selector.draft_config import (
    SOURCE_KINDS,
    STATES,
    DraftConfig,
    depth_bucket,
    source_key,
    state_name,
)
from cad.selector.drafting import Candidate, Drafter
from cad.selector.rewrite import DraftStep, draft_tree
from cad.training.datasets import EditExample

TRACE_CONFIG = DraftConfig(
    draft_length=512,
    budget=32,
    aligned=4,
    ngram=4,
    output=2,
    top_k=4,
    min_ngram=1,
    default_rate=0.5,
)
BUDGETS = (8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
MIN_REACHES = (0.0, 0.05, 0.1, 0.25)


@dataclass(frozen=True)
class Trace:
    """One decoded edit: the document's tokens, the tokens written (the end-of-sequence token
    last when known) and the drafting steps."""

    document: tuple[int, ...]
    output: tuple[int, ...]
    steps: tuple[DraftStep, ...]
    stop: int | None = None

    @property
    def target(self) -> list[int]:
        """The written tokens without the end-of-sequence token."""
        ends = self.stop is not None and self.output and self.output[-1] == self.stop
        return list(self.output[:-1] if ends else self.output)


@dataclass(frozen=True)
class BudgetRow:
    """The replayed cost of one budget and reach threshold, summed over the replayed edits."""

    budget: int
    min_reach: float
    forwards: int
    drafted: int
    tokens: int
    cost: float

    @property
    def tokens_per_forward(self) -> float:
        """Output tokens per forward."""
        return self.tokens / max(self.forwards, 1)


@dataclass
class Calibration:
    """A calibrated configuration and the evidence for it: the replayed budgets, each
    source's unique gain, the accepted tokens in all, and how many edits were traced."""

    config: DraftConfig
    budgets: list[BudgetRow]
    gains: dict[str, int]
    accepted: int
    edits: int


@dataclass
class SourceCounts:
    """One source's evidence: ``reached[d]`` candidates accepted through depth ``d``,
    ``trials[d]`` candidates that were tried there (long enough, accepted through ``d - 1``),
    and the tokens it accepted beyond every other candidate of its step."""

    reached: list[int] = field(default_factory=lambda: [0])
    trials: list[int] = field(default_factory=lambda: [0])
    gain: int = 0

    def add(self, accepted: int, length: int) -> None:
        """Record one candidate of ``length`` tokens whose first ``accepted`` were written."""
        if len(self.reached) <= length:
            grow = length + 1 - len(self.reached)
            self.reached += [0] * grow
            self.trials += [0] * grow
        for depth in range(1, min(accepted + 1, length) + 1):
            self.trials[depth] += 1
            if depth <= accepted:
                self.reached[depth] += 1

    def merged(self, other: SourceCounts) -> SourceCounts:
        """The evidence of both."""
        size = max(len(self.reached), len(other.reached))

        def pad(values: list[int]) -> list[int]:
            return values + [0] * (size - len(values))

        return SourceCounts(
            [a + b for a, b in zip(pad(self.reached), pad(other.reached), strict=True)],
            [a + b for a, b in zip(pad(self.trials), pad(other.trials), strict=True)],
            self.gain + other.gain,
        )


def replay(
    document_ids: list[int],
    target_ids: list[int],
    config: DraftConfig,
    *,
    stop: int | None = None,
    prompt_tokens: int = 1,
) -> list[tuple[DraftStep, int]]:
    """The rewrite decode loop with ``target_ids`` forced and no model: for each forward it
    would take (the prompt's own forward first), the drafting step and how many drafted nodes
    it verifies. Top-k branches need the model's logits and are left out; everything else is
    what ``speculate`` does (after a prompt of ``prompt_tokens``)."""
    config = replace(config, top_k=0)
    drafter = Drafter(document_ids, config, stop=stop)
    output: list[int] = []
    steps: list[tuple[DraftStep, int]] = []
    known = max(prompt_tokens, 1)
    while True:
        candidates = drafter.candidates(output)
        graph = draft_tree([-1] * known, candidates, config, drafter.copying)
        steps.append(
            (DraftStep(len(output), tuple(candidates), drafter.copying), len(graph) - known)
        )
        path = [known - 1]
        for token in target_ids[len(output) :]:
            child = graph.child(path[-1], token)
            if child is None:
                break
            path.append(child)
        accepted = [graph.tokens[n] for n in path[1:]]
        output.extend(accepted)
        drafter.advance(accepted, [graph.document_index(n) for n in path[1:]])
        if len(output) >= len(target_ids):
            return steps
        output.append(target_ids[len(output)])
        drafter.advance(output[-1:], [None])
        known = 1


def replay_trace(
    document_ids: list[int],
    target_ids: list[int],
    stop: int | None = None,
    config: DraftConfig = TRACE_CONFIG,
) -> Trace:
    """A model-free trace: the gold target forced, decoded with ``config``."""
    steps = replay(document_ids, target_ids, config, stop=stop)
    output = (*target_ids, stop) if stop is not None else tuple(target_ids)
    return Trace(tuple(document_ids), output, tuple(step for step, _ in steps), stop)


def model_trace(
    loaded: Any,
    example: EditExample,
    *,
    greedy: bool,
    max_new_tokens: int,
    config: DraftConfig = TRACE_CONFIG,
) -> Trace:
    """A trace from real rewrite decoding with ``loaded``: forced to the gold file, or with
    ``greedy`` the model's own output; top-k branches are traced in both."""
    from cad.resolver import Document
    from cad.selector.prompt import rewrite_prompt
    from cad.selector.rewrite import draft_stop, speculate

    tokenizer = loaded.tokenizer
    document = tokenizer.encode(example.before, add_special_tokens=False)
    stop = draft_stop(loaded)
    target = None if greedy else tokenizer.encode(example.after, add_special_tokens=False)
    steps: list[DraftStep] = []
    output, _ = speculate(
        loaded,
        rewrite_prompt(tokenizer, Document(example.before), example.instruction),
        document,
        config=config,
        max_new_tokens=max_new_tokens if target is None else len(target) + 1,
        target_ids=target,
        trace=steps,
    )
    written = (*output, stop) if stop is not None else tuple(output)
    return Trace(tuple(document), written, tuple(steps), stop)


def accepted_length(candidate: Candidate, output: tuple[int, ...], start: int) -> int:
    """How many leading tokens of ``candidate`` equal the output from index ``start`` on."""
    count = 0
    for drafted, written in zip(candidate.tokens, output[start:], strict=False):
        if drafted != written:
            break
        count += 1
    return count


def count_sources(
    traces: Iterable[Trace], horizon: int
) -> tuple[dict[str, dict[str, SourceCounts]], int]:
    """Per drafting state and source: how often it was accepted through each depth, how often
    it was tried there, and its unique gain; plus the tokens the steps accepted in all. Gains
    and the total count at most ``horizon`` tokens per step (what one forward of the trace
    could accept), so a long copy is not counted again at every step along it."""
    counts: dict[str, dict[str, SourceCounts]] = {state: {} for state in STATES}
    total = 0
    for trace in traces:
        for step in trace.steps:
            lengths = [accepted_length(c, trace.output, step.start) for c in step.candidates]
            capped = [min(n, horizon) for n in lengths]
            total += max(capped, default=0)
            table = counts[state_name(step.copying)]
            for index, candidate in enumerate(step.candidates):
                source = table.setdefault(candidate.key, SourceCounts())
                source.add(lengths[index], len(candidate.tokens))
                others = max((n for i, n in enumerate(capped) if i != index), default=0)
                source.gain += max(0, capped[index] - others)
    return counts, total


def kept_ranks(gains: dict[str, int], total: int, min_gain: float) -> dict[str, int]:
    """How many ranks of each source kind to draft: every rank up to the last one whose
    unique gain reaches ``min_gain`` of all accepted tokens (``aligned`` keeps at least one)."""
    kept = {}
    for kind in SOURCE_KINDS:
        useful = [
            int(key.split(":")[1])
            for key, gain in gains.items()
            if key.startswith(f"{kind}:") and gain > 0 and gain >= min_gain * total
        ]
        kept[kind] = max(useful) + 1 if useful else 0
    kept["aligned"] = max(kept["aligned"], 1)
    return kept


def select_lengths(
    counts: dict[str, SourceCounts], keys: list[str], graph_size: int
) -> dict[str, int]:
    """Spiffy's subgraph selection over formula nodes ``(source, depth)``: the ``graph_size``
    nodes with the largest counts, a parent (the same source one depth up) before its child;
    each source's length is its deepest chosen node (at least 1)."""
    nodes = sorted(
        (-counts[key].reached[depth], depth, key)
        for key in keys
        for depth in range(1, len(counts[key].reached))
        if counts[key].reached[depth] > 0
    )
    lengths = dict.fromkeys(keys, 1)
    for _, depth, key in nodes[:graph_size]:
        lengths[key] = max(lengths[key], depth)
    return lengths


def fit_rates(source: SourceCounts, length: int, prior: list[float] | None = None) -> list[float]:
    """Smoothed conditional acceptance per depth bucket, up to ``length``: each bucket's
    estimate leans on the one before it (two pseudo-trials at that rate, 0.5 for the first),
    so a deep bucket with few trials stays close to its shallower neighbour. A bucket with no
    trials takes the ``prior`` when given."""
    buckets = depth_bucket(length) + 1
    reached, trials = [0] * buckets, [0] * buckets
    for depth in range(1, min(length, len(source.trials) - 1) + 1):
        reached[depth_bucket(depth)] += source.reached[depth]
        trials[depth_bucket(depth)] += source.trials[depth]
    rates: list[float] = []
    for bucket, (hits, tries) in enumerate(zip(reached, trials, strict=True)):
        if tries == 0 and prior is not None:
            rates.append(prior[min(bucket, len(prior) - 1)])
            continue
        lean = rates[-1] if rates else 0.5
        rates.append(round((hits + 2 * lean) / (tries + 2), 4))
    return rates


def replay_budget(traces: list[Trace], config: DraftConfig, token_cost: float) -> BudgetRow:
    """Replay every trace's target with ``config`` pruned to its budget, and total the cost."""
    forwards = drafted = tokens = 0
    for trace in traces:
        target = trace.target
        steps = replay(list(trace.document), target, config, stop=trace.stop)
        forwards += len(steps) - 1
        drafted += sum(nodes for _, nodes in steps)
        tokens += len(target)
    cost = forwards + token_cost * drafted
    return BudgetRow(config.budget, config.min_reach, forwards, drafted, tokens, round(cost, 3))


def calibrate(
    traces: list[Trace],
    *,
    token_cost: float = 0.05,
    graph_size: int = 1024,
    min_gain: float = 0.005,
    budgets: Iterable[int] = BUDGETS,
    min_reaches: Iterable[float] = MIN_REACHES,
    budget_sample: int = 120,
    calibrated_on: str = "",
    on_budget: Callable[[BudgetRow], None] | None = None,
) -> Calibration:
    """Fit a draft-graph configuration to ``traces`` (steps 2–6 of the module docstring);
    every pair of budget and reach threshold is replayed on at most ``budget_sample`` traces
    spread evenly over the list, and the cheapest pair is kept."""
    if not traces:
        raise ValueError("no traces to calibrate from")
    counts, total = count_sources(traces, TRACE_CONFIG.budget)
    combined: dict[str, SourceCounts] = {}
    for table in counts.values():
        for key, source in table.items():
            combined[key] = combined[key].merged(source) if key in combined else source
    gains = {key: combined[key].gain for key in sorted(combined)}
    ranks = kept_ranks(gains, total, min_gain)
    keys = [
        source_key(kind, rank)
        for kind in SOURCE_KINDS
        for rank in range(ranks[kind])
        if source_key(kind, rank) in combined
    ]
    lengths = select_lengths(combined, keys, graph_size)
    overall = {key: fit_rates(combined[key], lengths[key]) for key in keys}
    rates = {
        state: {
            key: fit_rates(counts[state].get(key, SourceCounts()), lengths[key], overall[key])
            for key in keys
        }
        for state in STATES
    }
    config = DraftConfig(
        draft_length=max(lengths.values()),
        budget=0,
        aligned=ranks["aligned"],
        ngram=ranks["ngram"],
        output=ranks["output"],
        top_k=ranks["topk"],
        max_ngram=TRACE_CONFIG.max_ngram,
        min_ngram=TRACE_CONFIG.min_ngram,
        lengths=lengths,
        rates=rates,
        calibrated_on=calibrated_on,
    )
    stride = max(1, len(traces) // max(budget_sample, 1))
    sample = traces[::stride][:budget_sample]
    rows = []
    for budget in budgets:
        for min_reach in min_reaches:
            pruning = replace(config, budget=budget, min_reach=min_reach)
            rows.append(replay_budget(sample, pruning, token_cost))
            if on_budget is not None:
                on_budget(rows[-1])
    best = min(rows, key=lambda r: (r.cost, r.budget, r.min_reach))
    chosen = replace(config, budget=best.budget, min_reach=best.min_reach)
    return Calibration(chosen, rows, gains, total, len(traces))
