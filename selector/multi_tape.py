"""The token tape of a multi-file edit: what the decoder appends to the KV cache after the
prompt, over the multi-file program FSM.

As for one file (:mod:`cad.selector.tape`), three kinds of tokens go on the tape: tokens the
model decides, structural literals the FSM forces (section tags, ``file="``, ...), and the
copied text of each completed copy, from whichever file it names (the echo, fed in the same
forward as the token that completed the copy). The tape resolves the program as it goes
(:class:`cad.resolver.IncrementalMultiResolver`), so a decoded program is known valid and
its files known the moment it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields, replace

from cad.grammar import ProgramTokenIndex
from cad.grammar.multi_matcher import MultiProgramMatcher, file_op_from_record
from cad.resolver import (
    CopyFrom,
    CopySpan,
    CreateFile,
    DeleteFile,
    EditFile,
    Gen,
    IncrementalMultiResolver,
    MultiProgram,
    Workspace,
    format_multi,
)
from cad.selector.line_tokens import LineTokens
from cad.selector.stats import DecodeStats
from cad.selector.tape import TapeRecord

__all__ = ["MultiProgramTape", "MultiTapeMark", "follow_multi_program"]


@dataclass(frozen=True)
class MultiTapeMark:
    """Where a multi-file tape stood (see :meth:`MultiProgramTape.mark`)."""

    steps: int
    tokens: int
    records: int
    op_start: int
    stats: DecodeStats


class MultiProgramTape(TapeRecord):
    """Multi-file program FSM + incremental resolver + the record of appended tokens.

    ``tokens[i]`` went into the cache after the prompt; ``decided[i]`` says whether the model
    chose it. Files ``1..editable`` may be written (all by default), the others are context.
    ``lines`` (one per file, or ``None`` for a file without) give the files' own tokens by
    line, so that copies of whole lines are read off them instead of tokenized again."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        workspace: Workspace,
        *,
        editable: Collection[int] | None = None,
        subline: bool = False,
        lines: Sequence[LineTokens | None] | None = None,
    ) -> None:
        self.index = index
        self.encode = encode
        self.workspace = workspace
        self.lines = list(lines) if lines is not None else [None] * len(workspace)
        self.matcher = MultiProgramMatcher.for_workspace(
            index, workspace, editable=editable, subline=subline
        )
        super().__init__(self.matcher.vocab_size)
        self.resolver = IncrementalMultiResolver(workspace)
        self._records = 0
        self._bare = False

    def mark(self) -> MultiTapeMark:
        """A point to come back to with :meth:`undo`."""
        return MultiTapeMark(
            self._steps, len(self.tokens), self._records, self.op_start, replace(self.stats)
        )

    def undo(self, mark: MultiTapeMark) -> None:
        """Put the tape back where it stood at ``mark``: the matcher's steps rolled back, the
        resolver rebuilt from the records kept, the tokens and counts since then dropped."""
        self.matcher.rollback(self._steps - mark.steps)
        self._steps = mark.steps
        del self.tokens[mark.tokens :], self.decided[mark.tokens :]
        if self._records != mark.records:
            self.resolver = IncrementalMultiResolver(self.workspace)
            self._records, self._bare = 0, False
            for position in range(mark.records):
                self._resolve_record(position)
            self._records = mark.records
        self.op_start = mark.op_start
        for item in fields(DecodeStats):
            setattr(self.stats, item.name, getattr(mark.stats, item.name))

    def _resolve_record(self, position: int) -> str | None:
        """Apply the matcher's record ``position`` to the resolver; a copy or gen returns the
        text it added."""
        record = self.matcher.record(position)
        kind = record[0]
        if kind == "edit":
            self.resolver.open(EditFile(record[1]))
        elif kind == "create":
            self.resolver.open(CreateFile(record[1].decode("utf-8")))
        elif kind == "delete":
            self.resolver.open(DeleteFile(record[1]))
        elif kind == "close":
            self.resolver.close()
        else:
            if not self._bare and not self.resolver.is_open:
                self.resolver.open(EditFile(1))
                self._bare = True
            return self.resolver.push(file_op_from_record(record))
        return None

    def _known_echo(self, record: tuple) -> list[int] | None:
        """A completed copy of whole lines read off its file's own tokens (where ``lines``
        has them, see :mod:`cad.selector.line_tokens`), else ``None``. Asked after the
        record is resolved: a plain copy copies from the file its section edits."""
        if record[0] == "gen" or record[2] != "lines":
            return None
        _, file, _, (first, last) = record
        source = file or self.resolver.own_file
        found = self.lines[source - 1] if source else None
        return None if found is None else found.copy_tokens(first, last, self.encode)

    def _take_completed(self) -> list[int]:
        """Resolve what the matcher completed since the last call; a copy's text becomes its
        echo tokens."""
        echo: list[int] = []
        count = self.matcher.record_count
        if count > self._records:
            self.op_start = len(self.matcher.text)
        for position in range(self._records, count):
            record = self.matcher.record(position)
            text = self._resolve_record(position)
            self._records = position + 1
            if text is None:
                continue
            self.stats.ops += 1
            generated = record[0] == "gen"
            ids = None if generated else self._known_echo(record)
            echo.extend(self._count_op(text, generated=generated, ids=ids))
        self._record(echo, decided=False)
        return echo

    def op_prefix(self) -> bytes:
        """The text of the op or tag in progress so far, from its ``<`` (the line breaks
        between ops left out)."""
        return self.matcher.text[self.op_start :].lstrip(b"\r\n")

    @property
    def program(self) -> MultiProgram:
        """The program decoded so far (all of it once :attr:`finished`)."""
        return self.matcher.program

    def changes(self) -> dict[str, str | None]:
        """Once finished: the new text of every file the program writes by path (``None``
        for a deleted file)."""
        if not self.finished:
            raise RuntimeError("the program is not finished")
        if not self.resolver.sections and not self.resolver.is_open and self.program.is_bare:
            self.resolver.open(EditFile(1))
            self._bare = True
        if self._bare and self.resolver.is_open:
            self.resolver.close()
        return self.resolver.changes


def follow_multi_program(
    index: ProgramTokenIndex,
    encode: Callable[[str], list[int]],
    workspace: Workspace,
    program: MultiProgram,
    *,
    editable: Collection[int] | None = None,
    subline: bool = False,
    lines: Sequence[LineTokens | None] | None = None,
) -> MultiProgramTape:
    """The tape the decoder produces when it follows ``program`` (forced-program mode),
    built without a model: what multi-file training examples are made of. ``lines``, one
    per file, as :class:`MultiProgramTape` takes them."""
    subline = subline or any(
        isinstance(op, CopySpan) or (isinstance(op, CopyFrom) and isinstance(op.copy, CopySpan))
        for section in program.sections
        if not isinstance(section, DeleteFile)
        for op in section.ops
        if not isinstance(op, Gen)
    )
    tape = MultiProgramTape(
        index, encode, workspace, editable=editable, subline=subline, lines=lines
    )
    target = format_multi(program).encode("utf-8")
    tape.take_forced()
    while not tape.finished:
        tape.decide(tape.target_token(target))
        tape.take_forced()
    return tape
