"""Rewrite mode with calibrated draft graphs: the model writes the complete new file and the
decoder speculates its output from the ORIGINAL document, losslessly.

Per step: the token the model chose last is the root; the drafter proposes continuations
from the document; they merge into one prefix tree, pruned to the budget; ONE forward
verifies the whole tree; the longest path agreeing with the model's own choices is
accepted (greedy: the argmax at each node; sampling: the standard speculative rule for
deterministic drafts); the model's choice after that path becomes the next root; the cache
keeps the accepted path only. The tokens are exactly those plain decoding would emit.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch

from cad.grammar.syntax import SyntaxConstraint
from cad.resolver import Document
from cad.selector import kv
from cad.selector.draft_config import DraftConfig, load_draft_config
from cad.selector.draft_graph import DraftGraph, chain, extend_graph, prune
from cad.selector.drafting import Candidate, Drafter
from cad.selector.errors import Cancelled, ContextTooLongError
from cad.selector.loading import LoadedModel
from cad.selector.prompt import rewrite_prompt
from cad.selector.sampling import Sampling, new_generator, speculative_choices
from cad.selector.stats import DecodeResult, DecodeStats, Progress
from cad.selector.timing import PhaseClock
from cad.selector.tree_verify import NodeLogits, keep_path, verify_graph

ProgressCallback = Callable[[Progress], None]
MAX_CHAIN_WITH_DRAFTS = 4096
"""Known tokens a forward may carry together with a draft tree (its attention mask is dense
over both); a longer prompt is fed on its own and the next forward drafts."""
_FENCE = re.compile(r"\s*(`{3,})[^\n`]*\n(.*)\1\s*", re.DOTALL)


@dataclass
class RewriteStats(DecodeStats):
    """Decode costs plus the draft side: ``generated_tokens`` are the model's own choices,
    ``copied_tokens`` accepted draft tokens, ``drafted_tokens`` every token fed to a verify
    forward (roots included), ``accepted_per_forward`` output tokens per forward."""

    accepted_per_forward: float = 0.0


@dataclass(frozen=True)
class DraftStep:
    """One drafting step of a trace: the candidates proposed to follow output index ``start``
    and whether the decoder was copying the document then (calibration compares the
    candidates with the tokens actually written there)."""

    start: int
    candidates: tuple[Candidate, ...]
    copying: bool = False


def stop_tokens(loaded: LoadedModel) -> set[int]:
    """End-of-sequence ids: the tokenizer's and the model's generation config's."""
    stops: set[int] = set()
    for value in (
        loaded.tokenizer.eos_token_id,
        getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            stops.add(value)
        elif isinstance(value, list | tuple):
            stops.update(int(v) for v in value)
    return stops


def draft_stop(loaded: LoadedModel) -> int | None:
    """The end-of-sequence token drafted after the document: the tokenizer's own (a chat
    model's end of turn), else the smallest of the model's stop tokens."""
    stops = stop_tokens(loaded)
    eos = loaded.tokenizer.eos_token_id
    if isinstance(eos, int) and eos in stops:
        return eos
    return min(stops) if stops else None


def extract_file(reply: str, final_newline: bool = True) -> str:
    """The text inside the reply: the body of a surrounding code fence (three or more
    backticks, optional info string) if the model wrote one, otherwise the reply as it is.
    The prompt shows a text without a final line break with one added before its closing
    fence; ``final_newline=False`` says so, and that one line break is dropped again."""
    match = _FENCE.fullmatch(reply)
    if match is None:
        return reply
    body = match.group(2)
    return body[:-1] if not final_newline and body.endswith("\n") else body


class _Chooser:
    """The model's choice after a node: the forced target, the argmax, or a speculative
    sample over the tokens drafted below it. ``None`` means the forced target is complete.
    With a syntax ``constraint`` the logits are masked to the tokens that keep the text a
    prefix of a file (``state`` is the constraint's state at the node)."""

    def __init__(
        self,
        sampling: Sampling,
        target: list[int] | None,
        device: torch.device,
        constraint: SyntaxConstraint | None = None,
        stops: frozenset[int] = frozenset(),
    ) -> None:
        self.sampling = sampling
        self.target = target
        self.generator = new_generator(sampling, device)
        self.constraint = constraint
        self.stops = stops

    def __call__(self, logits: NodeLogits, node: int, position: int, state: int = 0) -> int | None:
        if self.target is not None:
            return self.target[position] if position < len(self.target) else None
        if self.constraint is not None:
            row = _masked(logits[node], self.constraint.allowed(state, self.stops))
            if self.sampling.temperature <= 0:
                return int(row.argmax())
            drafted = [list(logits.graph.children[node])]
            return speculative_choices(row[None], drafted, self.sampling, self.generator)[0]
        if self.sampling.temperature <= 0:
            return logits.argmax(node)
        return logits.sampled(node, self.sampling, self.generator)


def _masked(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``logits`` with every token outside ``allowed`` at -inf (ids past it too)."""
    width = min(logits.shape[-1], allowed.shape[-1])
    masked = torch.full_like(logits, float("-inf"))
    visible = allowed[:width].to(logits.device)
    masked[:width] = torch.where(visible, logits[:width], masked[:width])
    return masked


def _cut(
    graph: DraftGraph, known: int, end_state: int, constraint: SyntaxConstraint, stops: set[int]
) -> tuple[DraftGraph, list[int]]:
    """The draft graph without the drafted nodes the syntax rejects (and their descendants),
    its ``known`` chain kept, and the constraint's state at every kept node (``end_state`` at
    the chain's end): drafts end at the first token the parser refuses (a stop token is kept
    only where the region may end)."""
    kept = chain(graph.tokens[:known])
    states = [end_state] * known
    mapping = {node: node for node in range(known)}
    for node in range(known, len(graph)):
        parent = mapping.get(graph.parents[node])
        if parent is None:
            continue
        token = graph.tokens[node]
        if token in stops:
            state = states[parent] if constraint.complete(states[parent]) else -1
        else:
            state = constraint.token_step(states[parent], token)
        if state < 0:
            continue
        new = kept.add(parent, graph.tokens[node], graph.reach[node])
        kept.origins[new] = list(graph.origins[node])
        mapping[node] = new
        states.append(state)
    return kept, states


def _cut_drafts(
    graph: DraftGraph, *, known: int, end_state: int, constraint: SyntaxConstraint, stops: set[int]
) -> DraftGraph:
    """:func:`_cut`'s graph alone (what drafting keeps before pruning)."""
    return _cut(graph, known, end_state, constraint, stops)[0]


def _accept(
    graph: DraftGraph,
    logits: NodeLogits,
    choose: _Chooser,
    known: int,
    output: list[int],
    budget: int,
    stops: set[int],
    states: list[int] | None = None,
) -> tuple[list[int], int | None]:
    """Walk down the graph from the end of its ``known`` chain while the model's choice is a
    drafted child: returns the accepted path (chain included) and the model's choice after it
    (the next root). ``states`` are the syntax constraint's states at the nodes, when there
    is one."""
    path = list(range(known))
    while True:
        node = path[-1]
        position = len(output) + len(path) - known
        state = states[node] if states is not None else 0
        choice = choose(logits, node, position, state)
        child = None if choice is None else graph.child(node, choice)
        if child is None or choice in stops or position >= budget:
            return path, choice
        path.append(child)


def _branch_choices(graph: DraftGraph, logits: NodeLogits, node: int, k: int) -> list[int] | None:
    """The model's top-``k`` tokens after the best drafted child of the node where drafting
    failed: a guess at what follows once the model's replacement token is in place."""
    if k <= 0 or not graph.children[node]:
        return None
    first = next(iter(graph.children[node].values()))
    return torch.topk(logits[first], k).indices.tolist()


def draft_tree(
    known: list[int],
    candidates: list[Candidate],
    config: DraftConfig,
    copying: bool,
    refine: Callable[[DraftGraph], DraftGraph] | None = None,
) -> DraftGraph:
    """The ``known`` tokens (the prompt, or the model's last choice) as a chain, the
    candidates merged below it (``refine`` applied, e.g. a syntax cut), pruned to the budget."""
    graph = chain(known)
    if len(known) <= MAX_CHAIN_WITH_DRAFTS:
        extend_graph(graph, candidates, config, copying=copying, max_depth=config.budget + 1)
        if refine is not None:
            graph = refine(graph)
    return prune(graph, config.budget, config.min_reach, required=len(known))


def verify_tree(loaded: LoadedModel, cache: Any, graph: DraftGraph, known: int) -> NodeLogits:
    """ONE forward over the graph; the next-token logits of its nodes (a graph that is only
    its known chain is fed as a plain sequence)."""
    model, device = loaded.model, loaded.device
    if len(graph) == known:
        return NodeLogits.of_node(graph, known - 1, kv.append(model, cache, graph.tokens, device))
    return NodeLogits(model, verify_graph(model, cache, graph, device), graph)


def speculate(
    loaded: LoadedModel,
    prompt_ids: list[int],
    document_ids: list[int],
    *,
    config: DraftConfig,
    max_new_tokens: int = 2048,
    sampling: Sampling | None = None,
    target_ids: list[int] | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    trace: list[DraftStep] | None = None,
    mode: str = "rewrite",
    syntax: SyntaxConstraint | None = None,
) -> tuple[list[int], RewriteStats]:
    """Decode after ``prompt_ids`` with drafts from ``document_ids``; returns the output
    tokens (end-of-sequence excluded) and the costs. With ``target_ids`` the model's choice
    is the target's token (oracle mode); otherwise greedy or sampled as ``sampling`` says.
    The first draft tree is verified in the prompt's own forward. Drafting steps are appended
    to ``trace`` when one is given. With ``syntax`` every choice is masked to the tokens that
    keep the output a prefix of the region's language (ending only where the file is whole)
    and drafts are cut at the first token it refuses."""
    start = time.perf_counter()
    sampling = sampling or Sampling()
    stops = stop_tokens(loaded)
    stats = RewriteStats(mode=mode, prefill_tokens=len(prompt_ids))
    clock = PhaseClock(loaded, stats)
    room = loaded.context_length - len(prompt_ids) - config.budget - 1
    if room < 16:
        raise ContextTooLongError(
            f"the document needs about {len(prompt_ids)} prompt tokens but the model's context "
            f"is {loaded.context_length}; edit a smaller range or use a longer-context model"
        )
    budget = min(max_new_tokens, room)
    cache = kv.new_cache(loaded.model)
    choose = _Chooser(sampling, target_ids, loaded.device, syntax, frozenset(stops))
    drafter = Drafter(document_ids, config, stop=draft_stop(loaded))
    output: list[int] = []
    known = list(prompt_ids)
    state = syntax.start if syntax is not None else 0
    branch: list[int] | None = None
    copied_lines = generated_lines = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("rewrite cancelled")
        candidates = drafter.candidates(output, branch)
        if trace is not None:
            trace.append(DraftStep(len(output), tuple(candidates), drafter.copying))
        states = None
        if syntax is not None:
            cut = partial(
                _cut_drafts, known=len(known), end_state=state, constraint=syntax, stops=stops
            )
            graph = draft_tree(known, candidates, config, drafter.copying, cut)
            states = _cut(graph, len(known), state, syntax, stops)[1]
        else:
            graph = draft_tree(known, candidates, config, drafter.copying)
        clock.host()
        past = kv.cache_length(cache)
        prefill = not output
        logits = verify_tree(loaded, cache, graph, len(known))
        clock.forward(prefill=prefill)
        stats.forwards += not prefill
        stats.drafted_tokens += len(graph) - len(known)
        path, choice = _accept(graph, logits, choose, len(known), output, budget, stops, states)
        if states is not None:
            state = states[path[-1]]
        clock.host()
        keep_path(loaded.model, cache, past, graph, path, loaded.device)
        clock.forward(prefill=prefill)
        accepted = [graph.tokens[n] for n in path[len(known) :]]
        output.extend(accepted)
        stats.copied_tokens += len(accepted)
        drafter.advance(accepted, [graph.document_index(n) for n in path[len(known) :]])
        branch = _branch_choices(graph, logits, path[-1], config.top_k)
        copied_lines += _decode(loaded, accepted).count("\n")
        if on_progress is not None and output:
            on_progress(Progress(stats.forwards, copied_lines, generated_lines, len(output)))
        if choice is None or choice in stops:
            break
        if len(output) >= budget:
            stats.truncated = True
            break
        if syntax is not None:
            state = syntax.token_step(state, choice)
            if state < 0:
                raise RuntimeError(f"token {choice} was chosen under the syntax mask but refused")
        output.append(choice)
        stats.generated_tokens += 1
        generated_lines += _decode(loaded, [choice]).count("\n")
        drafter.advance([choice], [None])
        known = [choice]
    stats.lines_copied, stats.lines_generated = copied_lines, generated_lines
    stats.accepted_per_forward = len(output) / max(stats.forwards, 1)
    stats.wall_s = time.perf_counter() - start
    return output, stats


def _decode(loaded: LoadedModel, token_ids: list[int]) -> str:
    return loaded.tokenizer.decode(token_ids, clean_up_tokenization_spaces=False)


def _line_range(document: Document, lines: tuple[int, int] | None) -> tuple[str, str, str]:
    """``(before, range text, after)``: the document split around ``lines`` (1-based,
    inclusive), or ``("", document, "")`` for the whole file."""
    if lines is None:
        return "", document.text, ""
    first, last = lines
    if not 1 <= first <= last <= document.n_lines:
        raise ValueError(
            f"lines {first}-{last} are outside the document (it has {document.n_lines} lines)"
        )
    parts = document.lines
    return "".join(parts[: first - 1]), "".join(parts[first - 1 : last]), "".join(parts[last:])


def _with_budget(
    config: DraftConfig | None, draft_budget: int | None, device: torch.device
) -> DraftConfig:
    """``config`` or the shipped default for ``device``, its budget replaced by
    ``draft_budget`` if given."""
    config = config or load_draft_config(device=device)
    return config if draft_budget is None else replace(config, budget=draft_budget)


def rewrite(
    loaded: LoadedModel,
    document: str,
    instruction: str,
    *,
    config: DraftConfig | None = None,
    max_new_tokens: int = 2048,
    sampling: Sampling | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    lines: tuple[int, int] | None = None,
    draft_budget: int | None = None,
    syntax: SyntaxConstraint | None = None,
) -> DecodeResult:
    """Let the model rewrite ``document`` as ``instruction`` asks, speculating from the
    document with the calibrated draft graph (``config``, default: the shipped one for the
    model's device; ``draft_budget`` overrides its nodes per forward). With ``lines=(i, j)``
    the model rewrites only those lines (drafts come from them) and the result is the whole
    document with them replaced. The reply is extracted exactly, a surrounding code fence
    removed; a spent budget marks the result ``truncated``. ``syntax`` (built for the rewritten region)
    keeps the new text a prefix of a file of its language that ends only where the whole
    file parses."""
    config = _with_budget(config, draft_budget, loaded.device)
    tokenizer = loaded.tokenizer
    shown = Document(document)
    head, part, tail = _line_range(shown, lines)
    output, stats = speculate(
        loaded,
        rewrite_prompt(tokenizer, shown, instruction, lines),
        tokenizer.encode(part, add_special_tokens=False),
        config=config,
        max_new_tokens=max_new_tokens,
        sampling=sampling,
        on_progress=on_progress,
        cancel=cancel,
        syntax=syntax,
    )
    final_newline = part.endswith(("\n", "\r")) or not part
    text = extract_file(_decode(loaded, output), final_newline)
    return DecodeResult(None, head + text + tail, stats)


def rewrite_forced(
    loaded: LoadedModel,
    document: str,
    instruction: str,
    target: str,
    *,
    config: DraftConfig | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    trace: list[DraftStep] | None = None,
    draft_budget: int | None = None,
    syntax: SyntaxConstraint | None = None,
) -> DecodeResult:
    """Rewrite with the model's choices forced to ``target`` (the oracle, as the baselines
    force it): every forward still runs, so forwards and wall-clock are real, and acceptance
    can be measured without trained weights. ``syntax`` cuts the drafts as in
    :func:`rewrite` (the target itself must parse)."""
    config = _with_budget(config, draft_budget, loaded.device)
    tokenizer = loaded.tokenizer
    target_ids = tokenizer.encode(target, add_special_tokens=False)
    output, stats = speculate(
        loaded,
        rewrite_prompt(tokenizer, Document(document), instruction),
        tokenizer.encode(document, add_special_tokens=False),
        config=config,
        max_new_tokens=len(target_ids) + 1,
        target_ids=target_ids,
        on_progress=on_progress,
        cancel=cancel,
        trace=trace,
        mode="rewrite-oracle",
        syntax=syntax,
    )
    return DecodeResult(None, _decode(loaded, output), stats)
