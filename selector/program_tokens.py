"""How program text goes on the tape as tokens: the Python reference of the native
tokenization (``grammar/native/program_tokens.cpp``), which the decoders use; tests hold the
two equal.

A proposal is tokenized exactly as the decoder would append it: the longest allowed token at
every model decision (the rule forced-program mode and the trainer's tapes use), the
tokenizer's own tokens for forced literals and for the copied text of a copy. A scratch
program matcher of its own (the decoder's is never touched) says what is allowed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from cad.grammar import ProgramMatcher, ProgramTokenIndex
from cad.resolver import CopyLines, Document, Op, op_text

ESTIMATE_MARGIN = 16
"""A copy whose text the document's own tokens put at more than the draft budget and this
many tokens is not tokenized to find out whether it fits the budget (a text tokenized on its
own differs from its stretch of the document's tokens only at its two ends)."""


@dataclass(frozen=True)
class DocumentTokens:
    """The document's own tokens (its whole text tokenized) by line: ``line_tokens[k]`` of
    them start before line ``k + 1`` (and ``line_tokens[n]`` is their number); ``aligned[k]``
    says one starts exactly there (or the document ends there). A copy's token count is
    estimated from them, and a copy of whole lines between two aligned places is drafted as
    that stretch of the document's tokens (what tokenizing its text alone gives on the
    corpora measured; where it did not, the draft would only be rejected)."""

    ids: tuple[int, ...]
    line_tokens: tuple[int, ...]
    aligned: tuple[bool, ...]

    @classmethod
    def of(cls, index: ProgramTokenIndex, document: Document, ids: Sequence[int]) -> DocumentTokens:
        """Place ``ids`` (the document tokenized) on the document's lines by their bytes."""
        token_bytes = index.vocabulary.token_bytes
        ends = list(accumulate(len(token_bytes[t] or b"") for t in ids))
        starts = [end - len(token_bytes[t] or b"") for t, end in zip(ids, ends, strict=True)]
        offsets = [0, *accumulate(len(line.encode("utf-8")) for line in document.lines)]
        line_tokens = [bisect.bisect_left(starts, offset) for offset in offsets[:-1]]
        line_tokens.append(len(ids))
        aligned = [
            count == len(ids) or starts[count] == offset
            for count, offset in zip(line_tokens, offsets, strict=True)
        ]
        return cls(tuple(ids), tuple(line_tokens), tuple(aligned))

    def far_longer(self, op: Op, budget: int) -> bool:
        """Whether a copy's text is estimated to hold more than ``budget +
        ESTIMATE_MARGIN`` tokens."""
        if not isinstance(op, CopyLines):
            return False
        return self.line_tokens[op.end] - self.line_tokens[op.start - 1] > budget + ESTIMATE_MARGIN

    def stretch(self, op: Op) -> list[int] | None:
        """A copy's stretch of the document's tokens where it starts and ends on aligned
        line boundaries, else ``None``."""
        if not isinstance(op, CopyLines) or not (
            self.aligned[op.start - 1] and self.aligned[op.end]
        ):
            return None
        return list(self.ids[self.line_tokens[op.start - 1] : self.line_tokens[op.end]])


@dataclass(frozen=True)
class OpTokens:
    """How a proposal's text goes on the tape from the current point: the tokens and whether
    the model decides each (``False``: a forced literal); ``complete`` when the op ended."""

    tokens: tuple[int, ...]
    decided: tuple[bool, ...]
    complete: bool


class ProgramTokenizer:
    """Tokens of program text over ``document``, through the decoder's ``index`` and
    ``encode``; every answer is cached."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        document: Document,
        *,
        subline: bool = False,
    ) -> None:
        self.index = index
        self.encode = encode
        self.document = document
        self.scratch = ProgramMatcher(
            index, [len(line) for line in document.lines], subline=subline
        )
        self._op_tokens: dict[tuple[bytes, bytes, int], OpTokens] = {}
        self._echo: dict[Op, list[int]] = {}
        self._literals: dict[bytes, list[int]] = {}

    def op_tokens(self, prefix: bytes, text: bytes, limit: int) -> OpTokens:
        """The tokens the decoder appends when the op written so far as ``prefix`` goes on
        as ``text``: the longest allowed token at every model decision, the tokenizer's tokens
        for every forced literal, up to the op's end (or as far as ``text`` can be followed,
        or ``limit`` tokens)."""
        key = (prefix, text, limit)
        cached = self._op_tokens.get(key)
        if cached is None:
            cached = self._tokenize(prefix, text, limit)
            self._op_tokens[key] = cached
        return cached

    def _tokenize(self, prefix: bytes, text: bytes, limit: int) -> OpTokens:
        matcher = self.scratch
        if prefix and not matcher.accept_bytes(prefix):
            return OpTokens((), (), False)
        steps = 1 if prefix else 0
        vocabulary = self.index.vocabulary
        tokens: list[int] = []
        decided: list[bool] = []
        position = len(prefix)
        while not matcher.op_count and not matcher.is_accepting() and len(tokens) < limit:
            forced = matcher.forced_bytes()
            if forced:
                if not forced.startswith(text[position : position + len(forced)]):
                    break
                ids = self.literal(forced)
                accepted = 0
                for token in ids:
                    if not matcher.accept_token(token):
                        break
                    accepted += 1
                steps += accepted
                if accepted < len(ids):
                    matcher.rollback(steps)
                    raise RuntimeError(f"forced literal {forced!r} rejected by the program FSM")
                tokens.extend(ids)
                decided.extend([False] * len(ids))
                position += len(forced)
                continue
            remaining = text[position:]
            token = None
            for size in range(min(len(remaining), vocabulary.longest_token), 0, -1):
                candidate = vocabulary.ids_by_bytes.get(remaining[:size])
                if candidate is not None and matcher.accept_token(candidate):
                    token = candidate
                    position += size
                    break
            if token is None:
                break
            steps += 1
            tokens.append(token)
            decided.append(True)
        complete = bool(matcher.op_count) or matcher.is_accepting()
        matcher.rollback(steps)
        return OpTokens(tuple(tokens), tuple(decided), complete)

    def literal(self, data: bytes) -> list[int]:
        """The tokenizer's tokens for a forced literal."""
        if data not in self._literals:
            self._literals[data] = self.encode(data.decode("utf-8"))
        return self._literals[data]

    def echo(self, op: Op) -> list[int]:
        """The copied text's tokens that follow a completed copy op on the tape."""
        if op not in self._echo:
            self._echo[op] = self.encode(op_text(op, self.document))
        return self._echo[op]
