"""Calibrating the rewrite-mode draft graph from decoding traces, in the manner of Spiffy.

1. **Traces.** Each edit is decoded in rewrite mode with a generous tracing configuration
   (many sources, long candidates, no pruning) and every drafting step is recorded: where
   in the output it drafted and which candidates it proposed. Without a model the gold file
   is forced and the decode loop is *replayed* without forwards (acceptance against a forced
   target needs no logits); with a model, rewrite decoding runs for real, forced to the gold
   file or following the model's own greedy output, which also traces the model's top-k
   alternatives at branching points.
2. **Statistics.** For each candidate, the accepted length is its common prefix with what was
   actually written. Per source (``aligned:o``, ``ngram:r``, ``topk:j``) and depth ``d`` this
   gives ``count(source, d)``, how often the source was accepted through depth ``d``.
3. **Sources.** A source is kept when its *unique* gain (tokens it accepted beyond the best
   other candidate of the same step) is a noticeable share of all accepted tokens; ranks are
   kept contiguously, so the configuration says how many alignment offsets, n-gram anchors
   and top-k branches to draft.
4. **Lengths.** Each pair ``(source, depth)`` is a formula node of a static draft graph; as in
   Spiffy's calibration, the connected set of ``graph_size`` nodes with the largest total
   count is chosen. Counts shrink with depth, so the best set takes a prefix of every source,
   and its depth is that source's calibrated length.
5. **Rates.** ``rates[source][bucket]`` is the conditional acceptance at that depth,
   Laplace-smoothed; at run time they give every node its reach probability, and pruning to
   the budget ranks nodes by the geometric-mean score.
6. **Budget.** The traces are replayed with the calibrated graph pruned to each candidate
   budget; the budget chosen minimises the modelled cost per edit, one unit per forward plus
   ``token_cost`` units per verified draft token (memory-bound accelerators: a few hundredths;
   compute-bound CPUs: a few tenths).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from selector.draft_config import SOURCE_KINDS, DraftConfig, depth_bucket, source_key
from selector.draft_graph import build_graph, prune
from selector.drafting import Candidate, Drafter
from selector.rewrite import DraftStep
from training.datasets import EditExample

TRACE_CONFIG = DraftConfig(
    draft_length=512, budget=1024, aligned=4, ngram=4, top_k=4, default_rate=0.5
)
BUDGETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


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
    """The replayed cost of one candidate budget: forwards, verified draft tokens and the
    modelled cost, summed over the corpus."""

    budget: int
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
    """A calibrated configuration and the evidence for it."""

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

    reached: list[int] = field(default_factory=list)
    trials: list[int] = field(default_factory=list)
    gain: int = 0

    def add(self, accepted: int, length: int) -> None:
        """Record one candidate of ``length`` tokens whose first ``accepted`` were written."""
        size = length + 1
        if len(self.reached) < size:
            self.reached += [0] * (size - len(self.reached))
            self.trials += [0] * (size - len(self.trials))
        for depth in range(1, min(accepted + 1, length) + 1):
            self.trials[depth] += 1
            if depth <= accepted:
                self.reached[depth] += 1


def replay(
    document_ids: list[int],
    target_ids: list[int],
    config: DraftConfig,
    *,
    stop: int | None = None,
    pruned: bool = True,
) -> list[tuple[DraftStep, int]]:
    """The rewrite decode loop with ``target_ids`` forced and no model: for each forward it
    would take, the drafting step and how many drafted nodes it verifies. Top-k branches need
    the model's logits and are left out; everything else is what ``speculate`` does."""
    config = replace(config, top_k=0)
    drafter = Drafter(document_ids, config, stop=stop)
    output: list[int] = []
    steps: list[tuple[DraftStep, int]] = []
    while len(output) < len(target_ids):
        root = target_ids[len(output)]
        output.append(root)
        drafter.advance([root], [None])
        candidates = drafter.candidates(output)
        graph = build_graph(root, candidates, config)
        if pruned:
            graph = prune(graph, config.budget)
        steps.append((DraftStep(len(output), tuple(candidates)), len(graph) - 1))
        path = [0]
        while len(output) + len(path) - 1 < len(target_ids):
            child = graph.child(path[-1], target_ids[len(output) + len(path) - 1])
            if child is None:
                break
            path.append(child)
        accepted = [graph.tokens[n] for n in path[1:]]
        output.extend(accepted)
        drafter.advance(accepted, [graph.document_index(n) for n in path[1:]])
    return steps


def replay_trace(document_ids: list[int], target_ids: list[int], stop: int | None = None) -> Trace:
    """A model-free trace: the gold target forced, the tracing configuration, no pruning."""
    steps = replay(document_ids, target_ids, TRACE_CONFIG, stop=stop, pruned=False)
    output = (*target_ids, stop) if stop is not None else tuple(target_ids)
    return Trace(tuple(document_ids), output, tuple(s for s, _ in steps), stop)


