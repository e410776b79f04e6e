"""The deterministic resolver: program + document -> new text, byte for byte."""

from __future__ import annotations

from cad.resolver.document import Document
from cad.resolver.program import CopyLines, CopySpan, Gen, Op, Program, ProgramError
from cad.resolver.syntax import format_op


def op_text(op: Op, document: Document, op_index: int = 0) -> str:
    """The text one op contributes; out-of-range or reversed spans raise, never clamp."""
    if isinstance(op, Gen):
        return op.text
    n = document.n_lines
    if isinstance(op, CopyLines):
        if not 1 <= op.start <= op.end <= n:
            raise _range_error(op, op_index, f"lines within 1-{n}" if n else "no copy")
        return "".join(document.lines[op.start - 1 : op.end])
    if isinstance(op, CopySpan):
        for line, col in ((op.start_line, op.start_col), (op.end_line, op.end_col)):
            if not 1 <= line <= n:
                raise _range_error(op, op_index, f"lines within 1-{n}" if n else "no copy")
            width = len(document.lines[line - 1])
            if not 1 <= col <= width:
                raise _range_error(op, op_index, f"columns within 1-{width} on line {line}")
        if (op.end_line, op.end_col) < (op.start_line, op.start_col):
            raise _range_error(op, op_index, "an end at or after the start")
        start = document.offset(op.start_line, op.start_col)
        end = document.offset(op.end_line, op.end_col) + 1
        return document.text[start:end]
    raise TypeError(f"not an op: {op!r}")


def _range_error(op: Op, op_index: int, expected: str) -> ProgramError:
    found = format_op(op)
    return ProgramError(
        f"op {op_index + 1}: {found} is out of range: expected {expected}",
        expected=expected,
        found=found,
        op_index=op_index,
    )


def _as_document(document: str | Document) -> Document:
    return document if isinstance(document, Document) else Document(document)


def resolve(program: Program, document: str | Document) -> str:
    """Expand ``program`` against ``document``; raises :class:`ProgramError` on a bad span."""
    doc = _as_document(document)
    return "".join(op_text(op, doc, i) for i, op in enumerate(program.ops))


class IncrementalResolver:
    """Resolves ops one at a time so decoders and servers can stream the output.

    ``push`` validates one op and returns the text it adds; ``text`` is everything so far.
    An invalid op raises :class:`ProgramError` and leaves the resolver unchanged.
    """

    def __init__(self, document: str | Document) -> None:
        self.document = _as_document(document)
        self.ops: list[Op] = []
        self._pieces: list[str] = []

    def push(self, op: Op) -> str:
        """Append one op; returns the text it produced."""
        piece = op_text(op, self.document, len(self.ops))
        self.ops.append(op)
        self._pieces.append(piece)
        return piece

    @property
    def text(self) -> str:
        """The output produced so far."""
        return "".join(self._pieces)

    @property
    def program(self) -> Program:
        """The ops pushed so far, as a program."""
        return Program(tuple(self.ops))
