"""The copy-as-decode loop: constrained program decoding with parallel-prefill copies and
speculative drafts of the program itself.

Every forward feeds the tokens that must go into the cache anyway (the prompt, or the model's
last choice with the literals the grammar forces after it and the copied text of a copy it
completed) followed by a draft tree of the program's likely continuation. Per step:

1. ``draft``: the known tokens as a chain, the drafter's proposals below it, pruned to the
   draft budget;
2. ``verify``: ONE forward over the whole tree;
3. ``accept``: walk down from the chain's end: at each node where the model decides, take
   its choice under the program FSM's mask at that node (greedy argmax, the speculative
   sampling rule, or the forced program's token) and follow the drafted child equal to it;
   forced literals and copied text need no decision; the choice that leaves the tree, and
   whatever the grammar forces after it, are fed by the next forward;
4. ``keep``: the cache keeps the accepted path only.

The program is exactly the one one-token-per-forward decoding writes: every choice is made
from the logits of the same prefix, under the same mask.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from cad.grammar import ProgramTokenIndex, allocate_token_bitmask, apply_token_bitmask_inplace
from cad.grammar.syntax import SyntaxConstraint
from cad.resolver import CopySpan, Document, Program, format_program, resolve
from cad.selector import kv
from cad.selector.draft_config import DraftConfig, ProgramPrior, load_draft_config
from cad.selector.draft_graph import DraftGraph, chain, prune
from cad.selector.errors import Cancelled, ContextTooLongError
from cad.selector.loading import LoadedModel
from cad.selector.program_drafting import ProgramDrafter
from cad.selector.prompt import program_prompt
from cad.selector.sampling import (
    Sampling,
    TokenChooser,
    batched_reads,
    greedy_path,
    speculative_choices,
    to_device,
)
from cad.selector.stats import DecodeResult, DecodeStats, Progress
from cad.selector.tape import ProgramTape
from cad.selector.timing import PhaseClock
from cad.selector.tree_verify import NodeLogits, keep_path, verify_graph

ProgressCallback = Callable[[Progress], None]
Logits = NodeLogits | dict[int, torch.Tensor]
MAX_CHAIN_WITH_DRAFTS = 4096
"""Known tokens a forward may carry together with a draft tree. The tree forward uses a
dense attention mask over chain and tree; a longer chain (a long prompt or copy) is fed on
its own, and the next forward drafts."""


class Choice:
    """The model's choice at a node: the forced program's token, the masked argmax, or a
    masked sample under the speculative rule for the drafted children. The mask is the
    tape's (the program FSM's, intersected with a syntax constraint when there is one),
    packed and applied on the logits' device; ``chooser`` is unused when ``target`` is
    given (forced mode).

    With ``batched`` (a GPU: :func:`batched_reads`) the choices along a draft path are made
    together: the tape walks ahead along the drafted first children as if the model chose
    them, filling the mask of every decision on the way (:func:`walk_ahead`), then one
    sequence of tensor operations masks, chooses and finds where the choices leave the
    draft, and one read brings back the accepted choices and the first one that differs.
    Each choice is made from the same logits under the same mask as one at a time, so the
    program is the same."""

    def __init__(
        self, chooser: TokenChooser | None, target: bytes | None, *, batched: bool = False
    ) -> None:
        if chooser is None and target is None:
            raise ValueError("a model's choice needs a token chooser")
        self.chooser = chooser
        self.target = target
        self.batched = batched
        self._graph: DraftGraph | None = None
        self._known: dict[int, int] = {}
        self._masks: torch.Tensor | None = None

    @torch.inference_mode()
    def __call__(
        self, tape: ProgramTape, graph: DraftGraph, logits: Logits, node: int, limit: int
    ) -> int:
        if self.target is not None:
            return tape.target_token(self.target)
        drafted = list(graph.children[node])
        if not (self.batched and drafted and isinstance(logits, NodeLogits)):
            return self.one(tape, logits[node], drafted)
        if self._graph is not graph:
            self._graph, self._known = graph, {}
        if node not in self._known:
            self._known.update(self.along_path(tape, graph, logits, node, limit))
        return self._known[node]

    def one(self, tape: ProgramTape, logits: torch.Tensor, drafted: list[int]) -> int:
        """The choice at one node from its ``logits`` (masked in place)."""
        chooser = self.chooser
        assert chooser is not None
        if chooser.sampling.temperature <= 0 or not drafted:
            return chooser.choose(logits, tape.matcher)
        chooser.fill(tape.matcher)
        apply_token_bitmask_inplace(logits, to_device(chooser.bitmask[0], logits.device))
        return speculative_choices(logits[None], [drafted], chooser.sampling, chooser.generator)[0]

    def along_path(
        self, tape: ProgramTape, graph: DraftGraph, logits: NodeLogits, node: int, limit: int
    ) -> dict[int, int]:
        """The choices at the decision nodes of the draft path from ``node``, up to the first
        that leaves it, made together with one read."""
        chooser = self.chooser
        assert chooser is not None
        nodes, expected = walk_ahead(tape, graph, node, limit, self._mask_rows)
        masks = self._mask_rows(len(nodes))[: len(nodes)]
        rows = logits.rows(nodes)
        if chooser.sampling.temperature <= 0:
            return dict(zip(nodes, greedy_path(rows, masks, expected), strict=False))
        apply_token_bitmask_inplace(rows, to_device(masks, rows.device))
        children = [list(graph.children[n]) for n in nodes]
        picks = speculative_choices(rows, children, chooser.sampling, chooser.generator)
        chosen: dict[int, int] = {}
        for decided, pick, draft in zip(nodes, picks, expected, strict=True):
            chosen[decided] = pick
            if pick != draft:
                break
        return chosen

    def _mask_rows(self, count: int) -> torch.Tensor:
        """A host bitmask of at least ``count`` rows the walk fills (pinned on a GPU; grown
        by doubling, the rows filled so far kept)."""
        assert self.chooser is not None
        old = self._masks
        if old is None or old.shape[0] < count:
            rows = max(count, 2 * (0 if old is None else old.shape[0]), 16)
            masks = allocate_token_bitmask(rows, self.chooser.bitmask.shape[1] * 32)
            if self.chooser.device.type == "cuda":
                masks = masks.pin_memory()
            if old is not None:
                masks[: old.shape[0]] = old
            self._masks = masks
        return self._masks


def walk_ahead(
    tape: ProgramTape,
    graph: DraftGraph,
    node: int,
    limit: int,
    masks: Callable[[int], torch.Tensor],
) -> tuple[list[int], list[int]]:
    """Walk the tape from decision ``node`` along the draft as if the model chose each
    drafted first child, exactly as :func:`accept` would walk it: the decision nodes passed
    and the token drafted after each (-1 where none is, or where the walk stops). The mask at
    the ``i``-th decision is written to row ``i`` of ``masks(i + 1)``. The walk ends at a
    node without drafts, at a drafted token the mask refuses, at the end of the program or
    of the token budget, or where the forced tokens leave the tree; the tape is then put
    back as it was."""
    mark = tape.mark()
    nodes: list[int] = []
    expected: list[int] = []
    try:
        while tape.stats.generated_tokens < limit:
            row = len(nodes)
            buffer = masks(row + 1)
            tape.matcher.fill_next_token_bitmask(buffer, row)
            nodes.append(node)
            expected.append(-1)
            if not graph.children[node]:
                break
            token = next(iter(graph.children[node]))
            if not _allowed(buffer[row], token):
                break
            expected[-1] = token
            tape.decide(token)
            written = [token, *tape.take_forced()]
            if tape.finished:
                break
            for following in written:
                child = graph.child(node, following)
                if child is None:
                    return nodes, expected
                node = child
    finally:
        tape.undo(mark)
    return nodes, expected


def _allowed(row: torch.Tensor, token: int) -> bool:
    """Whether the packed bitmask ``row`` allows ``token``."""
    word, bit = divmod(token, 32)
    return word < row.shape[0] and bool((int(row[word]) >> bit) & 1)


class Decoder:
    """Decodes edit programs with one loaded model; reusable across documents.

    ``edit`` lets the model choose (greedy or sampled) under the program FSM; with
    ``program=`` it follows that program instead (forced-program mode: the model still runs
    every forward, so costs are real, but each model-decided token is taken from the program).
    ``config`` (default: the shipped draft configuration) gives the draft budget and the
    calibrated program prior; ``draft_budget`` overrides the budget, 0 decodes one
    model-decided token per forward."""

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        max_new_tokens: int = 2048,
        subline: bool = False,
        sampling: Sampling | None = None,
        config: DraftConfig | None = None,
        draft_budget: int | None = None,
    ) -> None:
        self.loaded = loaded
        self.max_new_tokens = max_new_tokens
        self.subline = subline
        self.sampling = sampling or Sampling()
        config = config or load_draft_config(device=loaded.device)
        self.budget = config.budget if draft_budget is None else draft_budget
        if self.budget < 0:
            raise ValueError("the draft budget cannot be negative")
        self.prior = config.program
        self.index = ProgramTokenIndex.for_tokenizer(loaded.tokenizer, loaded.vocab_size)

    def encode(self, text: str) -> list[int]:
        """The tokenizer's ids for ``text``, no special tokens."""
        return self.loaded.tokenizer.encode(text, add_special_tokens=False)

    def check_context(self, prompt_tokens: int, document: str) -> int:
        """Raise if the prompt, a copy of the document and a draft tree cannot fit; return the
        token budget."""
        needed = prompt_tokens + len(self.encode(document)) + self.budget
        room = self.loaded.context_length - needed
        if room < 16:
            raise ContextTooLongError(
                f"the document needs about {prompt_tokens} prompt tokens but the model's context "
                f"is {self.loaded.context_length}; edit a smaller range or use a longer-context model"
            )
        return min(self.max_new_tokens, room)

    def edit(
        self,
        document: str,
        instruction: str,
        *,
        program: Program | None = None,
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        syntax: SyntaxConstraint | None = None,
    ) -> DecodeResult:
        """Decode a program that edits ``document`` as ``instruction`` asks; resolve it.
        With ``syntax`` the resolved text stays a prefix of a file of that language and the
        program ends only on a whole file (``cad.grammar.syntax``)."""
        start = time.perf_counter()
        doc = Document(document)
        target = None
        subline = self.subline
        if program is not None:
            resolve(program, doc)
            target = format_program(program).encode("utf-8")
            subline = subline or any(isinstance(op, CopySpan) for op in program.ops)
        tape = ProgramTape(self.index, self.encode, doc, subline=subline, syntax=syntax)
        clock = PhaseClock(self.loaded, tape.stats)
        drafter = ProgramDrafter(self.index, self.encode, doc, subline=subline, prior=self.prior)
        prompt = program_prompt(self.loaded.tokenizer, doc, instruction, subline=subline)
        limit = self.check_context(len(prompt), document)
        tape.stats.prefill_tokens = len(prompt)
        chooser = TokenChooser.for_model(self.loaded, self.sampling)
        choose = Choice(chooser, target, batched=batched_reads(self.loaded.device))
        cache = kv.new_cache(self.loaded.model)
        pending = prompt + tape.take_forced()
        prefill = True
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled("edit cancelled")
            graph = draft(tape, drafter, pending, self.budget)
            clock.host()
            past = kv.cache_length(cache)
            logits = self.verify(tape, cache, graph, len(pending), prefill=prefill)
            clock.forward(prefill=prefill)
            path, pending = accept(tape, graph, logits, choose, len(pending), limit)
            clock.host()
            keep_path(self.loaded.model, cache, past, graph, path, self.loaded.device)
            clock.forward(prefill=prefill)
            prefill = False
            if on_progress is not None:
                on_progress(tape.progress())
            if tape.finished:
                break
        tape.stats.wall_s = time.perf_counter() - start
        return DecodeResult(tape.resolver.program, tape.resolver.text, tape.stats)

    def verify(
        self, tape: ProgramTape, cache: Any, graph: DraftGraph, known: int, *, prefill: bool
    ) -> Logits:
        """Step 2: ONE forward over the graph; the next-token logits of its nodes. A graph
        that is only the known chain is fed as a plain sequence."""
        model, device = self.loaded.model, self.loaded.device
        if len(graph) == known:
            logits: Logits = {known - 1: kv.append(model, cache, graph.tokens, device)}
        else:
            logits = NodeLogits(model, verify_graph(model, cache, graph, device), graph)
        tape.stats.forwards += not prefill
        tape.stats.drafted_tokens += len(graph) - known
        return logits


