"""The copy-as-decode loop: constrained program decoding with parallel-prefill copies and
speculative drafts of the program itself.

Every forward feeds the tokens that must go into the cache anyway (the prompt, or the model's
last choice with the literals the grammar forces after it and the copied text of a copy it
completed) followed by a draft tree of the program's likely continuation. Per step:

1. ``draft``: the known tokens as a chain, the drafter's proposals below it, pruned to the
   draft budget (native code, one call);
2. ``verify``: ONE forward over the whole tree (:func:`cad.selector.speculation.verify_draft`);
3. ``accept``: walk down from the chain's end: at each node where the model decides, take
   its choice under the program FSM's mask at that node (greedy argmax, the speculative
   sampling rule, or the forced program's token) and follow the drafted child equal to it;
   forced literals and copied text need no decision; the choice that leaves the tree, and
   whatever the grammar forces after it, are fed by the next forward (native code: the
   tape's walk, calling back only for the model's choices);
4. ``keep``: the cache keeps the accepted path only.

The program is exactly the one one-token-per-forward decoding writes: every choice is made
from the logits of the same prefix, under the same mask. With a syntax constraint the tape
is the Python :class:`ProgramTape` (its matcher is held to the language in Python) and the
walk is :func:`accept`; the drafts are native either way.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from cad.grammar import ProgramTokenIndex
from cad.grammar._native import DraftTree
from cad.grammar.syntax import SyntaxConstraint
from cad.resolver import CopySpan, Document, Program, format_program, resolve
from cad.selector import kv
from cad.selector.draft_config import DraftConfig, ProgramPrior, load_draft_config
from cad.selector.errors import Cancelled, ContextTooLongError
from cad.selector.line_tokens import LineTokens
from cad.selector.loading import LoadedModel
from cad.selector.program_drafting import ProgramDrafter
from cad.selector.program_tokens import DocumentTokens
from cad.selector.prompt import program_prompt
from cad.selector.sampling import Sampling, TokenChooser, batched_reads
from cad.selector.speculation import (
    MAX_CHAIN_WITH_DRAFTS,
    Choice,
    Logits,
    ProgressCallback,
    verify_draft,
)
from cad.selector.stats import DecodeResult, DecodeStats
from cad.selector.tape import NativeTape, ProgramTape, token_source
from cad.selector.timing import PhaseClock
from cad.selector.tree_verify import TreeLayout, keep_path

Tape = NativeTape | ProgramTape

__all__ = [
    "Choice",
    "Decoder",
    "ProgramDecoding",
    "accept",
    "decode_forced",
    "draft",
    "forced_forwards",
    "replay_forced",
    "walk_ahead",
]


_LITERALS: weakref.WeakKeyDictionary[ProgramTokenIndex, dict[bytes, list[int]]] = (
    weakref.WeakKeyDictionary()
)


def literal_tokens(index: ProgramTokenIndex) -> dict[bytes, list[int]]:
    """The forced literals' tokens of ``index``'s tokenizer, kept across decodes (the
    ``encode`` every decode of that index is given must be that tokenizer's)."""
    return _LITERALS.setdefault(index, {})


def walk_ahead(
    tape: Tape,
    graph: Any,
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
    if isinstance(tape, NativeTape):
        return tape.walk_ahead(graph, node, limit, masks)
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
            drafted = graph.child_tokens(node)
            if not drafted:
                break
            token = drafted[0]
            if not _allowed(buffer[row], token):
                break
            expected[-1] = token
            tape.decide(token)
            written = [token, *tape.take_forced()]
            if tape.finished:
                break
            for following in written:
                child = graph.child(node, following)
                if child < 0:
                    return nodes, expected
                node = child
    finally:
        tape.undo(mark)
    return nodes, expected


def _allowed(row: torch.Tensor, token: int) -> bool:
    """Whether the packed bitmask ``row`` allows ``token``."""
    word, bit = divmod(token, 32)
    return word < row.shape[0] and bool((int(row[word]) >> bit) & 1)


class ProgramDecoding:
    """What every program decoder holds for one loaded model: the token budget, sub-line
    mode, sampling, the draft budget per forward (``draft_budget``, default: the draft
    configuration's program budget; 0 decodes one model-decided token per forward) and the
    tokenizer's program token index."""

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
        self.config = config or load_draft_config(device=loaded.device)
        self.budget = self.config.program_draft_budget if draft_budget is None else draft_budget
        if self.budget < 0:
            raise ValueError("the draft budget cannot be negative")
        self.index = ProgramTokenIndex.for_tokenizer(loaded.tokenizer, loaded.vocab_size)

    def encode(self, text: str) -> list[int]:
        """The tokenizer's ids for ``text``, no special tokens."""
        return self.loaded.tokenizer.encode(text, add_special_tokens=False)

    def token_budget(self, prompt_tokens: int, copy_tokens: int, copied: str, advice: str) -> int:
        """Raise if the prompt, ``copy_tokens`` of copied text (``copied`` says of what) and
        a draft tree cannot fit the model's context (``advice`` says what to do); return the
        budget of model-decided tokens."""
        needed = prompt_tokens + copy_tokens + self.budget + 16
        context = self.loaded.context_length
        if needed > context:
            raise ContextTooLongError(
                f"the edit needs about {needed} tokens of context ({prompt_tokens} of prompt, "
                f"{copy_tokens} for {copied}, {self.budget} of draft tree and 16 to "
                f"write) but the model's context is {context}; {advice}"
            )
        return min(self.max_new_tokens, context - needed + 16)

    def run(
        self,
        tape: Any,
        pending: list[int],
        fill: Callable[[list[int], DraftTree], None],
        choose: Choice,
        limit: int,
        clock: PhaseClock,
        on_progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> None:
        """The loop of both decoders, from the prompt (``pending``, with what the tape forces
        after it) to the end of the program: ``fill`` puts the known tokens and their drafts
        into the tree, ONE forward verifies it, the tape accepts along it as the model
        chooses, and the cache keeps the accepted path."""
        cache = kv.new_cache(self.loaded.model)
        layout, tree = TreeLayout(), DraftTree()
        clock.setup()
        prefill = True
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled("edit cancelled")
            fill(pending, tree)
            clock.host("draft")
            past = kv.cache_length(cache)
            logits = verify_draft(
                self.loaded, cache, tree, len(pending), layout, clock, prefill=prefill
            )
            tape.stats.forwards += not prefill
            tape.stats.drafted_tokens += len(tree) - len(pending)
            path, pending = accept(tape, tree, logits, choose, len(pending), limit)
            clock.host("accept")
            keep_path(self.loaded.model, cache, past, tree, path, self.loaded.device)
            clock.forward(prefill=prefill)
            prefill = False
            if on_progress is not None:
                on_progress(tape.progress())
            clock.host("bookkeeping")
            clock.next_forward()
            if tape.finished:
                return


class Decoder(ProgramDecoding):
    """Decodes edit programs with one loaded model; reusable across documents.

    ``edit`` lets the model choose (greedy or sampled) under the program FSM; with
    ``program=`` it follows that program instead (forced-program mode: the model still runs
    every forward, so costs are real, but each model-decided token is taken from the program).
    ``config`` (default: the shipped draft configuration) gives the draft budget and the
    calibrated program prior; ``draft_budget`` overrides the budget, 0 decodes one
    model-decided token per forward."""

    @property
    def prior(self) -> ProgramPrior:
        """The calibrated program prior the drafts are priced with."""
        return self.config.program

    @property
    def literals(self) -> dict[bytes, list[int]]:
        """The forced literals' tokens of this tokenizer, kept across decodes."""
        return literal_tokens(self.index)

    def check_context(self, prompt_tokens: int, document_tokens: int) -> int:
        """Raise if the prompt, a copy of the document (``document_tokens`` long) and a draft
        tree cannot fit; return the token budget."""
        return self.token_budget(
            prompt_tokens,
            document_tokens,
            "a copy of the document",
            "edit a smaller range or use a longer-context model",
        )

    def new_tape(
        self,
        document: Document,
        *,
        subline: bool,
        syntax: SyntaxConstraint | None,
        source: Any,
        lines: LineTokens | None = None,
    ) -> Tape:
        """The tape of one edit: native for the plain program FSM, the Python tape when
        the program is held to a syntax constraint (``lines``: the document's own tokens by
        line, which ``source`` answers copies from on the native tape)."""
        if syntax is None:
            return NativeTape(self.index, document, source, subline=subline)
        return ProgramTape(
            self.index, self.encode, document, subline=subline, syntax=syntax, lines=lines
        )

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
        document_tokens = DocumentTokens.of(self.index, doc, self.encode(document))
        lines = LineTokens.of(self.loaded.tokenizer, self.index, doc, document_tokens)
        source = token_source(self.encode, doc, self.literals, lines)
        tape = self.new_tape(doc, subline=subline, syntax=syntax, source=source, lines=lines)
        clock = PhaseClock(self.loaded, tape.stats, started=start)
        drafter = ProgramDrafter(
            self.index,
            self.encode,
            doc,
            subline=subline,
            prior=self.prior,
            source=source,
            document_tokens=document_tokens,
        )
        prompt = program_prompt(self.loaded.tokenizer, doc, instruction, subline=subline)
        limit = self.check_context(len(prompt), len(document_tokens.ids))
        tape.stats.prefill_tokens = len(prompt)
        chooser = TokenChooser.for_model(self.loaded, self.sampling)
        batched = batched_reads(self.loaded.device)
        choose = Choice(chooser, target, batched=batched, walk=walk_ahead, clock=clock)
        pending = prompt + tape.take_forced()

        def fill(known: list[int], tree: DraftTree) -> None:
            draft(tape, drafter, known, self.budget, tree)

        self.run(tape, pending, fill, choose, limit, clock, on_progress, cancel)
        resolved = tape.resolver
        tape.stats.wall_s = time.perf_counter() - start
        return DecodeResult(resolved.program, resolved.text, tape.stats)


def draft(
    tape: Tape, drafter: ProgramDrafter, known: list[int], budget: int, tree: DraftTree
) -> None:
    """Step 1, into ``tree``: the ``known`` tokens as a chain, the drafts of the program's
    continuation below it, pruned to ``budget`` drafted nodes."""
    grow = bool(budget) and len(known) <= MAX_CHAIN_WITH_DRAFTS and not tape.finished
    ops = tape.matcher if isinstance(tape, NativeTape) else tape.matcher.ops
    drafter.draft(known, ops, tape.op_prefix(), budget, tree, grow=grow)


def accept(
    tape: Tape,
    graph: Any,
    logits: Logits,
    choose: Choice,
    known: int,
    limit: int,
) -> tuple[list[int], list[int]]:
    """Step 3: walk down from the end of the known chain, the tape deciding as the model
    chooses and taking every forced literal and copied text; returns the accepted path
    (graph nodes, chain included) and the tape's tokens the next forward must feed. A
    forced program is followed in one native call only without a model (a replay); with
    one, every decision still makes the model's choice (see :class:`Choice`)."""
    if isinstance(tape, NativeTape):
        path, pending = tape.accept(
            graph,
            known,
            limit,
            lambda node: choose(tape, graph, logits, node, limit),
            choose.target if choose.chooser is None else None,
        )
        return path.tolist(), pending
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
            if child is None or child < 0:
                return path, written[index:]
            node = child
            path.append(node)
    return path, []


def forced_forwards(
    tape: NativeTape,
    drafter: ProgramDrafter,
    pending: list[int],
    target: bytes,
    *,
    budget: int,
    limit: int = 1 << 30,
    clock: Callable[[str], None] | None = None,
) -> Iterator[tuple[list[int], list[int]]]:
    """A forced program's decode forward by forward, without a model: for each forward, the
    tokens it appends to the cache (``pending``, then the drafted tokens the program follows
    through the tree) and the tokens the next forward starts with (the program's next token
    first; empty once the program is complete). Acceptance against a forced program needs no
    logits, so these are exactly the forwards of ``Decoder.edit(..., program=...)``; an
    engine that runs the model elsewhere feeds them as they come (``cad.engine``). The
    tape's stats count the forwards after the first (the prompt's) and the drafted tokens;
    ``limit`` caps the model-decided tokens; ``clock``, when given, is called after each
    step with its kind (``draft``, ``accept``, then ``forward`` once the caller is done
    with the forward)."""
    tree = DraftTree()
    prefill = True
    while not tape.finished:
        draft(tape, drafter, pending, budget, tree)
        if clock is not None:
            clock("draft")
        known = len(pending)
        path, pending = tape.accept(tree, known, limit, None, target)
        tape.stats.forwards += not prefill
        tape.stats.drafted_tokens += len(tree) - known
        prefill = False
        if clock is not None:
            clock("accept")
        yield tree.tokens[path].tolist(), pending
        if clock is not None:
            clock("forward")


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
    clock: Callable[[str], None] | None = None,
    tokenizer: Any = None,
) -> DecodeStats:
    """Forced-program decoding without a model: acceptance against a forced program needs no
    logits, so the draft and accept steps run alone and count the forwards the decoder would
    take (exactly those of ``Decoder.edit(..., program=program)`` after a prompt of
    ``prompt_tokens``). What calibration, the sub-line oracle and ``bench.rewrite --replay``
    price programs with. ``clock``, when given, is called after each step with its kind
    (``draft``, ``accept``, then ``forward`` once a forward's work is done), so the host
    work can be timed as the decoder does it. ``tokenizer`` (the one ``encode`` calls), when
    given, lets copies of lines be read off the document's tokens as the decoder does
    (:mod:`cad.selector.line_tokens`)."""
    doc = Document(document)
    subline = subline or any(isinstance(op, CopySpan) for op in program.ops)
    tokens = DocumentTokens.of(index, doc, encode(document))
    lines = None if tokenizer is None else LineTokens.of(tokenizer, index, doc, tokens)
    source = token_source(encode, doc, literal_tokens(index), lines)
    tape = NativeTape(index, doc, source, subline=subline)
    drafter = ProgramDrafter(
        index, encode, doc, subline=subline, prior=prior, source=source, document_tokens=tokens
    )
    target = format_program(program).encode("utf-8")
    pending = [-1] * prompt_tokens + tape.take_forced()
    if clock is not None:
        clock("setup")
    for _ in forced_forwards(tape, drafter, pending, target, budget=budget, clock=clock):
        pass
    return tape.stats


def decode_forced(
    loaded: LoadedModel, document: str, instruction: str, program: Program, **options: Any
) -> DecodeResult:
    """Forced-program decode in one call (tests and benchmarks)."""
    return Decoder(loaded, **options).edit(document, instruction, program=program)
