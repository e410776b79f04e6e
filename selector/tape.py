"""The token tape: exactly what the decoder appends to the KV cache after the prompt.

Three kinds of tokens go on the tape: tokens the model decides, structural literals the
program FSM forces, and the copied text of each completed copy op (the echo). Decoding and
training-example building share this one code path, so a model is trained on precisely the
sequences it later sees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch

from cad.grammar import ProgramTokenIndex
from cad.grammar.syntax import SyntaxConstraint, syntax_program_matcher
from cad.resolver import CopySpan, Document, Gen, IncrementalResolver, Program, format_program
from cad.selector.stats import DecodeStats, Progress


def count_lines(text: str) -> int:
    """Line terminators in ``text`` (CRLF counts once)."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


@dataclass(frozen=True)
class TapeMark:
    """Where a tape stood (see :meth:`ProgramTape.mark`)."""

    steps: int
    tokens: int
    ops: int
    op_start: int
    stats: DecodeStats


class ProgramTape:
    """Program FSM + incremental resolver + the record of appended tokens.

    ``tokens[i]`` went into the cache after the prompt; ``decided[i]`` says whether the model
    chose it (the only tokens a trainer supervises)."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        document: Document,
        *,
        subline: bool = False,
        syntax: SyntaxConstraint | None = None,
    ) -> None:
        self.index = index
        self.encode = encode
        self.matcher = syntax_program_matcher(index, document, syntax, subline=subline)
        self.resolver = IncrementalResolver(document)
        self.stats = DecodeStats(mode="program")
        self.tokens: list[int] = []
        self.decided: list[bool] = []
        self.op_start = 0
        self._steps = 0

    def mark(self) -> TapeMark:
        """A point to come back to with :meth:`undo` (walking a draft ahead of the model's
        choices to prepare their masks)."""
        return TapeMark(
            self._steps,
            len(self.tokens),
            len(self.resolver.ops),
            self.op_start,
            replace(self.stats),
        )

    def undo(self, mark: TapeMark) -> None:
        """Put the tape back where it stood at ``mark``: the matcher's steps rolled back, the
        tokens, resolved ops and counts since then dropped."""
        self.matcher.rollback(self._steps - mark.steps)
        self._steps = mark.steps
        del self.tokens[mark.tokens :], self.decided[mark.tokens :]
        if len(self.resolver.ops) > mark.ops:
            kept = self.resolver.ops[: mark.ops]
            self.resolver = IncrementalResolver(self.resolver.document)
            for op in kept:
                self.resolver.push(op)
        self.op_start = mark.op_start
        for item in fields(DecodeStats):
            setattr(self.stats, item.name, getattr(mark.stats, item.name))

    def _record(self, ids: list[int], decided: bool) -> None:
        self.tokens.extend(ids)
        self.decided.extend([decided] * len(ids))

    def _take_completed_ops(self) -> list[int]:
        """Resolve ops the matcher completed; a copy's text becomes its echo tokens."""
        echo: list[int] = []
        completed = self.matcher.ops[len(self.resolver.ops) :]
        if completed:
            self.op_start = len(self.matcher.text)
        for op in completed:
            text = self.resolver.push(op)
            if isinstance(op, Gen):
                self.stats.lines_generated += count_lines(text)
            else:
                ids = self.encode(text)
                echo.extend(ids)
                self.stats.copied_tokens += len(ids)
                self.stats.lines_copied += count_lines(text)
        self.stats.ops = len(self.resolver.ops)
        self._record(echo, decided=False)
        return echo

    def take_forced(self) -> list[int]:
        """Forced literals and copy echoes up to the next point where the model must choose."""
        out: list[int] = []
        while True:
            out.extend(self._take_completed_ops())
            forced = self.matcher.forced_bytes()
            if not forced:
                return out
            ids = self.encode(forced.decode("utf-8"))
            for token in ids:
                if not self.matcher.accept_token(token):
                    raise RuntimeError(f"forced token {token} rejected by the program FSM")
                self._steps += 1
            self.stats.forced_tokens += len(ids)
            self._record(ids, decided=False)
            out.extend(ids)

    @property
    def finished(self) -> bool:
        """Whether the program is complete (``</program>`` accepted, or closed on a spent
        budget)."""
        return self.matcher.is_accepting()

    def op_prefix(self) -> bytes:
        """The text of the op in progress so far, from its ``<``."""
        return self.matcher.text[self.op_start :]

    def allowed_tokens(self) -> torch.Tensor:
        """The tokens the model may choose next: THE place where the decoder asks for a mask
        (the program FSM's; further constraints intersect here)."""
        return self.matcher.allowed_tokens()

    def decide(self, token: int) -> None:
        """Put a model-decided token on the tape."""
        if not self.matcher.accept_token(token):
            raise RuntimeError(f"token {token} rejected by the program FSM")
        self._steps += 1
        self.stats.generated_tokens += 1
        self._record([token], decided=True)

    def target_token(self, target: bytes) -> int:
        """The longest allowed token that continues ``target`` (a canonical program's bytes)
        from the current position: how forced-program mode stands in for the model."""
        remaining = target[len(self.matcher.text) :]
        vocabulary = self.index.vocabulary
        allowed = self.allowed_tokens()
        for length in range(min(len(remaining), vocabulary.longest_token), 0, -1):
            token = vocabulary.ids_by_bytes.get(remaining[:length])
            if token is not None and bool(allowed[token]):
                return token
        raise RuntimeError("the program cannot be followed token by token")

    def finish_truncated(self) -> None:
        """Out of budget: close the program validly without the model, and flag it."""
        if not self.matcher.accept_bytes(self.matcher.completion_bytes()):
            raise RuntimeError("the program FSM rejected its own completion")
        self._steps += 1
        self._take_completed_ops()
        self.stats.truncated = True

    def progress(self) -> Progress:
        """A snapshot for the caller's progress display."""
        return Progress(
            ops=self.stats.ops,
            lines_copied=self.stats.lines_copied,
            lines_generated=self.stats.lines_generated,
            tokens_generated=self.stats.generated_tokens,
        )


def follow_program(
    index: ProgramTokenIndex,
    encode: Callable[[str], list[int]],
    document: Document,
    program: Program,
    *,
    subline: bool = False,
) -> ProgramTape:
    """The tape the decoder produces when it follows ``program`` (forced-program mode),
    built without running a model: what training examples are made of.

    ``subline`` is the decoder's mode; a program with sub-line copies turns it on, as the
    decoder does. With it on, even a lines-only program has the model choose between
    ``lines`` and ``span`` at each copy, so the tape differs."""
    subline = subline or any(isinstance(op, CopySpan) for op in program.ops)
    tape = ProgramTape(index, encode, document, subline=subline)
    target = format_program(program).encode("utf-8")
    tape.take_forced()
    while not tape.matcher.is_accepting():
        tape.decide(tape.target_token(target))
        tape.take_forced()
    return tape
