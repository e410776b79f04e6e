"""The token tape: exactly what the decoder appends to the KV cache after the prompt.

Three kinds of tokens go on the tape: tokens the model decides, structural literals the
program FSM forces, and the copied text of each completed copy op (the echo). Decoding and
training-example building share this one code path, so a model is trained on precisely the
sequences it later sees.

:class:`ProgramTape` is the tape in Python, over any program matcher (the plain FSM, or one
held to a syntax constraint); training examples, the shared engine and syntax-constrained
decoding use it, and it is the reference the native tape is tested against.
:class:`NativeTape` is the same tape in native code for the plain FSM, with the acceptance
walk of a draft tree in the same call: what the decoder runs per forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from cad.grammar import ProgramMatcher, ProgramTokenIndex, _native, allocate_token_bitmask
from cad.grammar.program_matcher import op_from_record
from cad.grammar.syntax import SyntaxConstraint, syntax_program_matcher
from cad.resolver import (
    CopyLines,
    CopySpan,
    Document,
    Gen,
    IncrementalResolver,
    Op,
    Program,
    format_program,
    op_text,
)
from cad.selector.line_tokens import LineTokens
from cad.selector.stats import DecodeStats, Progress

NEED_CHOICE, LEFT_TREE, FINISHED = 0, 1, 2
"""How a native acceptance walk stopped: at a node where the model decides, where the
tape's tokens left the tree, or at the end of the program (or of the token budget)."""


