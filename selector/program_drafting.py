"""Drafting the program itself, so that one forward verifies many program tokens.

The drafter guesses whole ops from the document and what the program has written so far
(:mod:`cad.selector.program_proposals`), tokenizes them exactly as the decoder would append
them (:mod:`cad.selector.program_tokens`) and grows them into a draft tree below the tokens
the next forward must feed anyway (:mod:`cad.selector.program_growth`); those three modules
are the Python reference. :class:`ProgramDrafter` runs the same in native code
(``grammar/native/program_*.cpp``): one call per forward builds the chain, grows the drafts
and prunes the tree to the budget, in well under a millisecond.

What a proposal is worth comes from a :class:`ProgramPrior`, calibrated on oracle programs by
``cad calibrate``: how ops follow each other, where copies start and how long they run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from cad.grammar import ProgramMatcher, ProgramTokenIndex, _native
from cad.resolver import CopyLines, CopySpan, Document, Gen, Op, escape_gen_text, unescape_gen_text
from cad.selector.draft_config import ProgramPrior
from cad.selector.program_proposals import Alignment, Proposal
from cad.selector.program_tokens import DocumentTokens, OpTokens
from cad.selector.tape import token_source

__all__ = ["Alignment", "ProgramDrafter", "Proposal", "native_ops"]


def native_ops(ops: Sequence[Op]) -> list[tuple[Any, ...]]:
    """Ops as the native drafter reads them: ``("lines", s, e)``, ``("span", ...)`` or
    ``("gen", body as written)``."""
    found: list[tuple[Any, ...]] = []
    for op in ops:
        if isinstance(op, CopyLines):
            found.append(("lines", op.start, op.end))
        elif isinstance(op, CopySpan):
            found.append(("span", op.start_line, op.start_col, op.end_line, op.end_col))
        else:
            found.append(("gen", escape_gen_text(op.text).encode("utf-8")))
    return found


def _python_op(record: tuple[Any, ...]) -> Op | None:
    kind, *values = record
    if kind == "end":
        return None
    if kind == "gen":
        return Gen(unescape_gen_text(values[0].decode("utf-8", "replace")))
    return CopyLines(*values) if kind == "lines" else CopySpan(*values)


class ProgramDrafter:
    """Proposes the next ops of a program over ``document`` and grows them into draft trees,
    in native code. ``index`` and ``encode`` are the decoder's, so drafted tokens are exactly
    the tokens the decoder would append for the same program text; ``source`` (the decode's
    :func:`cad.selector.tape.token_source`) is shared with the tape; ``document_tokens`` (the
    document's own tokens by line, tokenized when not given) estimate how long a copy is."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        document: Document,
        *,
        subline: bool = False,
        prior: ProgramPrior | None = None,
        source: _native.TokenSource | None = None,
        document_tokens: DocumentTokens | None = None,
    ) -> None:
        self.prior = prior or ProgramPrior()
        self.source = source or token_source(encode, document)
        tokens = document_tokens
        if tokens is None:
            tokens = DocumentTokens.of(index, document, encode(document.text))
        self.native = _native.ProgramDrafter(
            index.native,
            index.vocabulary.native_trie,
            self.source,
            [escape_gen_text(line).encode("utf-8") for line in document.lines],
            [line.encode("utf-8") for line in document.lines],
            [len(line) for line in document.lines],
            list(tokens.ids),
            list(tokens.line_tokens),
            list(tokens.aligned),
            subline,
            asdict(self.prior),
        )

    def draft(
        self,
        known: Sequence[int],
        ops: ProgramMatcher | Sequence[Op],
        prefix: bytes,
        budget: int,
        tree: _native.DraftTree,
        *,
        grow: bool = True,
    ) -> None:
        """Into ``tree``: the ``known`` tokens as a chain, the drafts of the op in progress
        (written so far as ``prefix`` after the completed ``ops``: the tape's native matcher,
        or the ops themselves) grown below it when ``grow``, pruned to ``budget`` drafted
        nodes.

        Cost: one native call, linear in the nodes grown (at most ``2 * budget + 32`` before
        pruning; proposals and their tokens are cached across forwards) plus the pruning's
        heap operations; at budget 96 on the click commits (2-core x86-64 CPU) under 0.1 ms at
        the median per forward with the caches warm, and 0.22 ms at the median and 0.39 ms at
        p90 when a CPU forward has just evicted them, as in a decode on a CPU (its work is
        then mostly waiting for memory). A copy not drafted from the document's aligned
        tokens asks the token source once per decode (see :func:`cad.selector.tape.token_source`)."""
        source = ops if isinstance(ops, ProgramMatcher) else native_ops(ops)
        self.native.draft(known, grow, source, prefix, budget, tree)

    def grow(
        self, tree: _native.DraftTree, node: int, ops: Sequence[Op], prefix: bytes, budget: int
    ) -> None:
        """Add drafts below ``node`` of ``tree``, unpruned (as the reference's ``grow``)."""
        self.native.grow(tree, node, native_ops(ops), prefix, budget)

    def proposals(self, ops: Sequence[Op], prefix: bytes) -> list[Proposal]:
        """Guesses at the op in progress after ``ops``, each starting with ``prefix``."""
        return [
            Proposal(text, _python_op(op), mass, rate)
            for text, op, mass, rate in self.native.proposals(native_ops(ops), prefix)
        ]

    def op_tokens(self, prefix: bytes, text: bytes, limit: int) -> OpTokens:
        """The tokens the decoder appends when the op written so far as ``prefix`` goes on
        as ``text`` (at most ``limit``)."""
        tokens, decided, complete = self.native.op_tokens(prefix, text, limit)
        return OpTokens(tuple(tokens), tuple(decided), complete)
