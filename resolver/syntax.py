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

COPY_LINES_OPEN = '<copy lines="'
COPY_SPAN_OPEN = '<copy span="'
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
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

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
        if self.text.startswith(COPY_LINES_OPEN, self.pos):
            self.pos += len(COPY_LINES_OPEN)
            first = self.number()
            self.expect("-")
            last = self.number()
            self.expect(COPY_CLOSE)
            if last < first:
                raise self.error(f"an end line >= {first}", start, f"reversed range {first}-{last}")
            return CopyLines(first, last)
        if self.text.startswith(COPY_SPAN_OPEN, self.pos):
            self.pos += len(COPY_SPAN_OPEN)
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
        if self.text.startswith(GEN_OPEN, self.pos):
            body_start = self.pos + len(GEN_OPEN)
            body_end = self.text.find(GEN_CLOSE, body_start)
            if body_end < 0:
                raise self.error(repr(GEN_CLOSE), len(self.text))
            self.pos = body_end + len(GEN_CLOSE)
            return Gen(unescape_gen_text(self.text[body_start:body_end]))
        raise self.error("'<copy', '<gen>' or '</program>'")

    def program(self) -> Program:
        ops: list[Op] = []
        self.skip_whitespace()
        while not self.text.startswith(PROGRAM_END, self.pos):
            if self.pos >= len(self.text):
                raise self.error(repr(PROGRAM_END))
            ops.append(self.op())
            self.skip_whitespace()
        self.pos += len(PROGRAM_END)
        self.skip_whitespace()
        if self.pos != len(self.text):
            raise self.error("nothing after '</program>'")
        return Program(tuple(ops))


def parse(text: str) -> Program:
    """Parse program text; raises :class:`ProgramError` with position, expected and found."""
    return _Parser(text).program()
