"""The prompt: instruction + the document with line numbers, in the model's chat format."""

from __future__ import annotations

from typing import Any

from resolver import Document

SYSTEM = (
    "You edit a document by writing a program over its numbered lines. Ops, one per line:\n"
    '<copy lines="i-j"/> copies lines i to j of the document verbatim (inclusive).\n'
    "<gen>text</gen> writes new text exactly as given, newlines included.\n"
    "End with </program>. Copy every line you keep; generate only what changes."
)
SUBLINE = (
    '\n<copy span="L:C-L:C"/> copies from line L column C to line L column C (inclusive, '
    "1-based, the line break counts as a column)."
)
REWRITE_SYSTEM = "You edit a document. Reply with the complete new document and nothing else."


def numbered_document(document: Document) -> str:
    """Each line as ``N|text``; a final line without terminator still ends the block."""
    shown = document.numbered()
    return shown if shown.endswith(("\n", "\r")) or not shown else shown + "\n"


def user_message(document: Document, instruction: str) -> str:
    """The user turn: the instruction, then the numbered document."""
    return (
        f"Instruction: {instruction}\n\n"
        f"Document ({document.n_lines} lines):\n{numbered_document(document)}"
    )


def render(tokenizer: Any, system: str, user: str) -> str:
    """Apply the tokenizer's chat template if it has one; otherwise a plain layout."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return f"{system}\n\n{user}\nProgram:\n"


def program_prompt(
    tokenizer: Any, document: Document, instruction: str, *, subline: bool = False
) -> list[int]:
    """Token ids of the prompt that asks for a program (the copy-as-decode mode)."""
    text = render(
        tokenizer, SYSTEM + (SUBLINE if subline else ""), user_message(document, instruction)
    )
    return tokenizer.encode(text, add_special_tokens=False)


def rewrite_prompt(tokenizer: Any, document: Document, instruction: str) -> list[int]:
    """Token ids of the prompt that asks for the whole new document (the baselines)."""
    text = render(tokenizer, REWRITE_SYSTEM, user_message(document, instruction))
    return tokenizer.encode(text, add_special_tokens=False)
