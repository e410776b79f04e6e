"""Rewrite mode with calibrated draft graphs: the model writes the complete new file and the
decoder speculates its output from the ORIGINAL document, losslessly.

Per step: the token the model chose last is the root; the drafter proposes continuations
from the document; they merge into one prefix tree, pruned to the budget (native code, one
call); ONE forward verifies the whole tree; the longest path agreeing with the model's own
choices is accepted (greedy: the argmax at each node; sampling: the standard speculative
rule for deterministic drafts; the forced target: native code walks it); the model's choice
after that path becomes the next root; the cache keeps the accepted path only. The tokens
are exactly those plain decoding would emit.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from cad.grammar import Vocabulary, _native
from cad.grammar._native import DraftTree
from cad.grammar.bitmask import fill_from_allowed
from cad.grammar.syntax import SyntaxConstraint
from cad.resolver import Document
from cad.selector import kv
from cad.selector.draft_config import (
    SOURCE_KINDS,
    DraftConfig,
    load_draft_config,
    source_key,
    state_name,
)
from cad.selector.draft_graph import draft_tree
from cad.selector.drafting import Candidate
from cad.selector.errors import Cancelled, ContextTooLongError
from cad.selector.loading import LoadedModel
from cad.selector.prompt import rewrite_prompt
from cad.selector.sampling import Sampling, TokenChooser
from cad.selector.speculation import (
    MAX_CHAIN_WITH_DRAFTS,
    Choice,
    ProgressCallback,
    verify_draft,
)
from cad.selector.stats import DecodeResult, DecodeStats, Progress
from cad.selector.timing import PhaseClock
from cad.selector.tree_verify import NodeLogits, TreeLayout, keep_path

__all__ = [
    "DraftStep",
    "RewriteDrafter",
    "RewriteStats",
    "draft_stop",
    "draft_tree",
    "extract_file",
    "replay_rewrite",
    "rewrite",
    "rewrite_forced",
    "speculate",
    "stop_tokens",
]
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


class _SyntaxMask:
    """A syntax constraint's allowed tokens at one state, as a mask source for
    :meth:`Choice.one` (it fills a bitmask row like a matcher)."""

    def __init__(self, constraint: SyntaxConstraint, stops: frozenset[int]) -> None:
        self.constraint = constraint
        self.stops = stops
        self.state = constraint.start
        self.matcher = self

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the tokens allowed at :attr:`state` into ``bitmask[row]``."""
        fill_from_allowed(bitmask, row, self.constraint.allowed(self.state, self.stops))

    def step(self, state: int, token: int) -> int:
        """The state after a drafted ``token`` (-1 where the text cannot go on with it; a
        stop token keeps the state only where the region may end)."""
        if token in self.stops:
            return state if self.constraint.complete(state) else -1
        return self.constraint.token_step(state, token)


def native_config(config: DraftConfig) -> dict[str, Any]:
    """``config`` as the native rewrite drafter reads it: the counts, and per source rank
    its length and its rate tables while copying and while editing."""
    sources = []
    counts = (config.aligned, config.ngram, config.output, config.top_k)
    for kind, count in zip(SOURCE_KINDS, counts, strict=True):
        specs = []
        for rank in range(count):
            key = source_key(kind, rank)
            specs.append((
                config.length(key),
                config.rates.get(state_name(True), {}).get(key, []),
                config.rates.get(state_name(False), {}).get(key, []),
            ))  # fmt: skip
        sources.append(specs)
    return {
        "aligned": config.aligned,
        "ngram": config.ngram,
        "output": config.output,
        "top_k": config.top_k,
        "min_ngram": config.min_ngram,
        "max_ngram": config.max_ngram,
        "budget": config.budget,
        "min_reach": config.min_reach,
        "default_rate": config.default_rate,
        "sources": sources,
    }


