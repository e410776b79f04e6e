"""Unified diffs of edits, as ``cad edit`` prints them: byte-exact text for pipes and files
(``git apply`` and ``patch -p1`` take it, carriage returns included), colored for a
terminal."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from rich.text import Text

from cad.resolver import split_lines


def diff_path(file: Path) -> str:
    """The path a diff names: relative to the current folder when the file lies under it
    (so ``git apply`` and ``patch -p1`` find it from there), else as given."""
    try:
        relative = os.path.relpath(file)
    except ValueError:
        return str(file)
    return str(file) if relative.startswith("..") else Path(relative).as_posix()


def diff_lines(before: str, after: str, old: str, new: str) -> list[str]:
    """The unified diff of ``before`` and ``after`` with ``old`` and ``new`` as header
    names, line by line, each with its own line break as the text has it (CR included);
    a last line without one is followed by ``\\ No newline at end of file``."""
    return [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(split_lines(before), split_lines(after), old, new)
    ]


def colored(lines: list[str]) -> Text:
    """Diff lines colored for a terminal (headers bold, removals red, additions green).
    Only for display: a terminal's text drops control characters such as CR."""
    text = Text()
    for line in lines:
        style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        if line.startswith(("+++", "---", "diff --git", "new file", "deleted file")):
            style = "bold"
        text.append(line, style=style)
    return text
