"""Program mode in the engine: the copy-as-decode loop over a streaming-input session.

The loop is the in-process decoder's (``cad.selector.Decoder``), with the engine as the model:
the front end keeps the edit's tape (program FSM, incremental resolver, stats) and feeds the
engine one *chunk* at a time. A chunk is what the in-process decoder puts into one forward —
the last decision plus the forced literals and, when an op completed as a copy, the copied
text's tokens — and the engine prefills it in ONE forward on top of the session's KV cache,
then samples under the program FSM's mask (:mod:`cad.engine.processor`).

A given program (forced-program mode) is followed through draft trees, as ``cad edit`` follows
it: the front end drafts each forward's tree with the in-process drafter and walks the program
through it (``cad.selector.decoder.forced_forwards``), and each chunk is what that forward
keeps in the cache (the known tokens and the drafted path the program follows), its one
sample the program's next token, which the processor is told. So a forced program takes the
forwards and engine steps ``cad edit`` takes with the same draft budget. Free decoding stays
one decision per forward: vLLM 0.32 cannot take a streaming session's cache back past
rejected draft tokens, and runs no custom logits processor under its own speculative decoding.

A chunk stops after one decision wherever the next decision may be followed by forced bytes
(op openers, line numbers). Inside a gen body nothing is forced until ``</gen>``, so there the
engine keeps decoding and the chunk stops at the first token that could close the body (one
holding ``>``); a stop that did not close it costs no extra forward, since the stopping token
is re-fed as the next chunk's first token, as a decode step would feed it. The forwards and
bytes are therefore exactly the in-process decoder's.

Every chunk stays within the room the session has left in the model's context
(:mod:`cad.engine.context`): an edit that cannot fit is refused before its first chunk, and a
model that copies more than fits is stopped cleanly where the next chunk would not fit.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from cad.engine.context import (
    ContextWindow,
    check_program_fits,
    check_text_fits,
    decision_budget,
)
from cad.engine.wire import ProgramSpec
from cad.grammar import ProgramTokenIndex
from cad.resolver import CopySpan, Document, Program, format_program
from cad.selector import DecodeResult, DraftConfig, Progress, Sampling, load_draft_config
from cad.selector.decoder import forced_forwards, literal_tokens
from cad.selector.line_tokens import LineTokens
from cad.selector.program_drafting import ProgramDrafter
from cad.selector.program_tokens import DocumentTokens
from cad.selector.prompt import program_prompt
from cad.selector.tape import NativeTape, ProgramTape, token_source

GEN_OPEN = b"<gen>"
GEN_CLOSE = b"</gen>"
ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class Chunk:
    """One round trip to the engine: prefill ``tokens`` in one forward, then sample at most
    ``max_tokens`` under ``spec``'s mask, stopping early at any of ``stop_token_ids``."""

    tokens: list[int]
    max_tokens: int
    stop_token_ids: tuple[int, ...]
    spec: ProgramSpec


class Session(Protocol):
    """A streaming-input session: the engine keeps its KV cache between chunks."""

    async def run(self, chunk: Chunk) -> list[int]:
        """Send ``chunk``; the tokens sampled for it, the one that stopped it last. That last
        token is not in the engine's cache: the next chunk starts with it."""
        ...


class EngineProtocolError(RuntimeError):
    """The engine answered in a way the program FSM cannot follow."""