class RewriteDrafter:
    """Rewrite mode's drafter in native code (the Python reference is
    :class:`cad.selector.drafting.Drafter` with :func:`cad.selector.draft_graph.prune`):
    the alignment with ``document_ids``, the candidates it suggests, merged below the known
    tokens and pruned to the budget in one call per forward."""

    def __init__(self, document_ids: list[int], config: DraftConfig, stop: int | None = None):
        self.config = config
        self.native = _native.RewriteDrafter(
            document_ids, -1 if stop is None else stop, native_config(config)
        )

    def draft(
        self,
        known: list[int],
        branch: list[int] | None,
        tree: DraftTree,
        mask: _SyntaxMask | None = None,
        state: int = 0,
    ) -> np.ndarray | None:
        """Into ``tree``: the candidates for the output so far below ``known``, pruned;
        with a syntax ``mask`` only drafts the language allows (from ``state`` at the chain's
        end), and the kept nodes' states come back.

        Cost: one native call, linear in the candidates' tokens (a child lookup and a
        multiplication each) plus the pruning's heap operations; 14 µs at the median and
        30 µs at p90 per forward at budget 96 on the click commits (2-core x86-64 CPU, under
        load). With a syntax ``mask`` each kept node costs one call of ``mask.step``."""
        return self.native.draft(
            known,
            branch or [],
            len(known) <= MAX_CHAIN_WITH_DRAFTS,
            self.config.budget + 1,
            tree,
            None if mask is None else mask.step,
            state,
        )

    def candidates(self) -> list[Candidate]:
        """The candidates of the last draft (for traces)."""
        return [
            Candidate(key, tokens, positions) for key, tokens, positions in self.native.candidates()
        ]

    def advance(self, token: int) -> None:
        """Move the alignment past a token the model chose itself."""
        self.native.advance(token, -1)

    def advance_path(self, tree: DraftTree, nodes: list[int]) -> None:
        """Move the alignment past accepted drafted nodes."""
        self.native.advance_path(tree, nodes)

    @property
    def copying(self) -> bool:
        """Whether the last token followed the alignment."""
        return self.native.copying

    @property
    def output(self) -> list[int]:
        """Every token advanced over: the output so far."""
        return self.native.output


_LINE_BREAKS: weakref.WeakKeyDictionary[Any, np.ndarray] = weakref.WeakKeyDictionary()


def line_breaks(loaded: LoadedModel) -> np.ndarray:
    """Per token id, how many line feeds its text holds (what the progress line counts)."""
    vocabulary = Vocabulary.for_tokenizer(loaded.tokenizer, loaded.vocab_size)
    found = _LINE_BREAKS.get(vocabulary)
    if found is None:
        counts = [(data or b"").count(b"\n") for data in vocabulary.token_bytes]
        found = np.array(counts, dtype=np.int64)
        _LINE_BREAKS[vocabulary] = found
    return found


def _branch_choices(tree: DraftTree, logits: NodeLogits, node: int, k: int) -> list[int] | None:
    """The model's top-``k`` tokens after the best drafted child of the node where drafting
    failed: a guess at what follows once the model's replacement token is in place."""
    first = tree.first_child(node)
    if k <= 0 or first < 0:
        return None
    return torch.topk(logits[first], k).indices.tolist()


def _accept(
    tree: DraftTree,
    logits: NodeLogits,
    choose: Choice,
    known: int,
    written: int,
    budget: int,
    stops: set[int],
    mask: _SyntaxMask | None,
    states: np.ndarray | None,
) -> tuple[list[int], int]:
    """Walk down the tree from the end of its ``known`` chain while the model's choice is a
    drafted child: returns the accepted path (chain included) and the model's choice after
    it (the next root). With a syntax ``mask`` each choice is made under the constraint at
    its node (``states``)."""
    path = list(range(known))
    while True:
        node = path[-1]
        position = written + len(path) - known
        if mask is None:
            choice = choose.unmasked(logits, node)
        else:
            choice = _masked_choice(tree, logits, choose, node, mask, states)
        child = tree.child(node, choice)
        if child < 0 or choice in stops or position >= budget:
            return path, choice
        path.append(child)