def draft(tape: ProgramTape, drafter: ProgramDrafter, known: list[int], budget: int) -> DraftGraph:
    """Step 1: the ``known`` tokens as a chain, the drafts of the program's continuation
    below it, pruned to ``budget`` drafted nodes."""
    graph = chain(known)
    if budget and len(known) <= MAX_CHAIN_WITH_DRAFTS and not tape.finished:
        drafter.grow(graph, len(graph) - 1, tape.matcher.ops, tape.op_prefix(), budget)
    return prune(graph, budget, required=len(known))


def accept(
    tape: ProgramTape,
    graph: DraftGraph,
    logits: Logits,
    choose: Choice,
    known: int,
    limit: int,
) -> tuple[list[int], list[int]]:
    """Step 3: walk down from the end of the known chain, the tape deciding as the model
    chooses and taking every forced literal and copied text; returns the accepted path
    (graph nodes, chain included) and the tape's tokens the next forward must feed."""
    node = known - 1
    path = list(range(known))
    while not tape.finished:
        if tape.stats.generated_tokens >= limit:
            tape.finish_truncated()
            break
        token = choose(tape, graph, logits, node, limit)
        tape.decide(token)
        written = [token, *tape.take_forced()]
        if tape.finished:
            break
        for index, following in enumerate(written):
            child = graph.child(node, following)
            if child is None:
                return path, written[index:]
            node = child
            path.append(node)
    return path, []


