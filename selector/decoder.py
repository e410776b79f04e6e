"""The copy-as-decode loop: constrained program decoding with parallel-prefill copies.

Per step: take every byte the grammar forces (structural literals) and, when an op completes
as a copy, the copied text's tokens; feed them together with the last chosen token in ONE
forward; then let the model choose the next token under the program FSM's mask.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from cad.grammar import ProgramTokenIndex
from cad.grammar.syntax import SyntaxConstraint
from cad.resolver import CopySpan, Document, Program, format_program, resolve
from cad.selector import kv
from cad.selector.errors import Cancelled, ContextTooLongError
from cad.selector.loading import LoadedModel
from cad.selector.prompt import program_prompt
from cad.selector.sampling import Sampling, TokenChooser
from cad.selector.stats import DecodeResult, Progress
from cad.selector.tape import ProgramTape

ProgressCallback = Callable[[Progress], None]


class Decoder:
    """Decodes edit programs with one loaded model; reusable across documents.

    ``edit`` lets the model choose (greedy or sampled) under the program FSM; with
    ``program=`` it follows that program instead (forced-program mode: the model still runs
    every forward, so costs are real, but each model-decided token is taken from the program).
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        max_new_tokens: int = 2048,
        subline: bool = False,
        sampling: Sampling | None = None,
    ) -> None:
        self.loaded = loaded
        self.max_new_tokens = max_new_tokens
        self.subline = subline
        self.sampling = sampling or Sampling()
        self.index = ProgramTokenIndex.for_tokenizer(loaded.tokenizer, loaded.vocab_size)

    def encode(self, text: str) -> list[int]:
        """The tokenizer's ids for ``text``, no special tokens."""
        return self.loaded.tokenizer.encode(text, add_special_tokens=False)

    def check_context(self, prompt_tokens: int, document: str) -> int:
        """Raise if the prompt and a copy of the document cannot fit; return the token budget."""
        room = self.loaded.context_length - prompt_tokens - len(self.encode(document))
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
        prompt = program_prompt(self.loaded.tokenizer, doc, instruction, subline=subline)
        budget = self.check_context(len(prompt), document)
        tape.stats.prefill_tokens = len(prompt)
        cache = kv.new_cache(self.loaded.model)
        chooser = TokenChooser.for_model(self.loaded, self.sampling)
        logits = self._forward(tape, cache, prompt + tape.take_forced(), prefill=True)
        reported = -1
        while not tape.matcher.is_accepting():
            if cancel is not None and cancel.is_set():
                raise Cancelled("edit cancelled")
            if tape.stats.generated_tokens >= budget:
                tape.finish_truncated()
                break
            if target is not None:
                token = tape.target_token(target)
            else:
                token = chooser.choose(logits, tape.matcher)
            tape.decide(token)
            pending = [token, *tape.take_forced()]
            if on_progress is not None and (
                tape.stats.ops != reported or tape.stats.generated_tokens % 32 == 0
            ):
                reported = tape.stats.ops
                on_progress(tape.progress())
            if tape.matcher.is_accepting():
                break
            logits = self._forward(tape, cache, pending)
        tape.stats.wall_s = time.perf_counter() - start
        return DecodeResult(tape.resolver.program, tape.resolver.text, tape.stats)

    def _forward(
        self, tape: ProgramTape, cache: Any, token_ids: list[int], *, prefill: bool = False
    ) -> torch.Tensor:
        """One forward of the pending tokens (prompt, or a decision plus forced/copied text)."""
        began = time.perf_counter()
        logits = kv.append(self.loaded.model, cache, token_ids, self.loaded.device)
        elapsed = time.perf_counter() - began
        if prefill:
            tape.stats.prefill_s += elapsed
        else:
            tape.stats.forwards += 1
            tape.stats.decode_s += elapsed
        return logits


def decode_forced(
    loaded: LoadedModel, document: str, instruction: str, program: Program, **options: Any
) -> DecodeResult:
    """Forced-program decode in one call (tests and benchmarks)."""
    return Decoder(loaded, **options).edit(document, instruction, program=program)
