"""Rewrite mode for several files: each file to edit rewritten in turn, drafted from all.

For an edit of several files without a trained selector, the model writes the complete
updated text of each file to edit, one decode per file (:func:`cad.selector.rewrite.speculate`).
The prompt shows every file, and the drafts come from the file being rewritten first, then
every other file: code that moves in from another file is drafted from where it was, as the
file's own unchanged text is. Rewrite mode writes the files it is given; creating and
deleting files needs a multi-file program.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

from cad.resolver import Workspace
from cad.selector.draft_config import DraftConfig
from cad.selector.loading import LoadedModel
from cad.selector.prompt import multi_rewrite_prompt
from cad.selector.rewrite import (
    RewriteStats,
    decoded_text,
    extract_file,
    speculate,
    with_budget,
)
from cad.selector.sampling import Sampling
from cad.selector.speculation import ProgressCallback
from cad.selector.stats import DecodeStats

__all__ = ["MultiRewriteResult", "rewrite_files"]


@dataclass
class MultiRewriteResult:
    """The new text of every file rewritten (path → text), and the costs of all the decodes
    together (``truncated`` when any was cut short)."""

    changes: dict[str, str]
    stats: DecodeStats


def draft_source(workspace: Workspace, file: int, encode: Callable) -> list[int]:
    """The tokens drafts are taken from when file ``file`` is rewritten: that file, then
    every other file in order."""
    order = [file, *(other for other in range(1, len(workspace) + 1) if other != file)]
    tokens: list[int] = []
    for number in order:
        text = workspace.document(number).text
        tokens.extend(encode(text if not text or text.endswith("\n") else text + "\n"))
    return tokens


def add_stats(total: DecodeStats, part: DecodeStats) -> None:
    """Add ``part``'s counts and times to ``total`` (``truncated`` when either is)."""
    for item in fields(DecodeStats):
        value = getattr(part, item.name)
        if item.name == "truncated":
            total.truncated = total.truncated or value
        elif item.name == "host_per_forward_s":
            total.host_per_forward_s.extend(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            setattr(total, item.name, getattr(total, item.name) + value)


def rewrite_files(
    loaded: LoadedModel,
    files: Workspace | Mapping[str, str],
    instruction: str,
    *,
    editable: int | None = None,
    targets: Mapping[str, str] | None = None,
    config: DraftConfig | None = None,
    max_new_tokens: int = 2048,
    sampling: Sampling | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    draft_budget: int | None = None,
) -> MultiRewriteResult:
    """Let the model rewrite each of the first ``editable`` of ``files`` (all by default; the
    rest are context) as ``instruction`` asks. With ``targets`` (path → text) every choice is
    forced to that text (forwards and wall-clock stay real). ``max_new_tokens`` bounds each
    file's decode."""
    workspace = files if isinstance(files, Workspace) else Workspace(files)
    editable = len(workspace) if editable is None else editable
    if not 1 <= editable <= len(workspace):
        raise ValueError(f"editable must be between 1 and {len(workspace)} files")
    config = with_budget(config, draft_budget, loaded.device)
    tokenizer = loaded.tokenizer

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    total = RewriteStats(mode="rewrite-files" if targets is None else "rewrite-files-oracle")
    changes: dict[str, str] = {}
    for file in range(1, editable + 1):
        path = workspace.paths[file - 1]
        target_ids = encode(targets[path]) if targets is not None else None
        output, stats = speculate(
            loaded,
            multi_rewrite_prompt(tokenizer, workspace, instruction, file),
            draft_source(workspace, file, encode),
            config=config,
            max_new_tokens=max_new_tokens if target_ids is None else len(target_ids) + 1,
            sampling=sampling,
            target_ids=target_ids,
            on_progress=on_progress,
            cancel=cancel,
        )
        old = workspace.document(file).text
        changes[path] = extract_file(
            decoded_text(loaded, output), old.endswith(("\n", "\r")) or not old
        )
        add_stats(total, stats)
    forwards = max(total.forwards, 1)
    total.accepted_per_forward = (total.generated_tokens + total.copied_tokens) / forwards
    return MultiRewriteResult(changes, total)
