"""Drafting the program itself, so that one forward verifies many program tokens.

A program is mostly predictable from the document and what it has written so far: after a
copy the next op is usually a gen that rewrites the following line, after a gen a copy that
starts on the line after the rewritten ones, a copy's end line is a number between its start
and the document's end, and a gen body usually resembles the lines it replaces. The drafter
turns these guesses into whole-op texts with a probability each (``Proposal``), tokenizes them
exactly as the decoder would append them (the longest allowed token for every model-decided
stretch, the tokenizer's own tokens for forced literals and for the copied text), and grows a
draft tree of them below the tokens the next forward must feed anyway. After a likely copy
it appends the copied text and drafts the op after it, so a whole copy and the next op can be
accepted in one forward.

What a proposal is worth comes from a :class:`ProgramPrior`, calibrated on oracle programs by
``cad calibrate``: how ops follow each other, where copies start and how long they run.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cad.grammar import ProgramMatcher, ProgramTokenIndex
from cad.resolver import (
    CopyLines,
    CopySpan,
    Document,
    Gen,
    Op,
    escape_gen_text,
    format_op,
    op_text,
    unescape_gen_text,
)
from cad.selector.draft_config import START_REACH, ProgramPrior
from cad.selector.draft_graph import DraftGraph

_COPY_LINES = re.compile(rb'<copy lines="(\d*)(?:-(\d*))?')
_GEN_OPEN = b"<gen>"
_GEN_CLOSE = b"</gen>\n"
_END = b"</program>"
FOLLOWED = 3
"""At each level of the draft tree, the likeliest ops (at most this many) are followed by the
ops after them."""
ANCHOR = 32
"""The longest stretch of a written line looked up elsewhere to re-anchor a gen body."""
FOLLOW_DISCOUNT = 0.3
"""What a node one op further ahead is worth per unit of probability when pruning: finishing
the op in progress (say every digit of its end line) comes before guessing the ops after it."""


@dataclass(frozen=True)
class Proposal:
    """A guess at the op being written: its whole text from its opener, the op it completes
    (``None`` for ``</program>``), its probability given what is written, and the acceptance
    rate of each of its model-decided tokens after the first (gen bodies decay; numbers and
    openers do not)."""

    text: bytes
    op: Op | None
    mass: float
    rate: float = 1.0


@dataclass(frozen=True)
class OpTokens:
    """How a proposal's text goes on the tape from the current point: the tokens and whether
    the model decides each (``False``: a forced literal); ``complete`` when the op ended."""

    tokens: tuple[int, ...]
    decided: tuple[bool, ...]
    complete: bool


def resembles(line: str, original: str) -> bool:
    """Whether ``line`` looks like an edit of ``original``: their common prefix and suffix
    cover at least half of the longer one."""
    if not line.strip() or not original.strip():
        return line == original
    prefix = len(_common_prefix(line, original))
    rest = min(len(line), len(original)) - prefix
    suffix = len(_common_prefix(line[::-1], original[::-1]))
    return prefix + min(suffix, rest) >= max(len(line), len(original)) / 2


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]


def _resumption(partial: bytes, original: bytes, same: int) -> tuple[int, int] | None:
    """Where ``original`` goes on if the line being written has rejoined it after its change
    (which began at byte ``same``): the end of the longest tail of ``partial`` (1 to
    ``ANCHOR`` bytes, written after the change) found in ``original`` after the change,
    nearest the same position; with that tail's length."""
    for size in range(min(len(partial) - same, ANCHOR), 0, -1):
        tail = partial[-size:]
        ends = []
        start = original.find(tail, same)
        while start >= 0:
            ends.append(start + size)
            start = original.find(tail, start + 1)
        ends = [end for end in ends if end < len(original)]
        if ends:
            return min(ends, key=lambda end: abs(end - len(partial))), size
    return None


def _common_bytes(a: bytes, b: bytes) -> int:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return size


