"""The program language: parse, format, resolve, oracle programs and coverage analysis.

Single-file programs (``Program``: ``parse``, ``format``, ``resolve``, ``oracle``) edit one
numbered document. Multi-file programs (``MultiProgram``: ``parse_multi``, ``format_multi``,
``resolve_multi``, ``oracle_multi``) edit, create and delete files of a ``Workspace``, and
copy from any of them; a single-file program is a multi-file program as it is.
"""

from cad.resolver.coverage import EditCoverage, analyze_edit, speedup_ceiling
from cad.resolver.document import Document, split_lines
from cad.resolver.multi_coverage import MultiEditCoverage, analyze_multi_edit
from cad.resolver.multi_oracle import oracle_multi, per_file_programs
from cad.resolver.multi_resolve import (
    Changes,
    IncrementalMultiResolver,
    apply_changes,
    file_op_span,
    file_op_text,
    resolve_multi,
)
from cad.resolver.multi_syntax import format_file_op, format_multi, parse_multi, section_header
from cad.resolver.oracle import oracle, token_pieces
from cad.resolver.program import (
    CopyFrom,
    CopyLines,
    CopySpan,
    CreateFile,
    DeleteFile,
    EditFile,
    FileOp,
    Gen,
    MultiProgram,
    Op,
    Program,
    ProgramError,
    Section,
)
from cad.resolver.resolve import IncrementalResolver, op_text, resolve
from cad.resolver.syntax import escape_gen_text, format_op, format_program, parse, unescape_gen_text
from cad.resolver.workspace import Workspace, path_problem

format = format_program

__all__ = [
    "Changes",
    "CopyFrom",
    "CopyLines",
    "CopySpan",
    "CreateFile",
    "DeleteFile",
    "Document",
    "EditCoverage",
    "EditFile",
    "FileOp",
    "Gen",
    "IncrementalMultiResolver",
    "IncrementalResolver",
    "MultiEditCoverage",
    "MultiProgram",
    "Op",
    "Program",
    "ProgramError",
    "Section",
    "Workspace",
    "analyze_edit",
    "analyze_multi_edit",
    "apply_changes",
    "escape_gen_text",
    "file_op_span",
    "file_op_text",
    "format",
    "format_file_op",
    "format_multi",
    "format_op",
    "format_program",
    "op_text",
    "oracle",
    "oracle_multi",
    "parse",
    "parse_multi",
    "path_problem",
    "per_file_programs",
    "resolve",
    "resolve_multi",
    "section_header",
    "speedup_ceiling",
    "split_lines",
    "token_pieces",
    "unescape_gen_text",
]
