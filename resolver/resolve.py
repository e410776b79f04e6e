"""The deterministic resolver: program + document -> new text, byte for byte."""

from __future__ import annotations

from cad.files import MAX_TEXT_BYTES
from cad.resolver.document import Document
from cad.resolver.program import CopyLines, CopySpan, Gen, Op, Program, ProgramError
from cad.resolver.syntax import format_op

MAX_OUTPUT_CHARS = 4 * MAX_TEXT_BYTES
"""The longest text :func:`resolve` builds, in characters: four times the largest file the
command line reads. A program may copy its document many times over; one whose output
would pass this is refused before any of it is built."""


def op_span(op: CopyLines | CopySpan, document: Document, op_index: int = 0) -> tuple[int, int]:
    """The character offsets ``[start, end)`` a copy takes from the document; out-of-range
    or reversed spans raise, never clamp."""
    n = document.n_lines
    if isinstance(op, CopyLines):
        if not 1 <= op.start <= op.end <= n:
            raise _range_error(op, op_index, f"lines within 1-{n}" if n else "no copy")
        return document.line_starts[op.start - 1], document.line_starts[op.end]
    for line, col in ((op.start_line, op.start_col), (op.end_line, op.end_col)):
        if not 1 <= line <= n:
            raise _range_error(op, op_index, f"lines within 1-{n}" if n else "no copy")
        width = len(document.lines[line - 1])
        if not 1 <= col <= width:
            raise _range_error(op, op_index, f"columns within 1-{width} on line {line}")
    if (op.end_line, op.end_col) < (op.start_line, op.start_col):
        raise _range_error(op, op_index, "an end at or after the start")
    return document.offset(op.start_line, op.start_col), document.offset(
        op.end_line, op.end_col
    ) + 1


def op_length(op: Op, document: Document, op_index: int = 0) -> int:
    """How many characters one op contributes, without building them (checked as
    :func:`op_text` checks them)."""
    if isinstance(op, Gen):
        return len(op.text)
    if isinstance(op, CopyLines | CopySpan):
        start, end = op_span(op, document, op_index)
        return end - start
    raise TypeError(f"not an op: {op!r}")


def op_text(op: Op, document: Document, op_index: int = 0) -> str:
    """The text one op contributes; out-of-range or reversed spans raise, never clamp."""
    if isinstance(op, Gen):
        return op.text
    if isinstance(op, CopyLines | CopySpan):
        start, end = op_span(op, document, op_index)
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


def resolve(
    program: Program, document: str | Document, *, max_chars: int | None = MAX_OUTPUT_CHARS
) -> str:
    """Expand ``program`` against ``document``; raises :class:`ProgramError` on a bad span,
    and when the output would be longer than ``max_chars`` characters (None: no limit),
    which is measured before the output is built."""
    doc = _as_document(document)
    total = 0
    for index, op in enumerate(program.ops):
        total += op_length(op, doc, index)
        if max_chars is not None and total > max_chars:
            expected = f"an output of at most {max_chars:,} characters"
            found = f"{total:,} characters by op {index + 1}"
            raise ProgramError(
                f"op {index + 1}: the output would pass {max_chars:,} characters, the most a "
                "program may write; copy less",
                expected=expected,
                found=found,
                op_index=index,
            )
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