def model_trace(loaded: Any, example: EditExample, *, greedy: bool, max_new_tokens: int) -> Trace:
    """A trace from real rewrite decoding with ``loaded``: forced to the gold file, or with
    ``greedy`` the model's own output (then top-k branches are traced too)."""
    from resolver import Document
    from selector.prompt import rewrite_prompt
    from selector.rewrite import speculate, stop_tokens

    tokenizer = loaded.tokenizer
    document = tokenizer.encode(example.before, add_special_tokens=False)
    stops = stop_tokens(loaded)
    stop = min(stops) if stops else None
    target = None if greedy else tokenizer.encode(example.after, add_special_tokens=False)
    steps: list[DraftStep] = []
    output, _ = speculate(
        loaded,
        rewrite_prompt(tokenizer, Document(example.before), example.instruction),
        document,
        config=TRACE_CONFIG,
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


def count_sources(traces: Iterable[Trace]) -> tuple[dict[str, SourceCounts], int]:
    """Per source: how often it was accepted through each depth, how often it was tried
    there, and its unique gain; plus the total of the best accepted length per step."""
    counts: dict[str, SourceCounts] = {}
    total = 0
    for trace in traces:
        for step in trace.steps:
            lengths = [accepted_length(c, trace.output, step.start) for c in step.candidates]
            best = max(lengths, default=0)
            total += best
            for index, (candidate, accepted) in enumerate(
                zip(step.candidates, lengths, strict=True)
            ):
                source = counts.setdefault(candidate.key, SourceCounts())
                source.add(accepted, len(candidate.tokens))
                others = max((n for i, n in enumerate(lengths) if i != index), default=0)
                source.gain += max(0, accepted - others)
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
    nodes = [
        (-counts[key].reached[depth], depth, key)
        for key in keys
        for depth in range(1, len(counts[key].reached))
        if counts[key].reached[depth] > 0
    ]
    lengths = dict.fromkeys(keys, 1)
    for _, depth, key in sorted(nodes)[:graph_size]:
        lengths[key] = max(lengths[key], depth)
    return lengths


def fit_rates(source: SourceCounts, length: int) -> list[float]:
    """Laplace-smoothed conditional acceptance per depth bucket, up to ``length``; buckets
    with no trials repeat the last estimate."""
    buckets = depth_bucket(length) + 1
    reached, trials = [0] * buckets, [0] * buckets
    for depth in range(1, min(length, len(source.trials) - 1) + 1):
        reached[depth_bucket(depth)] += source.reached[depth]
        trials[depth_bucket(depth)] += source.trials[depth]
    rates: list[float] = []
    for hits, tries in zip(reached, trials, strict=True):
        if tries == 0 and rates:
            rates.append(rates[-1])
        else:
            rates.append(round((hits + 1) / (tries + 2), 4))
    return rates


def replay_budget(traces: list[Trace], config: DraftConfig, token_cost: float) -> BudgetRow:
    """Replay every trace's target with ``config`` pruned to its budget, and total the cost."""
    forwards = drafted = tokens = 0
    for trace in traces:
        target = trace.target
        steps = replay(list(trace.document), target, config, stop=trace.stop)
        forwards += len(steps)
        drafted += sum(nodes for _, nodes in steps)
        tokens += len(target)
    cost = forwards + token_cost * drafted
    return BudgetRow(config.budget, forwards, drafted, tokens, round(cost, 3))


def calibrate(
    traces: list[Trace],
    *,
    token_cost: float = 0.05,
    graph_size: int = 1024,
    min_gain: float = 0.005,
    budgets: Iterable[int] = BUDGETS,
    calibrated_on: str = "",
    on_budget: Callable[[BudgetRow], None] | None = None,
) -> Calibration:
    """Fit a draft-graph configuration to ``traces`` (steps 2–6 of the module docstring)."""
    if not traces:
        raise ValueError("no traces to calibrate from")
    counts, total = count_sources(traces)
    gains = {key: counts[key].gain for key in sorted(counts)}
    ranks = kept_ranks(gains, total, min_gain)
    keys = [
        source_key(kind, rank)
        for kind in SOURCE_KINDS
        for rank in range(ranks[kind])
        if source_key(kind, rank) in counts
    ]
    lengths = select_lengths(counts, keys, graph_size)
    config = DraftConfig(
        draft_length=max(lengths.values()),
        budget=0,
        aligned=ranks["aligned"],
        ngram=ranks["ngram"],
        top_k=ranks["topk"],
        max_ngram=TRACE_CONFIG.max_ngram,
        min_ngram=TRACE_CONFIG.min_ngram,
        default_rate=TRACE_CONFIG.default_rate / 10,
        lengths=lengths,
        rates={key: fit_rates(counts[key], lengths[key]) for key in keys},
        calibrated_on=calibrated_on,
    )
    rows = []
    for budget in budgets:
        row = replay_budget(traces, replace(config, budget=budget), token_cost)
        rows.append(row)
        if on_budget is not None:
            on_budget(row)
    best = min(rows, key=lambda r: (r.cost, r.budget))
    return Calibration(replace(config, budget=best.budget), rows, gains, total, len(traces))