def count_lines(text: str) -> int:
    """Line terminators in ``text`` (CRLF counts once)."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def token_source(
    encode: Callable[[str], list[int]],
    document: Document,
    literals: dict[bytes, list[int]] | None = None,
    lines: LineTokens | None = None,
) -> _native.TokenSource:
    """The tokenizer as the native drafter and tape ask it, once per distinct forced
    literal and copy (they cache every answer): a literal's tokens, and a copy's tokens
    with the line breaks of its text. ``literals`` keeps the literals' tokens across decodes
    with the same tokenizer (they do not depend on the document). ``lines``, when given (the
    document's own tokens, see :mod:`cad.selector.line_tokens`), answers copies of lines
    from the document's tokens instead of tokenizing their text again: the same tokens."""
    known = {} if literals is None else literals

    def literal(data: bytes) -> list[int]:
        if data not in known:
            known[data] = encode(data.decode("utf-8"))
        return known[data]

    def echo(kind: str, a: int, b: int, c: int, d: int) -> tuple[list[int], int]:
        op = CopyLines(a, b) if kind == "lines" else CopySpan(a, b, c, d)
        text = op_text(op, document)
        if lines is not None and kind == "lines":
            return lines.copy_tokens(a, b, encode), count_lines(text)
        return encode(text), count_lines(text)

    return _native.TokenSource(literal, echo)


@dataclass(frozen=True)
class TapeMark:
    """Where a tape stood (see :meth:`ProgramTape.mark`)."""

    steps: int
    tokens: int
    ops: int
    op_start: int
    stats: DecodeStats


def progress_of(stats: DecodeStats) -> Progress:
    """The progress snapshot of a decode's ``stats``."""
    return Progress(
        ops=stats.ops,
        lines_copied=stats.lines_copied,
        lines_generated=stats.lines_generated,
        tokens_generated=stats.generated_tokens,
    )


class TapeRecord:
    """What the Python tapes share over a program matcher (``self.matcher``): the record of
    appended tokens (``tokens[i]`` went into the cache after the prompt, ``decided[i]``
    says whether the model chose it), the model's decisions, forced-program mode's token
    choice, closing a program on a spent budget, and the progress snapshot. A subclass
    resolves what the matcher completed in ``_take_completed``."""

    matcher: Any
    index: ProgramTokenIndex
    encode: Callable[[str], list[int]]

    def __init__(self, vocab_size: int) -> None:
        self.stats = DecodeStats(mode="program")
        self.tokens: list[int] = []
        self.decided: list[bool] = []
        self.op_start = 0
        self._steps = 0
        self._mask = allocate_token_bitmask(1, vocab_size)
        self._literals: dict[bytes, list[int]] = {}

    def _take_completed(self) -> list[int]:
        raise NotImplementedError

    def _count_op(self, text: str, *, generated: bool, ids: list[int] | None = None) -> list[int]:
        """Count a completed op's ``text`` in the stats; a copy's text becomes its echo
        tokens (returned: ``ids`` when the caller knows them, else the text tokenized), a
        gen's is already on the tape."""
        if generated:
            self.stats.lines_generated += count_lines(text)
            return []
        if ids is None:
            ids = self.encode(text)
        self.stats.copied_tokens += len(ids)
        self.stats.lines_copied += count_lines(text)
        return ids

    def take_forced(self) -> list[int]:
        """Forced literals and copy echoes up to the next point where the model must choose
        (a forced literal's tokens are looked up once per tape)."""
        out: list[int] = []
        while True:
            out.extend(self._take_completed())
            if self.finished:
                return out
            forced = self.matcher.forced_bytes()
            if not forced:
                return out
            ids = self._literals.get(forced)
            if ids is None:
                ids = self._literals[forced] = self.encode(forced.decode("utf-8"))
            for token in ids:
                if not self.matcher.accept_token(token):
                    raise RuntimeError(f"forced token {token} rejected by the program FSM")
                self._steps += 1
            self.stats.forced_tokens += len(ids)
            self._record(ids, decided=False)
            out.extend(ids)

    def _record(self, ids: list[int], decided: bool) -> None:
        self.tokens.extend(ids)
        self.decided.extend([decided] * len(ids))

    @property
    def finished(self) -> bool:
        """Whether the program is complete (``</program>`` accepted, or closed on a spent
        budget)."""
        return self.matcher.is_accepting()

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
        self.matcher.fill_next_token_bitmask(self._mask, 0)
        words = self._mask[0]
        for length in range(min(len(remaining), vocabulary.longest_token), 0, -1):
            token = vocabulary.ids_by_bytes.get(remaining[:length])
            if token is not None and (int(words[token >> 5]) >> (token & 31)) & 1:
                return token
        raise RuntimeError("the program cannot be followed token by token")

    def finish_truncated(self) -> None:
        """Out of budget: close the program validly without the model, and flag it."""
        if not self.matcher.accept_bytes(self.matcher.completion_bytes()):
            raise RuntimeError("the program FSM rejected its own completion")
        self._steps += 1
        self._take_completed()
        self.stats.truncated = True

    def progress(self) -> Progress:
        """A snapshot for the caller's progress display."""
        return progress_of(self.stats)


class ProgramTape(TapeRecord):
    """Program FSM + incremental resolver + the record of appended tokens.

    ``tokens[i]`` went into the cache after the prompt; ``decided[i]`` says whether the model
    chose it (the only tokens a trainer supervises). ``lines`` (the document's own tokens by
    line) lets copies of whole lines be read off them instead of tokenized again."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        document: Document,
        *,
        subline: bool = False,
        syntax: SyntaxConstraint | None = None,
        lines: LineTokens | None = None,
    ) -> None:
        self.index = index
        self.encode = encode
        self.lines = lines
        self.matcher = syntax_program_matcher(index, document, syntax, subline=subline)
        super().__init__(self.matcher.vocab_size)
        self.resolver = IncrementalResolver(document)

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

    def _take_completed(self) -> list[int]:
        """Resolve ops the matcher completed; a copy's text becomes its echo tokens."""
        echo: list[int] = []
        completed = self.matcher.ops[len(self.resolver.ops) :]
        if completed:
            self.op_start = len(self.matcher.text)
        for op in completed:
            ids = None
            if self.lines is not None and isinstance(op, CopyLines):
                ids = self.lines.copy_tokens(op.start, op.end, self.encode)
            text = self.resolver.push(op)
            echo.extend(self._count_op(text, generated=isinstance(op, Gen), ids=ids))
        self.stats.ops = len(self.resolver.ops)
        self._record(echo, decided=False)
        return echo

    def op_prefix(self) -> bytes:
        """The text of the op in progress so far, from its ``<``."""
        return self.matcher.text[self.op_start :]


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


class NativeTape:
    """:class:`ProgramTape` in native code for the plain program FSM, with the acceptance
    walk of a draft tree: one native call accepts a whole path (``accept``), deciding,
    forcing literals and appending copied text as the Python tape does, token for token
    (``tests/selector/test_native_drafting.py`` holds the two equal). ``source`` is the
    decode's :func:`token_source`, shared with the drafter so a copy is tokenized once."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        document: Document,
        source: _native.TokenSource,
        *,
        subline: bool = False,
    ) -> None:
        self.index = index
        self.document = document
        self.matcher = ProgramMatcher(
            index, [len(line) for line in document.lines], subline=subline
        )
        self.core = _native.ProgramTape(self.matcher, source, index.vocabulary.native_trie)
        self.stats = DecodeStats(mode="program")
        self._resolved: IncrementalResolver | None = None

    def _sync(self) -> None:
        """Copy the native counts into :attr:`stats`."""
        stats = self.stats
        (
            stats.generated_tokens,
            stats.forced_tokens,
            stats.copied_tokens,
            stats.ops,
            stats.lines_copied,
            stats.lines_generated,
            stats.truncated,
        ) = self.core.counts

    def take_forced(self) -> list[int]:
        """Forced literals and copy echoes up to the next point where the model must choose."""
        out = self.core.take_forced()
        self._sync()
        return out

    def decide(self, token: int) -> None:
        """Put a model-decided token on the tape."""
        self.core.decide(token)
        self._sync()

    def target_token(self, target: bytes) -> int:
        """The longest allowed token that continues ``target`` from the current position."""
        return self.core.target_token(target)

    def finish_truncated(self) -> None:
        """Out of budget: close the program validly without the model, and flag it."""
        self.core.finish_truncated()
        self._sync()

    @property
    def finished(self) -> bool:
        """Whether the program is complete."""
        return self.core.finished

    def op_prefix(self) -> bytes:
        """The text of the op in progress so far, from its ``<``."""
        return self.core.op_prefix()

    @property
    def tokens(self) -> list[int]:
        """Every token appended after the prompt."""
        return self.core.tokens

    @property
    def decided(self) -> list[bool]:
        """Whether the model chose each token of :attr:`tokens`."""
        return self.core.decided

    def decided_tokens(self) -> list[int]:
        """The model-decided tokens, in order."""
        return [t for t, d in zip(self.core.tokens, self.core.decided, strict=True) if d]

    @property
    def ops(self) -> tuple[Op, ...]:
        """The ops completed so far."""
        return tuple(
            op_from_record(self.matcher.op_record(i)) for i in range(self.matcher.op_count)
        )

    @property
    def resolver(self) -> IncrementalResolver:
        """The ops resolved against the document (built when asked)."""
        ops = self.ops
        if self._resolved is None or self._resolved.ops != list(ops):
            self._resolved = IncrementalResolver(self.document)
            for op in ops:
                self._resolved.push(op)
        return self._resolved

    def progress(self) -> Progress:
        """A snapshot for the caller's progress display."""
        return progress_of(self.stats)

    def accept(
        self,
        tree: Any,
        known: int,
        limit: int,
        choose: Callable[[int], int] | None,
        target: bytes | None,
    ) -> tuple[Any, list[int]]:
        """Walk ``tree`` from the end of its ``known`` chain: the forced program's choices
        with ``target``, else ``choose(node)`` at each decision. Returns the accepted path
        (tree nodes, chain included) and the tokens the next forward must feed.

        Cost: one native call, each accepted node a child lookup and an FSM step, plus one
        Python call of ``choose`` per decision; forced, 4 µs at the median per forward on the
        click commits (2-core x86-64 CPU). A completed copy whose tokens are not known yet
        costs one call of the token source: its stretch of the document's tokens where the
        tokenizer cuts at line starts (:mod:`cad.selector.line_tokens`), else one call of the
        tokenizer, as on the Python tape."""
        core = self.core
        if target is not None:
            status = core.run_forced(tree, known, target, limit)
        else:
            assert choose is not None
            status = core.begin(tree, known, limit)
            while status == NEED_CHOICE:
                self._sync()
                status = core.choose(tree, choose(core.node), limit)
        self._sync()
        return core.path, core.pending if status == LEFT_TREE else []

    def walk_ahead(
        self, tree: Any, node: int, limit: int, masks: Callable[[int], torch.Tensor]
    ) -> tuple[list[int], list[int]]:
        """The decision nodes along the drafted first children from ``node`` and the token
        drafted after each, their masks in the rows of ``masks`` (see
        :func:`cad.selector.decoder.walk_ahead`); the tape is put back. Cost: one native
        call, one mask row filled per decision passed."""
        buffer = masks(len(tree) + 1)
        nodes, expected = self.core.walk_ahead(
            tree, node, limit, buffer.data_ptr(), buffer.shape[1], buffer.shape[0]
        )
        return nodes, expected
