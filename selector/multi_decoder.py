"""Decoding a multi-file program: one edit of several files, copying from any of them.

The loop is program mode's (:mod:`cad.selector.decoder`) over the multi-file FSM: each
forward feeds the tokens the cache must take anyway (the prompt with every file numbered;
then the model's last choice, the literals forced after it and the text of a copy it
completed, from whichever file the copy names) with a draft tree below them
(:class:`MultiDrafter`), verified in ONE forward; acceptance walks the tree as the model
chooses under the FSM's mask. A copy of any length from any file therefore costs no more
forwards than a copy within one file. The program ends valid for the files (every file id,
line and created path checked by the FSM) and is resolved as it is decoded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from cad.grammar._native import DraftTree
from cad.resolver import MultiProgram, Workspace, format_multi, resolve_multi
from cad.selector.decoder import ProgramDecoding, walk_ahead
from cad.selector.line_tokens import LineTokens
from cad.selector.multi_drafting import MultiDrafter
from cad.selector.multi_tape import MultiProgramTape
from cad.selector.program_tokens import DocumentTokens
from cad.selector.prompt import multi_program_prompt
from cad.selector.sampling import TokenChooser, batched_reads
from cad.selector.speculation import (
    MAX_CHAIN_WITH_DRAFTS,
    Choice,
    ProgressCallback,
)
from cad.selector.stats import DecodeStats
from cad.selector.timing import PhaseClock

__all__ = ["MultiDecodeResult", "MultiDecoder"]


@dataclass
class MultiDecodeResult:
    """The program decided, the files it writes (path → new text, ``None`` for a deletion)
    and the costs."""

    program: MultiProgram
    changes: dict[str, str | None]
    stats: DecodeStats


class MultiDecoder(ProgramDecoding):
    """Decodes multi-file edit programs with one loaded model; reusable across edits.

    As :class:`cad.selector.Decoder`: the model chooses (greedy or sampled) under the FSM,
    or with ``program=`` follows that program (every forward still runs); ``draft_budget``
    (default: the draft configuration's) caps the drafted tokens per forward, 0 decodes one
    model-decided token per forward."""

    def check_context(self, prompt_tokens: int, file_tokens: int) -> int:
        """Raise if the prompt, a copy of every file (``file_tokens`` in all) and a draft
        tree cannot fit; return the token budget of model-decided tokens."""
        return self.token_budget(
            prompt_tokens,
            file_tokens,
            "a copy of every file",
            "give fewer or smaller files, or use a longer-context model",
        )

    def edit(
        self,
        files: Workspace | Mapping[str, str],
        instruction: str,
        *,
        editable: int | None = None,
        program: MultiProgram | None = None,
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> MultiDecodeResult:
        """Decode a program that edits the first ``editable`` of ``files`` (all by default;
        the rest are context to copy from) as ``instruction`` asks; resolve it."""
        start = time.perf_counter()
        workspace = files if isinstance(files, Workspace) else Workspace(files)
        editable = len(workspace) if editable is None else editable
        if not 1 <= editable <= len(workspace):
            raise ValueError(f"editable must be between 1 and {len(workspace)} files")
        target = None
        subline = self.subline
        if program is not None:
            resolve_multi(program, workspace)
            text = format_multi(program)
            target = text.encode("utf-8")
            subline = subline or 'span="' in text
        file_ids = [self.encode(doc.text) for doc in workspace.documents]
        tokenizer = self.loaded.tokenizer
        tape = MultiProgramTape(
            self.index,
            self.encode,
            workspace,
            editable=range(1, editable + 1),
            subline=subline,
            lines=[
                LineTokens.of(tokenizer, self.index, doc, DocumentTokens.of(self.index, doc, ids))
                for doc, ids in zip(workspace.documents, file_ids, strict=True)
            ],
        )
        clock = PhaseClock(self.loaded, tape.stats, started=start)
        prompt = multi_program_prompt(
            self.loaded.tokenizer, workspace, instruction, editable=editable, subline=subline
        )
        limit = self.check_context(len(prompt), sum(map(len, file_ids)))
        tape.stats.prefill_tokens = len(prompt)
        drafter = MultiDrafter(prompt)
        chooser = TokenChooser.for_model(self.loaded, self.sampling)
        batched = batched_reads(self.loaded.device)
        choose = Choice(chooser, target, batched=batched, walk=walk_ahead, clock=clock)
        pending = prompt + tape.take_forced()

        def fill(known: list[int], tree: DraftTree) -> None:
            budget = self.budget if len(known) <= MAX_CHAIN_WITH_DRAFTS else 0
            drafter.draft(tape, known, budget, tree)

        self.run(tape, pending, fill, choose, limit, clock, on_progress, cancel)
        changes = tape.changes()
        tape.stats.wall_s = time.perf_counter() - start
        return MultiDecodeResult(tape.program, changes, tape.stats)