def _masked_choice(
    tree: DraftTree,
    logits: NodeLogits,
    choose: Choice,
    node: int,
    mask: _SyntaxMask,
    states: np.ndarray | None,
) -> int:
    """The model's choice after ``node`` under the syntax constraint at its state."""
    assert states is not None
    mask.state = int(states[node])
    return choose.one(mask, choose.row(logits, node), tree.child_tokens(node))


def _charge(
    tree: DraftTree,
    logits: NodeLogits,
    choose: Choice,
    nodes: list[int],
    mask: _SyntaxMask | None,
    states: np.ndarray | None,
) -> None:
    """The model's choices after ``nodes`` (the walk a forced rewrite accepted), made as
    :func:`_accept` makes them and dropped: a forced rewrite pays the projections, masks and
    choices of the decode it stands in for."""
    if mask is None:
        choose.charge(logits, nodes)
        return
    for node in nodes:
        _masked_choice(tree, logits, choose, node, mask, states)


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
    is the target's token (oracle mode: the choices are still made and then dropped, so the
    decode costs what it would if the model wrote the target); otherwise greedy or sampled
    as ``sampling`` says.
    The first draft tree is verified in the prompt's own forward. Drafting steps are appended
    to ``trace`` when one is given. With ``syntax`` every choice is masked to the tokens that
    keep the output a prefix of the region's language (ending only where the file is whole)
    and drafts are cut at the first token it refuses."""
    start = time.perf_counter()
    sampling = sampling or Sampling()
    stops = stop_tokens(loaded)
    stats = RewriteStats(mode=mode, prefill_tokens=len(prompt_ids))
    clock = PhaseClock(loaded, stats)
    needed = len(prompt_ids) + config.budget + 1 + 16
    if needed > loaded.context_length:
        raise ContextTooLongError(
            f"the edit needs about {needed} tokens of context ({len(prompt_ids)} of prompt, "
            f"{config.budget + 1} of draft tree and 16 to write) but the model's context is "
            f"{loaded.context_length}; edit a smaller range or use a longer-context model"
        )
    budget = min(max_new_tokens, loaded.context_length - needed + 16)
    cache = kv.new_cache(loaded.model)
    choose = Choice(TokenChooser.for_model(loaded, sampling), clock=clock)
    drafter = RewriteDrafter(document_ids, config, stop=draft_stop(loaded))
    mask = None if syntax is None else _SyntaxMask(syntax, frozenset(stops))
    breaks = line_breaks(loaded)
    target = None if target_ids is None else np.asarray(target_ids, dtype=np.int32)
    stop_list = sorted(stops)
    layout, tree = TreeLayout(), DraftTree()
    known = list(prompt_ids)
    state = syntax.start if syntax is not None else 0
    branch: list[int] | None = None
    written = copied_lines = generated_lines = 0
    clock.setup()
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("rewrite cancelled")
        states = drafter.draft(known, branch, tree, mask, state)
        if trace is not None:
            trace.append(DraftStep(written, tuple(drafter.candidates()), drafter.copying))
        clock.host("draft")
        past = kv.cache_length(cache)
        prefill = written == 0
        logits = verify_draft(loaded, cache, tree, len(known), layout, clock, prefill=prefill)
        stats.forwards += not prefill
        stats.drafted_tokens += len(tree) - len(known)
        assert isinstance(logits, NodeLogits)
        if target is not None:
            found, choice = _native.accept_forced_rewrite(
                tree, len(known), target, written, budget, stop_list
            )
            path = found.tolist()
            _charge(tree, logits, choose, path[len(known) - 1 :], mask, states)
        else:
            path, choice = _accept(
                tree, logits, choose, len(known), written, budget, stops, mask, states
            )
        if states is not None:
            state = int(states[path[-1]])
        clock.host("accept")
        keep_path(loaded.model, cache, past, tree, path, loaded.device)
        clock.forward(prefill=prefill)
        accepted = path[len(known) :]
        drafter.advance_path(tree, accepted)
        written += len(accepted)
        stats.copied_tokens += len(accepted)
        if config.top_k:
            branch = _branch_choices(tree, logits, path[-1], config.top_k)
            clock.choose()
        if accepted:
            copied_lines += int(breaks[tree.tokens_of(accepted)].sum())
        if on_progress is not None and written:
            on_progress(Progress(stats.forwards, copied_lines, generated_lines, written))
        if choice is None or choice in stops:
            break
        if written >= budget:
            stats.truncated = True
            break
        if syntax is not None:
            state = syntax.token_step(state, choice)
            if state < 0:
                raise RuntimeError(f"token {choice} was chosen under the syntax mask but refused")
        drafter.advance(choice)
        written += 1
        stats.generated_tokens += 1
        generated_lines += int(breaks[choice]) if choice < len(breaks) else 0
        known = [choice]
        clock.host("bookkeeping")
        clock.next_forward()
    clock.host("bookkeeping")
    clock.next_forward()
    output = drafter.output
    stats.lines_copied, stats.lines_generated = copied_lines, generated_lines
    stats.accepted_per_forward = len(output) / max(stats.forwards, 1)
    stats.wall_s = time.perf_counter() - start
    return output, stats


def replay_rewrite(
    document_ids: list[int],
    target_ids: list[int],
    config: DraftConfig,
    *,
    stop: int | None = None,
    prompt_tokens: int = 1,
    clock: Callable[[str], None] | None = None,
) -> list[int]:
    """The rewrite decode loop with ``target_ids`` forced and no model, in native code (as
    :func:`cad.training.calibrate.replay` replays it with the Python reference): the number of
    drafted nodes each forward verifies (the prompt's forward first), so its length is the
    forwards the decoder takes plus one. Top-k branches need the model's logits and are left
    out. ``clock``, when given, is called after each step with its kind (``draft``,
    ``accept``, then ``forward`` once a forward's work is done)."""
    drafter = RewriteDrafter(document_ids, replace(config, top_k=0), stop=stop)
    target = np.asarray(target_ids, dtype=np.int32)
    tree = DraftTree()
    known = [-1] * max(prompt_tokens, 1)
    written = 0
    drafted: list[int] = []
    if clock is not None:
        clock("setup")
    while True:
        drafter.draft(known, None, tree)
        drafted.append(len(tree) - len(known))
        if clock is not None:
            clock("draft")
        found, _ = _native.accept_forced_rewrite(tree, len(known), target, written, 1 << 60, [])
        accepted = found.tolist()[len(known) :]
        drafter.advance_path(tree, accepted)
        written += len(accepted)
        if clock is not None:
            clock("accept")
        if written >= len(target_ids):
            if clock is not None:
                clock("forward")
            return drafted
        drafter.advance(target_ids[written])
        written += 1
        known = [-1]
        if clock is not None:
            clock("forward")


def decoded_text(loaded: LoadedModel, token_ids: list[int]) -> str:
    """The text of ``token_ids`` exactly as the tokenizer spells it (no clean-up)."""
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


def with_budget(
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
    config = with_budget(config, draft_budget, loaded.device)
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
    text = extract_file(decoded_text(loaded, output), final_newline)
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
    force it): every forward runs and every choice acceptance reaches is still made (the
    logits projected, masked and chosen from) before the target's token replaces it, so
    forwards and wall-clock are those of a model writing ``target``, and acceptance can be
    measured without trained weights. ``syntax`` cuts the drafts as in
    :func:`rewrite` (the target itself must parse)."""
    config = with_budget(config, draft_budget, loaded.device)
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
    return DecodeResult(None, decoded_text(loaded, output), stats)