def replay_forced(
    index: ProgramTokenIndex,
    encode: Callable[[str], list[int]],
    document: str,
    program: Program,
    *,
    budget: int,
    prior: ProgramPrior | None = None,
    subline: bool = False,
    prompt_tokens: int = 0,
) -> DecodeStats:
    """Forced-program decoding without a model: acceptance against a forced program needs no
    logits, so the draft and accept steps run alone and count the forwards the decoder would
    take (exactly those of ``Decoder.edit(..., program=program)`` after a prompt of
    ``prompt_tokens``). What calibration and the sub-line oracle price programs with."""
    doc = Document(document)
    subline = subline or any(isinstance(op, CopySpan) for op in program.ops)
    tape = ProgramTape(index, encode, doc, subline=subline)
    drafter = ProgramDrafter(index, encode, doc, subline=subline, prior=prior)
    choose = Choice(None, format_program(program).encode("utf-8"))
    pending = [-1] * prompt_tokens + tape.take_forced()
    prefill = True
    while not tape.finished:
        graph = draft(tape, drafter, pending, budget)
        known = len(pending)
        _, pending = accept(tape, graph, _Unread(), choose, known, 1 << 30)
        tape.stats.forwards += not prefill
        tape.stats.drafted_tokens += len(graph) - known
        prefill = False
    return tape.stats


class _Unread(dict):
    """Logits nobody reads: forced mode chooses from the program."""

    def __missing__(self, node: int) -> None:
        return None


def decode_forced(
    loaded: LoadedModel, document: str, instruction: str, program: Program, **options: Any
) -> DecodeResult:
    """Forced-program decode in one call (tests and benchmarks)."""
    return Decoder(loaded, **options).edit(document, instruction, program=program)
