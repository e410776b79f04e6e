"""Program mode in the engine: the copy-as-decode loop over a streaming-input session.

The loop is the in-process decoder's (``cad.selector.Decoder``), with the engine as the model:
the front end keeps the edit's tape (program FSM, incremental resolver, stats) and feeds the
engine one *chunk* at a time. A chunk is what the in-process decoder puts into one forward —
the last decision plus the forced literals and, when an op completed as a copy, the copied
text's tokens — and the engine prefills it in ONE forward on top of the session's KV cache,
then samples under the program FSM's mask (:mod:`cad.engine.processor`).

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
from cad.selector import DecodeResult, Progress, Sampling
from cad.selector.line_tokens import LineTokens
from cad.selector.program_tokens import DocumentTokens
from cad.selector.prompt import program_prompt
from cad.selector.tape import ProgramTape

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
    lines = LineTokens.of(
        tokens.tokenizer, tokens.index, doc, DocumentTokens.of(tokens.index, doc, document_ids)
    )
    tape = ProgramTape(tokens.index, tokens.encode, doc, subline=subline, lines=lines)
    tape.stats.prefill_tokens = len(prompt)
    widths = tuple(len(line) for line in doc.lines)
    return ProgramEdit(tape, prompt, budget, widths, subline, target)


async def decode_program(
    tokens: EditTokenizer,
    session: Session,
    document: str,
    instruction: str,
    *,
    program: Program | None = None,
    subline: bool = False,
    max_new_tokens: int = 2048,
    on_progress: ProgressCallback | None = None,
    edit_id: str | None = None,
) -> DecodeResult:
    """Decode an edit program for ``document`` through ``session``; resolve it.

    With ``program`` the engine follows it (forced-program mode: every forward still runs,
    the processor takes each decision from the program). Each chunk fits the room the
    session has left in the model's context; where the next one cannot, the program is closed
    as spent (``stats.truncated``). Tokenizing and the tape's work run in a thread, so the
    event loop stays free for other edits."""
    start = time.perf_counter()
    plan = await asyncio.to_thread(
        plan_program_edit, tokens, document, instruction, program, subline, max_new_tokens
    )
    tape, stats = plan.tape, plan.tape.stats
    window = ContextWindow(tokens.context_length)
    edit = edit_id or uuid.uuid4().hex
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