class EditTokenizer:
    """What program mode needs of the model's tokenizer: its ids for text, the program index
    (``cad.grammar.ProgramTokenIndex``), the tokens that may close a gen body, and the
    model's context length."""

    def __init__(self, tokenizer: Any, index: ProgramTokenIndex, context_length: int) -> None:
        self.tokenizer = tokenizer
        self.index = index
        self.context_length = context_length

    def encode(self, text: str) -> list[int]:
        """The tokenizer's ids for ``text``, no special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False)

    @property
    def longest_token(self) -> int:
        """The most bytes one token holds."""
        return self.index.vocabulary.longest_token

    @cached_property
    def gen_stops(self) -> tuple[int, ...]:
        """Every token whose bytes hold ``>``: the only ones that can end ``</gen>``."""
        return tuple(
            token
            for token, data in enumerate(self.index.vocabulary.token_bytes)
            if data and b">" in data
        )


def in_gen_body(program: bytes) -> bool:
    """Whether ``program`` (the canonical text so far) ends inside a gen body. A body cannot
    hold ``</gen>`` unescaped, so the last ``<gen>`` after the last ``</gen>`` is open."""
    return program.rfind(GEN_OPEN) > program.rfind(GEN_CLOSE)


@dataclass
class ProgramEdit:
    """An edit ready to run: its tape, prompt, decision budget and what each chunk tells the
    processor."""

    tape: ProgramTape
    prompt: list[int]
    budget: int
    widths: tuple[int, ...]
    subline: bool
    target: bytes | None


@dataclass
class ForcedEdit:
    """A given program ready to be followed through drafts: its native tape and drafter (the
    in-process decoder's), prompt, decision budget, target and the chunks' line widths."""

    tape: NativeTape
    drafter: ProgramDrafter
    prompt: list[int]
    budget: int
    widths: tuple[int, ...]
    subline: bool
    target: bytes


@dataclass
class _Checked:
    """What both plans start from: the document, the prompt, the document's tokens (whole and
    by line) and the decision budget, checked against the model's context, and the line widths
    every chunk tells the processor."""

    document: Document
    prompt: list[int]
    document_tokens: DocumentTokens
    lines: LineTokens
    widths: tuple[int, ...]
    budget: int
    subline: bool
    target: bytes | None


def _check(
    tokens: EditTokenizer,
    document: str,
    instruction: str,
    program: Program | None,
    subline: bool,
    max_new_tokens: int,
) -> _Checked:
    limit = tokens.context_length
    check_text_fits(len(document) + len(instruction), tokens.longest_token, limit)
    doc = Document(document)
    target = None
    if program is not None:
        subline = subline or any(isinstance(op, CopySpan) for op in program.ops)
    prompt = program_prompt(tokens.tokenizer, doc, instruction, subline=subline)
    document_ids = tokens.encode(document)
    budget = decision_budget(limit, len(prompt), len(document_ids), max_new_tokens)
    if program is not None:
        check_program_fits(
            tokens.index,
            tokens.encode,
            doc,
            program,
            prompt=len(prompt),
            limit=limit,
            subline=subline,
        )
        target = format_program(program).encode("utf-8")
    document_tokens = DocumentTokens.of(tokens.index, doc, document_ids)
    lines = LineTokens.of(tokens.tokenizer, tokens.index, doc, document_tokens)
    widths = tuple(len(line) for line in doc.lines)
    return _Checked(doc, prompt, document_tokens, lines, widths, budget, subline, target)


def plan_program_edit(
    tokens: EditTokenizer,
    document: str,
    instruction: str,
    program: Program | None,
    subline: bool,
    max_new_tokens: int,
) -> ProgramEdit:
    """Everything before the first chunk, refused with ``ContextTooLongError`` when it
    cannot fit the model's context (:mod:`cad.engine.context`). Tokenizes the document and
    follows a given program: CPU work the caller runs off the event loop."""
    checked = _check(tokens, document, instruction, program, subline, max_new_tokens)
    tape = ProgramTape(
        tokens.index, tokens.encode, checked.document, subline=checked.subline, lines=checked.lines
    )
    tape.stats.prefill_tokens = len(checked.prompt)
    return ProgramEdit(
        tape, checked.prompt, checked.budget, checked.widths, checked.subline, checked.target
    )


def plan_forced_edit(
    tokens: EditTokenizer,
    document: str,
    instruction: str,
    program: Program,
    subline: bool,
    max_new_tokens: int,
    config: DraftConfig,
) -> ForcedEdit:
    """:func:`plan_program_edit` for a given program followed through drafts: the native
    tape and the drafter with ``config``'s program prior, as ``cad edit`` builds them."""
    checked = _check(tokens, document, instruction, program, subline, max_new_tokens)
    doc, index = checked.document, tokens.index
    assert checked.target is not None
    source = token_source(tokens.encode, doc, literal_tokens(index), checked.lines)
    tape = NativeTape(index, doc, source, subline=checked.subline)
    tape.stats.prefill_tokens = len(checked.prompt)
    drafter = ProgramDrafter(
        index,
        tokens.encode,
        doc,
        subline=checked.subline,
        prior=config.program,
        source=source,
        document_tokens=checked.document_tokens,
    )
    return ForcedEdit(
        tape,
        drafter,
        checked.prompt,
        checked.budget,
        checked.widths,
        checked.subline,
        checked.target,
    )


