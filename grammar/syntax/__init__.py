"""Language grammars behind the one ``Matcher`` interface: Python (3.10-3.13, with an
indentation-aware lexer layer and a GLR parser), JSON and JSON typed by a JSON Schema; and
the syntax-safe program and rewrite modes built on them (see docs/syntax.md)."""

from cad.grammar.syntax.constraint import RegionMatcher, SyntaxConstraint, SyntaxMismatch
from cad.grammar.syntax.languages import (
    EXTENSIONS,
    LANGUAGES,
    language_for_path,
    syntax_machine,
)
from cad.grammar.syntax.machine import SyntaxMachine, SyntaxMatcher
from cad.grammar.syntax.program import SyntaxProgramMatcher, syntax_program_matcher

__all__ = [
    "EXTENSIONS",
    "LANGUAGES",
    "RegionMatcher",
    "SyntaxConstraint",
    "SyntaxMachine",
    "SyntaxMatcher",
    "SyntaxMismatch",
    "SyntaxProgramMatcher",
    "language_for_path",
    "syntax_machine",
    "syntax_program_matcher",
]