class Alignment:
    """Where the output of a program stands in the document: the line it has reached."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.n_lines = document.n_lines
        self._gen_lines: dict[tuple[int, str], int] = {}

    # -- where the output stands --------------------------------------------------------

    def cursor(self, ops: tuple[Op, ...]) -> int:
        """The document line the output has reached after ``ops`` (``n + 1`` at the end):
        the line after the last copy, moved past the lines later gens appear to rewrite."""
        line = 1
        for op in ops:
            if isinstance(op, CopyLines):
                line = op.end + 1
            elif isinstance(op, CopySpan):
                line = op.end_line + (op.end_col >= len(self.document.lines[op.end_line - 1]))
            else:
                line = self.line_after_gen(line, op.text)
        return line

    def line_after_gen(self, line: int, text: str) -> int:
        """The document line a gen of ``text`` written at ``line`` hands over to: each written
        line that resembles the next document line (or the one after it) replaces it;
        anything else is inserted."""
        key = (line, text)
        if key not in self._gen_lines:
            for written in text.splitlines(keepends=True):
                if line <= self.n_lines and resembles(written, self.document.lines[line - 1]):
                    line += 1
                elif line < self.n_lines and resembles(written, self.document.lines[line]):
                    line += 2
            self._gen_lines[key] = line
        return self._gen_lines[key]


class ProgramDrafter:
    """Proposes the next ops of a program over ``document`` and grows them into draft trees.

    The drafter keeps a scratch program matcher of its own (the decoder's is never touched)
    to tokenize proposals: ``index`` and ``encode`` are the decoder's, so drafted tokens are
    exactly the tokens the decoder would append for the same program text."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        document: Document,
        *,
        subline: bool = False,
        prior: ProgramPrior | None = None,
    ) -> None:
        self.index = index
        self.encode = encode
        self.document = document
        self.alignment = Alignment(document)
        self.prior = prior or ProgramPrior()
        self.n_lines = document.n_lines
        self.line_bytes = [escape_gen_text(line).encode("utf-8") for line in document.lines]
        self.text_bytes = b"".join(self.line_bytes)
        self.line_offsets = [0]
        for line in self.line_bytes:
            self.line_offsets.append(self.line_offsets[-1] + len(line))
        self.scratch = ProgramMatcher(
            index, [len(line) for line in document.lines], subline=subline
        )
        self._op_tokens: dict[tuple[bytes, bytes, int], OpTokens] = {}
        self._echo: dict[Op, list[int]] = {}
        self._literals: dict[bytes, list[int]] = {}

    # -- what may come next ---------------------------------------------------------------

    def proposals(self, ops: tuple[Op, ...], prefix: bytes) -> list[Proposal]:
        """Guesses at the op in progress, whose text so far is ``prefix`` (from its ``<``),
        after the completed ``ops``; each proposal's text starts with ``prefix``."""
        cursor = self.alignment.cursor(ops)
        if prefix.startswith(_GEN_OPEN):
            return self._body_proposals(ops, cursor, prefix[len(_GEN_OPEN) :])
        if cursor > self.n_lines:
            previous = "past_end"
        elif not ops:
            previous = "start"
        else:
            previous = "gen" if isinstance(ops[-1], Gen) else "copy"
        kinds = self.prior.next_op[previous]
        found: list[Proposal] = []
        if kinds.get("copy", 0.0) > 0 and self.n_lines:
            found.extend(self._copy_proposals(cursor, previous, prefix, kinds["copy"]))
        if kinds.get("gen", 0.0) > 0 and _GEN_OPEN.startswith(prefix):
            found.extend(self._body_proposals(ops, cursor, b"", kinds["gen"]))
        if kinds.get("end", 0.0) > 0:
            found.append(Proposal(_END, None, kinds["end"]))
        return [p for p in found if p.text.startswith(prefix) and len(p.text) > len(prefix)]

    def _copy_proposals(
        self, cursor: int, previous: str, prefix: bytes, mass: float
    ) -> Iterator[Proposal]:
        """``<copy lines="S-E"/>`` for likely start lines S and end lines E consistent with
        ``prefix``; a number the model wrote that no guess starts with is completed with the
        numbers that do."""
        match = _COPY_LINES.fullmatch(prefix)
        if match is None and not b'<copy lines="'.startswith(prefix):
            return
        start_digits = match.group(1) if match else b""
        end_digits = match.group(2) if match else None
        starts = self._start_lines(cursor, previous, start_digits, end_digits is not None)
        for start, start_mass in starts:
            for end, end_mass in self._end_lines(start, end_digits or b""):
                op = CopyLines(start, end)
                yield Proposal(f"{format_op(op)}\n".encode(), op, mass * start_mass * end_mass)

    def _start_lines(
        self, cursor: int, previous: str, digits: bytes, complete: bool
    ) -> list[tuple[int, float]]:
        """Start lines with their probabilities: the line the output has reached and the
        lines after it (deleted lines skipped; never the reached line right after a copy,
        which would have been one copy); any line the model has already begun to write."""
        n = self.n_lines
        if complete:
            return [(int(digits), 1.0)] if 1 <= int(digits) <= n else []
        after_copy = previous == "copy"
        low = max(1, cursor - START_REACH)
        found = []
        for line in self._prefix_candidates(digits, low):
            mass = self.prior.start_line_mass(cursor, line, after_copy)
            if mass > 0:
                found.append((line, mass))
        if digits and not found:
            lines = self._numbers_with_prefix(digits, 1, n)
            return [(line, 1.0 / len(lines)) for line in lines[:8]]
        found.sort(key=lambda item: -item[1])
        return found[:3]

    def _prefix_candidates(self, digits: bytes, cursor: int) -> list[int]:
        low = max(cursor, 1)
        return [
            line
            for line in range(low, min(self.n_lines, low + 64) + 1)
            if str(line).encode().startswith(digits)
        ]

    def _numbers_with_prefix(self, digits: bytes, low: int, high: int) -> list[int]:
        text = digits.decode()
        found = []
        for extra in range(len(str(high)) - len(text) + 1):
            scale = 10**extra
            first = max(low, int(text) * scale)
            last = min(high, (int(text) + 1) * scale - 1)
            found.extend(range(first, last + 1))
            if len(found) > 256:
                break
        return found[:256]

    def _end_lines(self, start: int, digits: bytes) -> list[tuple[int, float]]:
        """End lines for a copy from ``start`` whose decimal form starts with ``digits``,
        likeliest first (at most a few hundred: the tree is pruned to the budget anyway)."""
        n = self.n_lines
        prior = self.prior
        if digits:
            lines = [e for e in self._numbers_with_prefix(digits, start, n) if e >= start]
        else:
            lines = self._likely_ends(start)
        scored = [(end, prior.end_line_mass(start, end, n)) for end in lines]
        scored = [(end, mass) for end, mass in scored if mass > 0]
        total = sum(mass for _, mass in scored)
        if digits and total > 0:
            scored = [(end, mass / total) for end, mass in scored]
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:64]

    def _likely_ends(self, start: int) -> list[int]:
        """End lines from ``start`` on, near ones first, up to a few hundred, and the last
        line: within a bucket of lengths the probability is flat, so nearer buckets (which
        are narrower) are likelier per line."""
        n = self.n_lines
        lines = list(range(start, min(n, start + 255) + 1))
        if n not in lines:
            lines.append(n)
        return lines

    def _body_proposals(
        self, ops: tuple[Op, ...], cursor: int, body: bytes, mass: float = 1.0
    ) -> list[Proposal]:
        """The gen op in progress, its body so far ``body``: ways the line being written may
        go on (:meth:`_line_rests`), each followed by the gen's close, or by the next
        document line and then the close; at a line start, the close right away."""
        done, _, partial = body.rpartition(b"\n")
        written = (done + b"\n").decode("utf-8", "replace") if b"\n" in body else ""
        line = self.alignment.line_after_gen(cursor, written) if written else cursor
        close = self.prior.gen_close
        found: list[Proposal] = []
        if body and not partial:
            found.append(self._gen(_GEN_OPEN + body + _GEN_CLOSE, mass * close))
            mass *= 1.0 - close
        for rest, following, share in self._line_rests(ops, body, partial, line):
            stem = _GEN_OPEN + body + rest
            found.append(self._gen(stem + _GEN_CLOSE, mass * share * close))
            if following <= self.n_lines:
                longer = stem + self.line_bytes[following - 1] + _GEN_CLOSE
                found.append(self._gen(longer, mass * share * (1.0 - close)))
        return found

    def _line_rests(
        self, ops: tuple[Op, ...], body: bytes, partial: bytes, line: int
    ) -> list[tuple[bytes, int, float]]:
        """Ways the line being written (``partial`` so far) may go on, as ``(rest of the
        line, the document line that would come next, share)``: the document line it
        rewrites (``line``, or the one after) where the written part still matches it, or
        after the changed bytes (replacing as many bytes as were written, or a few, or none);
        after the longest stretch of the written line found elsewhere in the document,
        nearest first; after that stretch's last occurrence in what the program wrote."""
        rests: dict[bytes, tuple[int, float]] = {}

        def add(rest: bytes, following: int, share: float) -> None:
            if rest and rest not in rests:
                rests[rest] = (following, share)

        for target, share in ((line, 0.8), (line + 1, 0.2)):
            if target > self.n_lines:
                continue
            original = self.line_bytes[target - 1]
            if original.startswith(partial):
                add(original[len(partial) :], target + 1, share)
                continue
            same = _common_bytes(partial, original)
            resumed = _resumption(partial, original, same)
            if resumed is not None:
                end, size = resumed
                add(original[end:], target + 1, share * (0.7 if size >= 6 else 0.35))
            new = len(partial) - same
            for skipped, part in ((new, 0.2), (0, 0.05), (1, 0.05), (2, 0.03), (3, 0.03),
                                  (new - 1, 0.05), (new + 1, 0.05)):  # fmt: skip
                if skipped >= 0:
                    add(original[same + skipped :], target + 1, share * part)
        for offset in self._document_anchors(partial, line):
            found = bisect.bisect_right(self.line_offsets, offset)
            add(self.text_bytes[offset : self.line_offsets[found]], found + 1, 0.15)
        repeat = self._output_repeat(ops, body)
        if repeat:
            add(repeat, line + 1, 0.15)
        total = max(1.0, sum(share for _, share in rests.values()))
        return [(rest, following, share / total) for rest, (following, share) in rests.items()]

    def _document_anchors(self, partial: bytes, line: int) -> list[int]:
        """Document offsets right after the longest tail of ``partial`` (2 to ``ANCHOR``
        bytes) found in the document, the two nearest to ``line``; an occurrence must leave
        something of its line to draft."""
        if len(partial) < 2:
            return []
        near = self.line_offsets[min(line, self.n_lines + 1) - 1]
        for size in range(min(len(partial), ANCHOR), 1, -1):
            tail = partial[-size:]
            ends = []
            start = self.text_bytes.find(tail)
            while start >= 0 and len(ends) < 64:
                end = start + size
                if end < len(self.text_bytes) and self.text_bytes[end - 1 : end] != b"\n":
                    ends.append(end)
                start = self.text_bytes.find(tail, start + 1)
            if ends:
                return sorted(ends, key=lambda end: abs(end - near))[:2]
        return []

    @staticmethod
    def _output_repeat(ops: tuple[Op, ...], body: bytes) -> bytes:
        """What followed the last earlier occurrence of the longest tail of ``body`` (2 to
        ``ANCHOR`` bytes) in the text the program generated, up to its line's end."""
        generated = b"".join(
            escape_gen_text(op.text).encode("utf-8") for op in ops if isinstance(op, Gen)
        )
        written = generated + body
        for size in range(min(len(body), ANCHOR), 1, -1):
            start = written.rfind(body[-size:], 0, len(written) - 1)
            if start >= 0:
                end = written.find(b"\n", start + size)
                rest = written[start + size : end + 1 if end >= 0 else len(written)]
                if rest:
                    return rest
        return b""

    def _gen(self, text: bytes, mass: float) -> Proposal:
        body = text[len(_GEN_OPEN) : -len(_GEN_CLOSE)].decode("utf-8", "replace")
        return Proposal(text, Gen(unescape_gen_text(body)), mass, self.prior.body_rate)

    # -- tokens -------------------------------------------------------------------------

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
        while not matcher.ops and not matcher.is_accepting() and len(tokens) < limit:
            forced = matcher.forced_bytes()
            if forced:
                if not forced.startswith(text[position : position + len(forced)]):
                    break
                ids = self._literal(forced)
                accepted = 0
                for token in ids:
                    if not matcher.accept_token(token):
                        break
                    accepted += 1
                steps += accepted
                if accepted < len(ids):
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
        complete = bool(matcher.ops) or matcher.is_accepting()
        matcher.rollback(steps)
        return OpTokens(tuple(tokens), tuple(decided), complete)

    def _literal(self, data: bytes) -> list[int]:
        if data not in self._literals:
            self._literals[data] = self.encode(data.decode("utf-8"))
        return self._literals[data]

    def echo(self, op: Op) -> list[int]:
        """The copied text's tokens that follow a completed copy op on the tape."""
        if op not in self._echo:
            self._echo[op] = self.encode(op_text(op, self.document))
        return self._echo[op]

    # -- the draft tree -----------------------------------------------------------------

    def grow(
        self,
        graph: DraftGraph,
        node: int,
        ops: tuple[Op, ...],
        prefix: bytes,
        budget: int,
    ) -> None:
        """Add drafts below ``node`` (where the op in progress reads ``prefix`` after the
        completed ``ops``), each node with the probability that verification reaches it;
        a likely op is followed by its copied text and the ops after it while they fit."""
        if budget <= 0:
            return
        limit = len(graph) + 4 * budget + 64
        reach = {node: graph.reach[node]}
        levels = {node: 0}
        self._grow(graph, reach, levels, node, ops, prefix, budget, limit)
        for index, value in reach.items():
            graph.reach[index] = value * FOLLOW_DISCOUNT ** levels[index]

    def _grow(
        self,
        graph: DraftGraph,
        reach: dict[int, float],
        levels: dict[int, int],
        node: int,
        ops: tuple[Op, ...],
        prefix: bytes,
        budget: int,
        limit: int,
    ) -> None:
        """Add every proposal likely enough below ``node``, then follow the likely ones that
        complete an op: the copied text, ``<``, and the proposals for the op after it."""
        base = reach[node]
        ends: list[tuple[float, int, Op]] = []
        for proposal in sorted(self.proposals(ops, prefix), key=lambda p: -p.mass):
            if len(graph) >= limit:
                break
            if base * proposal.mass < self.prior.min_reach:
                continue
            drafted = self.op_tokens(prefix, proposal.text, budget + 1)
            if not drafted.tokens:
                continue
            leaf, leaf_reach = self._add_path(
                graph, reach, node, base * proposal.mass, drafted, proposal.rate
            )
            self._level(graph, levels, node, leaf)
            if drafted.complete and proposal.op is not None:
                ends.append((leaf_reach, leaf, proposal.op))
        ends.sort(key=lambda item: -item[0])
        for leaf_reach, leaf, op in ends[:FOLLOWED]:
            if leaf_reach < self.prior.follow_reach or len(graph) >= limit:
                break
            tail = [] if isinstance(op, Gen) else self.echo(op)
            if len(tail) > budget:
                continue
            start = leaf
            for token in [*tail, *self._literal(b"<")]:
                leaf = self._add_node(graph, reach, leaf, token, leaf_reach)
            self._level(graph, levels, start, leaf, 1)
            self._grow(graph, reach, levels, leaf, (*ops, op), b"<", budget, limit)

    @staticmethod
    def _level(
        graph: DraftGraph, levels: dict[int, int], top: int, leaf: int, deeper: int = 0
    ) -> None:
        """Give the nodes from below ``top`` down to ``leaf`` the level of ``top`` (plus
        ``deeper``): how many ops ahead of the one in progress they lie."""
        level = levels[top] + deeper
        node = leaf
        while node != top:
            levels[node] = min(levels.get(node, level), level)
            node = graph.parents[node]

    def _add_path(
        self,
        graph: DraftGraph,
        reach: dict[int, float],
        node: int,
        mass: float,
        drafted: OpTokens,
        rate: float,
    ) -> tuple[int, float]:
        """Add the proposal's tokens below ``node``; returns the last node and its reach."""
        seen_decided = False
        for token, decided in zip(drafted.tokens, drafted.decided, strict=True):
            if decided and seen_decided:
                mass *= rate
            seen_decided = seen_decided or decided
            node = self._add_node(graph, reach, node, token, mass)
        return node, mass

    @staticmethod
    def _add_node(
        graph: DraftGraph, reach: dict[int, float], parent: int, token: int, mass: float
    ) -> int:
        """The child of ``parent`` for ``token`` (added if new), its reach increased by
        ``mass``: proposals are alternatives, so the probabilities of those sharing a node
        add up (never above the parent's)."""
        child = graph.add(parent, token, 0.0)
        reach[child] = min(reach.get(child, 0.0) + mass, reach[parent])
        return child