async def decode_program(
    tokens: EditTokenizer,
    session: Session,
    document: str,
    instruction: str,
    *,
    program: Program | None = None,
    subline: bool = False,
    max_new_tokens: int = 2048,
    config: DraftConfig | None = None,
    draft_budget: int | None = None,
    on_progress: ProgressCallback | None = None,
    edit_id: str | None = None,
) -> DecodeResult:
    """Decode an edit program for ``document`` through ``session``; resolve it.

    With ``program`` the engine follows it (forced-program mode: every forward still runs,
    the processor takes each decision from the program), through draft trees priced with
    ``config`` (default: the shipped accelerator configuration) of ``draft_budget`` tokens
    (default: ``config``'s program budget; 0: one decision per forward), as ``cad edit``
    drafts with the same configuration. Each chunk fits the room the session has left in the
    model's context; where the next one cannot, the program is closed as spent
    (``stats.truncated``). Tokenizing and the tape's work run in a thread, so the event loop
    stays free for other edits."""
    edit = edit_id or uuid.uuid4().hex
    if program is not None:
        config = config or load_draft_config()
        budget = config.program_draft_budget if draft_budget is None else draft_budget
        if budget > 0:
            return await _decode_forced(
                tokens,
                session,
                document,
                instruction,
                program,
                subline=subline,
                max_new_tokens=max_new_tokens,
                config=config,
                draft_budget=budget,
                on_progress=on_progress,
                edit=edit,
            )
    start = time.perf_counter()
    plan = await asyncio.to_thread(
        plan_program_edit, tokens, document, instruction, program, subline, max_new_tokens
    )
    tape, stats = plan.tape, plan.tape.stats
    window = ContextWindow(tokens.context_length)
    pending = plan.prompt + await asyncio.to_thread(tape.take_forced)
    first = True
    while not tape.matcher.is_accepting():
        room = window.room(len(pending))
        if stats.generated_tokens >= plan.budget or room < 1:
            await asyncio.to_thread(tape.finish_truncated)
            break
        text = tape.matcher.text
        gen = in_gen_body(text)
        chunk = Chunk(
            pending,
            min(plan.budget - stats.generated_tokens, room) if gen else 1,
            tokens.gen_stops if gen else (),
            ProgramSpec(edit, plan.widths, plan.subline, text, plan.target),
        )
        began = time.perf_counter()
        sampled = await session.run(chunk)
        elapsed = time.perf_counter() - began
        if not sampled:
            raise EngineProtocolError("the engine ended a chunk without sampling a token")
        window.add(len(pending), len(sampled))
        forced = await asyncio.to_thread(_take, tape, sampled)
        if first:
            stats.prefill_s = elapsed
            stats.forwards += len(sampled) - 1
            first = False
        else:
            stats.decode_s += elapsed
            stats.forwards += len(sampled)
        pending = [sampled[-1], *forced]
        if on_progress is not None:
            on_progress(tape.progress())
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(tape.resolver.program, tape.resolver.text, stats)


async def _decode_forced(
    tokens: EditTokenizer,
    session: Session,
    document: str,
    instruction: str,
    program: Program,
    *,
    subline: bool,
    max_new_tokens: int,
    config: DraftConfig,
    draft_budget: int,
    on_progress: ProgressCallback | None,
    edit: str,
) -> DecodeResult:
    """A given program followed through drafts: one chunk per forward of ``cad edit``'s
    decode of it (:func:`cad.selector.decoder.forced_forwards`), holding what that forward
    keeps in the cache, its one sample the program's next token (where the program ended
    inside the chunk, a token that is not used: the chunk's last)."""
    start = time.perf_counter()
    plan = await asyncio.to_thread(
        plan_forced_edit, tokens, document, instruction, program, subline, max_new_tokens, config
    )
    tape, stats = plan.tape, plan.tape.stats
    pending = plan.prompt + await asyncio.to_thread(tape.take_forced)
    forwards = forced_forwards(
        tape, plan.drafter, pending, plan.target, budget=draft_budget, limit=plan.budget
    )
    window = ContextWindow(tokens.context_length)
    first = True
    while (step := await asyncio.to_thread(next, forwards, None)) is not None:
        fed, following = step
        if window.room(len(fed)) < 1:  # a given program was checked to fit: never expected
            raise EngineProtocolError("a forced program's chunk does not fit the model's context")
        expected = following[0] if following else fed[-1]
        text = b""  # the processor follows no program FSM for a fixed sample
        chunk = Chunk(
            fed, 1, (), ProgramSpec(edit, plan.widths, plan.subline, text, None, expected)
        )
        began = time.perf_counter()
        sampled = await session.run(chunk)
        elapsed = time.perf_counter() - began
        if sampled != [expected]:
            raise EngineProtocolError(
                f"the engine sampled {sampled} where the program's next token is {expected}: "
                "is it running the cad logits processor (start it with cad-engine)?"
            )
        window.add(len(fed), 1)
        if first:
            stats.prefill_s = elapsed
            first = False
        else:
            stats.decode_s += elapsed
        if on_progress is not None:
            on_progress(tape.progress())
    stats.wall_s = time.perf_counter() - start
    resolved = tape.resolver
    return DecodeResult(resolved.program, resolved.text, stats)


def _take(tape: ProgramTape, sampled: list[int]) -> list[int]:
    """Put the engine's decisions on the tape; the forced literals and copied text after them."""
    for token in sampled:
        try:
            tape.decide(token)
        except RuntimeError:
            raise EngineProtocolError(
                f"the engine sampled token {token}, which the program grammar does not "
                "allow here: is it running the cad logits processor (start it with "
                "cad-engine)?"
            ) from None
    return tape.take_forced()


def sampling_options(sampling: Sampling) -> dict[str, Any]:
    """vLLM ``SamplingParams`` keywords for ``sampling`` (greedy at temperature 0)."""
    if sampling.temperature <= 0:
        return {"temperature": 0.0}
    return {"temperature": sampling.temperature, "top_p": sampling.top_p, "seed": sampling.seed}
