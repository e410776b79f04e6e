"""The prompts, in the model's chat format: the program prompt shows the document with line
numbers; the rewrite prompt shows it plain in a fence and asks for the updated text."""

from __future__ import annotations

import re
from typing import Any

from cad.resolver import Document, Workspace

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
REWRITE_SYSTEM = (
    "You edit a document. Reply with the complete updated document, exactly as it should be "
    "saved, and nothing else."
)
REWRITE_RANGE_SYSTEM = (
    "You edit a range of lines of a document. Reply with the complete updated text of those "
    "lines, exactly as it should be saved, and nothing else."
)


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


MULTI_SYSTEM = (
    "You edit several files by writing a program over their numbered lines. The files are "
    "numbered [1], [2], ... as shown. One section per file you change:\n"
    '<edit file="k">ops</edit> rewrites file k; <create path="p">ops</create> writes a new '
    'file; <delete file="k"/> removes file k. Ops, one per line:\n'
    '<copy lines="i-j"/> copies lines i to j of the section\'s own file verbatim (inclusive).\n'
    '<copy file="k" lines="i-j"/> copies lines i to j of file k.\n'
    "<gen>text</gen> writes new text exactly as given, newlines included.\n"
    "End with </program>. Copy every line you keep, from whichever file holds it; generate "
    "only what is new."
)
MULTI_SUBLINE = (
    '\n<copy file="k" span="L:C-L:C"/> copies from line L column C to line L column C of '
    "file k (inclusive, 1-based, the line break counts as a column)."
)


def multi_user_message(workspace: Workspace, instruction: str, editable: int) -> str:
    """The user turn of a multi-file edit: the instruction, which files may change, then
    every file with its header and numbered lines."""
    if editable < len(workspace):
        scope = (
            f"Files 1-{editable} may be changed; files {editable + 1}-{len(workspace)} are "
            "context, to copy from only.\n\n"
        )
    else:
        scope = ""
    return f"Instruction: {instruction}\n\n{scope}Files:\n{workspace.numbered()}"


def multi_program_prompt(
    tokenizer: Any,
    workspace: Workspace,
    instruction: str,
    *,
    editable: int,
    subline: bool = False,
) -> list[int]:
    """Token ids of the prompt that asks for a multi-file program over ``workspace``, whose
    first ``editable`` files may be written (the rest are context)."""
    system = MULTI_SYSTEM + (MULTI_SUBLINE if subline else "")
    user = multi_user_message(workspace, instruction, editable)
    return tokenizer.encode(render(tokenizer, system, user), add_special_tokens=False)


def fenced(text: str) -> str:
    """``text`` in a Markdown code fence longer than any backtick run inside it, the closing
    fence on a line of its own (after a line break added when ``text`` has none at the end)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith(("\n", "\r")) or not text else text + "\n"
    return f"{fence}\n{body}{fence}\n"


def rewrite_prompt(
    tokenizer: Any, document: Document, instruction: str, lines: tuple[int, int] | None = None
) -> list[int]:
    """Token ids of the prompt that asks for the whole updated document (rewrite mode, the
    baselines, grammar-constrained generation), or with ``lines=(i, j)`` for the updated text
    of lines i to j only (1-based, inclusive). The document is shown plain in a fence, so a
    reply can repeat it token for token."""
    user = f"Instruction: {instruction}\n\nDocument:\n{fenced(document.text)}"
    system = REWRITE_SYSTEM
    if lines is not None:
        first, last = lines
        part = "".join(document.lines[first - 1 : last])
        user += f"\nRewrite lines {first}-{last} only; they are now:\n{fenced(part)}"
        system = REWRITE_RANGE_SYSTEM
    return tokenizer.encode(render(tokenizer, system, user), add_special_tokens=False)


MULTI_REWRITE_SYSTEM = (
    "You edit several files. Reply with the complete updated text of the one file you are "
    "asked for, exactly as it should be saved, and nothing else."
)


def multi_rewrite_prompt(
    tokenizer: Any, workspace: Workspace, instruction: str, file: int
) -> list[int]:
    """Token ids of the prompt that asks for the updated text of ``file`` (1-based) of an
    edit of several files: every file is shown plain in a fence under its header, so a reply
    can repeat any of them token for token."""
    shown = "".join(
        f"[{number}] {path}\n{fenced(document.text)}"
        for number, (path, document) in enumerate(
            zip(workspace.paths, workspace.documents, strict=True), 1
        )
    )
    user = (
        f"Instruction: {instruction}\n\nFiles:\n{shown}\n"
        f"Reply with the updated text of file [{file}] {workspace.paths[file - 1]}."
    )
    return tokenizer.encode(render(tokenizer, MULTI_REWRITE_SYSTEM, user), add_special_tokens=False)
