"""The syntax setting of ``cad edit --syntax`` and of the server's ``syntax``: which
language an edit is held to, whether the file parses before the edit, and the constraint
the decoders take.

``auto`` picks the language by file extension (or the editor's language id) and edits a
file that does not parse without the constraint, saying so in one line; a language named
explicitly refuses such a file instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cad.errors import UserError

if TYPE_CHECKING:
    from cad.grammar.syntax import SyntaxConstraint

LANGUAGE_IDS = {"python": "python", "json": "json"}
"""LSP language ids with a grammar (``jsonc`` allows comments, so it is not JSON)."""


@cache
def _bytes_vocabulary() -> Any:
    """A vocabulary of the 256 single bytes: checking a file needs no tokenizer."""
    from cad.grammar.vocab import Vocabulary

    return Vocabulary(tuple(bytes([value]) for value in range(256)), None)


class SyntaxChoice(StrEnum):
    """``auto`` (by file type), a language, or ``none``."""

    auto = "auto"
    python = "python"
    json = "json"
    none = "none"


@dataclass(frozen=True)
class SyntaxPlan:
    """The language an edit is held to (``None``: unconstrained) and its JSON Schema."""

    language: str | None
    schema: Any = None

    def constraint(
        self, tokenizer: Any, vocab_size: int | None, before: str, region: str, after: str
    ) -> SyntaxConstraint | None:
        """The constraint for editing ``region`` with ``tokenizer`` (None when
        unconstrained); the file was checked to parse when the plan was made."""
        if self.language is None:
            return None
        from cad.grammar.syntax import SyntaxConstraint, syntax_machine

        machine = syntax_machine(
            self.language, tokenizer, vocab_size=vocab_size, schema=self.schema
        )
        return SyntaxConstraint.for_region(machine, before, region, after)


def choose_language(
    choice: str, *, path: str | None = None, language_id: str | None = None
) -> str | None:
    """The language for ``choice``: itself when one is named, by language id or file
    extension for ``auto``, None for ``none`` or an unknown type."""
    if choice == SyntaxChoice.none:
        return None
    if choice != SyntaxChoice.auto:
        return str(choice)
    if language_id and language_id.lower() in LANGUAGE_IDS:
        return LANGUAGE_IDS[language_id.lower()]
    from cad.grammar.syntax import language_for_path

    return language_for_path(path) if path else None


def parse_schema(path: Path, text: str) -> Any:
    """The JSON Schema ``text`` read from ``path``, read as strictly as the JSON Schema front
    end reads one (nesting depth, number sizes); a bad file is a one-line error naming it."""
    from cad.grammar.cfg import GrammarError
    from cad.grammar.cfg.json_schema import load_schema_text

    try:
        return load_schema_text(text)
    except GrammarError as exc:
        raise UserError(f"--schema {path}: {exc}") from None


def plan_syntax(
    choice: SyntaxChoice,
    *,
    language: str | None,
    schema: Any,
    before: str,
    region: str,
    after: str,
    warn: Any,
) -> SyntaxPlan:
    """Check that the file ``before + region + after`` parses as ``language`` (without a
    tokenizer, so before any model loads). A file that does not parse, or JSON nested deeper
    than ``MAX_JSON_DEPTH`` (checked first, in linear time, since following it would take
    memory in proportion to the depth), is refused (``UserError``) when the language was
    chosen explicitly; with ``auto`` one line goes to ``warn`` and the edit is
    unconstrained. A schema that cannot be compiled is refused."""
    if language is None:
        return SyntaxPlan(None)
    from cad.grammar.syntax import SyntaxConstraint, SyntaxMismatch, syntax_machine
    from cad.grammar.syntax.languages import MAX_JSON_DEPTH, json_depth

    if language == "json":
        depth = json_depth(before + region + after)
        if depth > MAX_JSON_DEPTH:
            reason = (
                f"the file nests JSON {depth:,} levels deep, more than the {MAX_JSON_DEPTH:,} "
                "the JSON constraint follows"
            )
            if choice != SyntaxChoice.auto or schema is not None:
                raise UserError(f"{reason}; edit it without the constraint (--syntax none)")
            warn(f"note: {reason}; editing without the syntax constraint")
            return SyntaxPlan(None)
    try:
        machine = syntax_machine(language, _bytes_vocabulary(), schema=schema)
        SyntaxConstraint.for_region(machine, before, region, after)
    except SyntaxMismatch as exc:
        if choice != SyntaxChoice.auto or schema is not None:
            raise UserError(
                f"{exc}; fix it first or edit without the constraint (--syntax none)"
            ) from None
        warn(f"note: {exc}; editing without the syntax constraint")
        return SyntaxPlan(None)
    except ValueError as exc:  # a schema the front end cannot compile (GrammarError)
        raise UserError(f"--schema: {exc}") from None
    return SyntaxPlan(language, schema)
