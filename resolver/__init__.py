"""The program language: parse, format, resolve, oracle programs and coverage analysis."""

from cad.resolver.coverage import EditCoverage, analyze_edit, speedup_ceiling
from cad.resolver.document import Document, split_lines
from cad.resolver.oracle import oracle, token_pieces
from cad.resolver.program import CopyLines, CopySpan, Gen, Op, Program, ProgramError
from cad.resolver.resolve import IncrementalResolver, op_text, resolve
from cad.resolver.syntax import escape_gen_text, format_op, format_program, parse, unescape_gen_text

format = format_program

__all__ = [
    "CopyLines",
    "CopySpan",
    "Document",
    "EditCoverage",
    "Gen",
    "IncrementalResolver",
    "Op",
    "Program",
    "ProgramError",
    "analyze_edit",
    "escape_gen_text",
    "format",
    "format_op",
    "format_program",
    "op_text",
    "oracle",
    "parse",
    "resolve",
    "speedup_ceiling",
    "split_lines",
    "token_pieces",
    "unescape_gen_text",
]
