"""What may come next in a program: the Python reference of the native proposals
(``grammar/native/program_proposals.cpp``), which the decoders use; tests hold the two equal.

A program is mostly predictable from the document and what it has written so far: after a
copy the next op is usually a gen that rewrites the following line, after a gen a copy that
starts on the line after the rewritten ones, a copy's end line is a number between its start
and the document's end, and a gen body usually resembles the lines it replaces. Each guess
is a whole op's text with its probability under the calibrated :class:`ProgramPrior`
(``cad calibrate``): how ops follow each other, where copies start and how long they run,
and how a gen body goes on (the shares of its guesses).

:class:`Alignment` (the line the output has reached) is also what calibration measures the
prior with.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from cad.resolver import (
    CopyLines,
    CopySpan,
    Document,
    Gen,
    Op,
    escape_gen_text,
    format_op,
    unescape_gen_text,
)
from cad.selector.draft_config import START_REACH, ProgramPrior

_COPY_LINES = re.compile(rb'<copy lines="(\d*)(?:-(\d*))?')
GEN_OPEN = b"<gen>"
GEN_CLOSE = b"</gen>\n"
END = b"</program>"
ANCHOR = 32
"""The longest stretch of a written line looked up elsewhere to re-anchor a gen body."""
START_WINDOW = 64
"""Start lines looked at from the line the output has reached."""
START_GUESSES = 3
"""Start lines proposed (the likeliest)."""
UNKNOWN_STARTS = 8
"""Start lines proposed for written digits that no guess starts with."""
NUMBERS = 256
"""Numbers completing written digits looked at."""
END_GUESSES = 64
"""End lines proposed per start line (the tree is pruned to the budget anyway)."""
END_REACH = 255
"""Copy lengths looked at one by one (and the document's last line)."""
ANCHOR_OCCURRENCES = 64
"""Occurrences of a written tail looked at in the document."""
ANCHORS_KEPT = 2
"""Document anchors proposed (the nearest)."""
RESUME_LONG = 6
"""A rejoining tail of at least this many bytes is the likelier kind."""


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


def _common_bytes(a: bytes, b: bytes) -> int:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return size


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


class Alignment:
    """Where the output of a program stands in the document: the line it has reached."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.n_lines = document.n_lines
        self._gen_lines: dict[tuple[int, str], int] = {}

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


class ProgramProposals:
    """Proposes the op in progress of a program over ``document``, priced by ``prior``."""

    def __init__(self, document: Document, prior: ProgramPrior) -> None:
        self.document = document
        self.alignment = Alignment(document)
        self.prior = prior
        self.n_lines = document.n_lines
        self.line_bytes = [escape_gen_text(line).encode("utf-8") for line in document.lines]
        self.text_bytes = b"".join(self.line_bytes)
        self.line_offsets = [0]
        for line in self.line_bytes:
            self.line_offsets.append(self.line_offsets[-1] + len(line))

    def proposals(self, ops: tuple[Op, ...], prefix: bytes) -> list[Proposal]:
        """Guesses at the op in progress, whose text so far is ``prefix`` (from its ``<``),
        after the completed ``ops``; each proposal's text starts with ``prefix``."""
        cursor = self.alignment.cursor(ops)
        if prefix.startswith(GEN_OPEN):
            return self._body_proposals(ops, cursor, prefix[len(GEN_OPEN) :])
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
        if kinds.get("gen", 0.0) > 0 and GEN_OPEN.startswith(prefix):
            found.extend(self._body_proposals(ops, cursor, b"", kinds["gen"]))
        if kinds.get("end", 0.0) > 0:
            found.append(Proposal(END, None, kinds["end"]))
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
        for line in range(low, min(n, low + START_WINDOW) + 1):
            if not str(line).encode().startswith(digits):
                continue
            mass = self.prior.start_line_mass(cursor, line, after_copy)
            if mass > 0:
                found.append((line, mass))
        if digits and not found:
            lines = self._numbers_with_prefix(digits, 1, n)
            return [(line, 1.0 / len(lines)) for line in lines[:UNKNOWN_STARTS]]
        found.sort(key=lambda item: -item[1])
        return found[:START_GUESSES]

    @staticmethod
    def _numbers_with_prefix(digits: bytes, low: int, high: int) -> list[int]:
        text = digits.decode()
        found: list[int] = []
        for extra in range(len(str(high)) - len(text) + 1):
            scale = 10**extra
            first = max(low, int(text) * scale)
            last = min(high, (int(text) + 1) * scale - 1)
            found.extend(range(first, min(last, first + NUMBERS) + 1))
            if len(found) > NUMBERS:
                break
        return found[:NUMBERS]

    def _end_lines(self, start: int, digits: bytes) -> list[tuple[int, float]]:
        """End lines for a copy from ``start`` whose decimal form starts with ``digits``,
        likeliest first."""
        n = self.n_lines
        prior = self.prior
        if digits:
            lines = [e for e in self._numbers_with_prefix(digits, start, n) if e >= start]
        else:
            lines = list(range(start, min(n, start + END_REACH) + 1))
            if n not in lines:
                lines.append(n)
        scored = [(end, prior.end_line_mass(start, end, n)) for end in lines]
        scored = [(end, mass) for end, mass in scored if mass > 0]
        total = sum(mass for _, mass in scored)
        if digits and total > 0:
            scored = [(end, mass / total) for end, mass in scored]
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:END_GUESSES]

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
            found.append(self._gen(GEN_OPEN + body + GEN_CLOSE, mass * close))
            mass *= 1.0 - close
        for rest, following, share in self._line_rests(ops, body, partial, line):
            stem = GEN_OPEN + body + rest
            found.append(self._gen(stem + GEN_CLOSE, mass * share * close))
            if following <= self.n_lines:
                longer = stem + self.line_bytes[following - 1] + GEN_CLOSE
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
        prior = self.prior
        rests: dict[bytes, tuple[int, float]] = {}

        def add(rest: bytes, following: int, share: float) -> None:
            if rest and rest not in rests:
                rests[rest] = (following, share)

        for target, share in zip((line, line + 1), prior.line_shares, strict=True):
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
                long, short = prior.resume_shares
                add(original[end:], target + 1, share * (long if size >= RESUME_LONG else short))
            new = len(partial) - same
            skips = (new, 0, 1, 2, 3, new - 1, new + 1)
            for skipped, part in zip(skips, prior.skip_shares, strict=True):
                if skipped >= 0:
                    add(original[same + skipped :], target + 1, share * part)
        for offset in self._document_anchors(partial, line):
            found = bisect.bisect_right(self.line_offsets, offset)
            add(self.text_bytes[offset : self.line_offsets[found]], found + 1, prior.anchor_share)
        repeat = self._output_repeat(ops, body)
        if repeat:
            add(repeat, line + 1, prior.repeat_share)
        total = max(1.0, sum(share for _, share in rests.values()))
        return [(rest, following, share / total) for rest, (following, share) in rests.items()]

    def _document_anchors(self, partial: bytes, line: int) -> list[int]:
        """Document offsets right after the longest tail of ``partial`` (2 to ``ANCHOR``
        bytes) found in the document, the nearest to ``line``; an occurrence must leave
        something of its line to draft."""
        if len(partial) < 2:
            return []
        near = self.line_offsets[min(line, self.n_lines + 1) - 1]
        for size in range(min(len(partial), ANCHOR), 1, -1):
            tail = partial[-size:]
            ends = []
            start = self.text_bytes.find(tail)
            while start >= 0 and len(ends) < ANCHOR_OCCURRENCES:
                end = start + size
                if end < len(self.text_bytes) and self.text_bytes[end - 1 : end] != b"\n":
                    ends.append(end)
                start = self.text_bytes.find(tail, start + 1)
            if ends:
                return sorted(ends, key=lambda end: abs(end - near))[:ANCHORS_KEPT]
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
        body = text[len(GEN_OPEN) : -len(GEN_CLOSE)].decode("utf-8", "replace")
        return Proposal(text, Gen(unescape_gen_text(body)), mass, self.prior.body_rate)
