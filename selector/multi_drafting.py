"""Drafts of a multi-file program's continuation, one tree per forward.

Two sources, below the chain of tokens the forward must feed anyway:

* **the next copy** — a program keeps copying where its last copy from a file stopped. For
  the section's own file and the other file copied last, the op that starts at the line
  after that copy (``<copy lines="43-`` or ``<copy file="2" lines="43-``), continued from
  the op written so far, as the tape would take it: the tokens forced-program decoding
  chooses with the literals forced between them, so a model trained on such tapes
  accepts it;
* **prompt lookup** — the tokens that followed the last occurrence of the latest n-gram in
  the prompt (every file, numbered) and the tape: generated text that repeats a line of any
  file, or a pattern of ops repeated (native code).
"""

from __future__ import annotations

from collections import defaultdict

from cad.grammar._native import DraftTree, PromptLookup
from cad.resolver import (
    CopyFrom,
    CopyLines,
    CreateFile,
    DeleteFile,
    Document,
    EditFile,
    MultiProgram,
    Section,
)
from cad.selector.multi_tape import MultiProgramTape

__all__ = ["MultiDrafter", "tape_tokens"]

MAX_NGRAM = 3
"""The longest n-gram prompt lookup matches."""
BLOCK_ENDS = 3
"""How many block ends (a line before a blank line) the next copy is drafted to, besides
the file's last line."""
GAPS = 2
"""How many dropped runs of lines (see :meth:`MultiDrafter.gaps`) are drafted as copies."""
LOOKUP_TOKENS = 32
"""The most tokens one prompt-lookup draft proposes (a long run of generated text that
repeats a file is drafted again at the next forward)."""


def tape_tokens(tape: MultiProgramTape, data: bytes) -> list[int]:
    """The tokens ``tape`` takes if the program continues with ``data``: the model's tokens
    as forced-program decoding chooses them (the longest the FSM allows) with the literals
    forced between them, up to where ``data`` ends or the FSM refuses it. The tape is put
    back as it was."""
    mark = tape.mark()
    start = len(tape.tokens)
    target = tape.matcher.text + data
    try:
        while len(tape.matcher.text) < len(target) and not tape.finished:
            try:
                token = tape.target_token(target)
            except RuntimeError:
                break
            tape.decide(token)
            tape.take_forced()
        return tape.tokens[start:]
    finally:
        tape.undo(mark)


def copy_op(file: int, own: int, start: int, end: int) -> bytes:
    """The copy of lines ``start``-``end`` of ``file`` in a section of file ``own``."""
    attribute = "" if file == own else f'file="{file}" '
    return f'<copy {attribute}lines="{start}-{end}"/>'.encode()


class MultiDrafter:
    """Drafts for one multi-file decode over ``prompt`` (token ids)."""

    def __init__(self, prompt: list[int]) -> None:
        self.lookup = PromptLookup(MAX_NGRAM)
        self.lookup.extend(prompt)
        self._seen = 0

    def next_copies(self, tape: MultiProgramTape) -> list[bytes]:
        """The next-copy ops the open section most likely writes next (see the module): for
        each file, the op from the line after its last copy to each of the ends
        :meth:`ends` proposes, the shortest first."""
        program = tape.program
        section: Section | None = program.sections[-1] if program.sections else None
        own = section.file if isinstance(section, EditFile) else 0
        if section is None or not tape.matcher.record_count:
            own = 1
        ops = section.ops if isinstance(section, (EditFile, CreateFile)) else ()
        ends: dict[int, int] = {}
        last_other = 0
        for op in ops:
            file, copy = (op.file, op.copy) if isinstance(op, CopyFrom) else (own, op)
            if isinstance(copy, CopyLines):
                ends[file] = copy.end
                if file != own:
                    last_other = file
        candidates = []
        for file in (own, last_other):
            if not file:
                continue
            start = ends.get(file, 0) + 1
            for end in self.ends(tape.workspace.document(file), start):
                candidates.append(copy_op(file, own, start, end))
        for file, start, end in self.gaps(program)[:GAPS]:
            candidates.append(copy_op(file, own, start, end))
        return candidates

    @staticmethod
    def gaps(program: MultiProgram) -> list[tuple[int, int, int]]:
        """The runs of lines that the edited files' finished sections dropped and no copy has
        taken yet, as ``(file, first, last)``: code that left its file, about to be copied
        into another (a move)."""
        covered: dict[int, set[int]] = defaultdict(set)
        edited: list[int] = []
        for position, section in enumerate(program.sections):
            if isinstance(section, DeleteFile):
                continue
            own = section.file if isinstance(section, EditFile) else 0
            if own and position < len(program.sections) - 1:
                edited.append(own)
            for op in section.ops:
                file, copy = (op.file, op.copy) if isinstance(op, CopyFrom) else (own, op)
                if isinstance(copy, CopyLines):
                    covered[file].update(range(copy.start, copy.end + 1))
        found = []
        for file in edited:
            taken = covered[file]
            last = max(taken, default=0)
            run_start = 0
            for number in range(1, last + 1):
                if number not in taken and not run_start:
                    run_start = number
                elif number in taken and run_start:
                    found.append((file, run_start, number - 1))
                    run_start = 0
        return found

    @staticmethod
    def ends(document: Document, start: int) -> list[int]:
        """Where a copy from line ``start`` likely ends: before each of the next blank
        lines (the end of a block), and the last line."""
        if start > document.n_lines:
            return []
        found: list[int] = []
        for number in range(start + 1, document.n_lines + 1):
            if not document.lines[number - 1].strip():
                if number - 1 >= start and number - 1 not in found:
                    found.append(number - 1)
                if len(found) == BLOCK_ENDS:
                    break
        if document.n_lines not in found:
            found.append(document.n_lines)
        return found

    def draft(self, tape: MultiProgramTape, known: list[int], budget: int, tree: DraftTree) -> None:
        """Into ``tree``: the ``known`` tokens as a chain, then up to ``budget`` drafted tokens
        below its end (the next copy first, prompt lookup beside it)."""
        tree.assign_chain(known)
        self.lookup.extend(tape.tokens[self._seen :])
        self._seen = len(tape.tokens)
        if budget <= 0 or tape.finished:
            return
        prefix = tape.op_prefix()
        chains: list[list[int]] = []
        for candidate in self.next_copies(tape):
            if candidate.startswith(prefix) and len(candidate) > len(prefix):
                chains.append(tape_tokens(tape, candidate[len(prefix) :]))
        chains.append(list(self.lookup.draft(min(budget, LOOKUP_TOKENS))))
        root = len(known) - 1
        for chain in chains:
            node = root
            for token in chain:
                if budget <= 0:
                    return
                child = tree.child(node, token)
                if child < 0:
                    child = tree.add(node, token, 1.0)
                    budget -= 1
                node = child
