"""The program's text form: a strict parser and the canonical formatter.

Grammar (whitespace = space, tab, CR, LF; allowed only between ops)::

    program := ws (op ws)* "</program>" ws
    op      := '<copy lines="' N '-' N '"/>'
             | '<copy span="' N ':' N '-' N ':' N '"/>'
             | '<gen>' body '</gen>'
    N       := [1-9][0-9]*

A body is literal text in which ``</gen>`` cannot occur; ``escape_gen_text`` writes any text
as a body by adding one backslash to every ``<`` + ``\\``* + ``/gen>`` it contains.
"""

from __future__ import annotations

import re

from cad.resolver.program import CopyLines, CopySpan, Gen, Op, Program, ProgramError

COPY_OPEN = "<copy"
LINES_ATTRIBUTE = ' lines="'
SPAN_ATTRIBUTE = ' span="'
COPY_LINES_OPEN = COPY_OPEN + LINES_ATTRIBUTE
COPY_SPAN_OPEN = COPY_OPEN + SPAN_ATTRIBUTE
COPY_CLOSE = '"/>'
GEN_OPEN = "<gen>"
GEN_CLOSE = "</gen>"
PROGRAM_END = "</program>"
OP_SEPARATOR = "\n"

_WHITESPACE = " \t\r\n"
_ESCAPED_CLOSE = re.compile(r"<(\\*)/gen>")
_UNESCAPED_CLOSE = re.compile(r"<\\(\\*)/gen>")
_NUMBER = re.compile(r"[1-9][0-9]*")
_MAX_DIGITS = 18
"""No document has 10**18 lines; a longer number is an error, not a huge integer."""


def escape_gen_text(text: str) -> str:
    """Write ``text`` as a gen body: ``</gen>`` becomes ``<\\/gen>``, ``<\\/gen>`` becomes
    ``<\\\\/gen>`` and so on; nothing else changes."""
    return _ESCAPED_CLOSE.sub(lambda m: "<\\" + m.group(1) + "/gen>", text)


def unescape_gen_text(body: str) -> str:
    """Inverse of :func:`escape_gen_text`."""
    return _UNESCAPED_CLOSE.sub(lambda m: "<" + m.group(1) + "/gen>", body)


def format_op(op: Op) -> str:
    """Canonical text of one op, without separator."""
    if isinstance(op, CopyLines):
        return f"{COPY_LINES_OPEN}{op.start}-{op.end}{COPY_CLOSE}"
    if isinstance(op, CopySpan):
        return (
            f"{COPY_SPAN_OPEN}{op.start_line}:{op.start_col}-{op.end_line}:{op.end_col}{COPY_CLOSE}"
        )
    return f"{GEN_OPEN}{escape_gen_text(op.text)}{GEN_CLOSE}"


def format_program(program: Program) -> str:
    """Canonical program text: every op followed by a newline, then ``</program>``."""
    return "".join(format_op(op) + OP_SEPARATOR for op in program.ops) + PROGRAM_END


def _describe(text: str, pos: int) -> str:
    if pos >= len(text):
        return "end of program"
    return repr(text[pos : pos + 12])


class _Parser:
    """A recursive-descent parser over ``text`` from ``pos``; ``closer`` is the tag that ends
    the ops being read (named in errors)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.closer = PROGRAM_END

    def error(
        self, expected: str, pos: int | None = None, found: str | None = None
    ) -> ProgramError:
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        col = at - (self.text.rfind("\n", 0, at) + 1) + 1
        found = _describe(self.text, at) if found is None else found
        return ProgramError(
            f"program {line}:{col}: expected {expected}, found {found}",
            expected=expected,
            found=found,
            position=at,
        )

    def skip_whitespace(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
            self.pos += 1

    def expect(self, literal: str) -> None:
        if not self.text.startswith(literal, self.pos):
            raise self.error(repr(literal))
        self.pos += len(literal)

    def number(self) -> int:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.error("a number from 1 without leading zeros")
        if len(match.group()) > _MAX_DIGITS:
            raise self.error(f"a line number of at most {_MAX_DIGITS} digits")
        self.pos = match.end()
        return int(match.group())

    def op(self) -> Op:
        start = self.pos
        if self.text.startswith(COPY_LINES_OPEN, self.pos) or self.text.startswith(
            COPY_SPAN_OPEN, self.pos
        ):
            self.pos += len(COPY_OPEN)
            return self.copy_range(start)
        if self.text.startswith(GEN_OPEN, self.pos):
            body_start = self.pos + len(GEN_OPEN)
            body_end = self.text.find(GEN_CLOSE, body_start)
            if body_end < 0:
                raise self.error(repr(GEN_CLOSE), len(self.text))
            self.pos = body_end + len(GEN_CLOSE)
            return Gen(unescape_gen_text(self.text[body_start:body_end]))
        raise self.error(f"'<copy', '<gen>' or {self.closer!r}")

    def copy_range(self, start: int) -> CopyLines | CopySpan:
        """A copy's range and close, from the space after ``<copy`` (or after its file):
        `` lines="i-j"/>`` or `` span="L:C-L:C"/>``; ``start`` is where the op began."""
        if self.text.startswith(LINES_ATTRIBUTE, self.pos):
            self.pos += len(LINES_ATTRIBUTE)
            first = self.number()
            self.expect("-")
            last = self.number()
            self.expect(COPY_CLOSE)
            if last < first:
                raise self.error(f"an end line >= {first}", start, f"reversed range {first}-{last}")
            return CopyLines(first, last)
        if self.text.startswith(SPAN_ATTRIBUTE, self.pos):
            self.pos += len(SPAN_ATTRIBUTE)
            l1 = self.number()
            self.expect(":")
            c1 = self.number()
            self.expect("-")
            l2 = self.number()
            self.expect(":")
            c2 = self.number()
            self.expect(COPY_CLOSE)
            if (l2, c2) < (l1, c1):
                raise self.error(
                    f"an end at or after {l1}:{c1}", start, f"reversed span ending {l2}:{c2}"
                )
            return CopySpan(l1, c1, l2, c2)
        raise self.error(f"{LINES_ATTRIBUTE!r} or {SPAN_ATTRIBUTE!r}")

    def ops_until(self, closer: str) -> list[Op]:
        """Ops (and the whitespace between them) up to ``closer``, which is consumed."""
        ops: list[Op] = []
        self.closer = closer
        while not self.text.startswith(closer, self.pos):
            if self.pos >= len(self.text):
                raise self.error(repr(closer))
            ops.append(self.op())
            self.skip_whitespace()
        self.pos += len(closer)
        return ops

    def end(self) -> None:
        """After ``</program>``: only whitespace may follow."""
        self.skip_whitespace()
        if self.pos != len(self.text):
            raise self.error("nothing after '</program>'")

    def program(self) -> Program:
        self.skip_whitespace()
        ops = self.ops_until(PROGRAM_END)
        self.end()
        return Program(tuple(ops))


def parse(text: str) -> Program:
    """Parse program text; raises :class:`ProgramError` with position, expected and found."""
    return _Parser(text).program()
