"""The program FSM inside the engine: one mirror per edit, masks for a batch of rows.

The front end owns each edit's authoritative tape (decisions, forced literals, copies); the
engine only has to mask the model's next decisions. A :class:`ProgramMirror` follows an edit's
program bytes: it is synchronised from the :class:`~cad.engine.wire.ProgramSpec` at the start of
every chunk, then advanced by the tokens the engine samples inside the chunk. :class:`BatchMasks`
keeps the mirrors of the rows of a batch and writes their masks into one packed bitmask
(``cad.grammar.allocate_token_bitmask`` / ``Matcher.fill_next_token_bitmask`` /
``apply_token_bitmask_inplace``). Nothing here imports vLLM; the logits processor in
:mod:`cad.engine.processor` adapts it to vLLM's batch updates.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from cad.engine.wire import ProgramSpec
from cad.grammar import (
    ProgramMatcher,
    ProgramTokenIndex,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
)

log = logging.getLogger("cad.engine")
_BITS = 32


def target_token(index: ProgramTokenIndex, matcher: ProgramMatcher, target: bytes) -> int | None:
    """The longest allowed token that continues ``target`` from the matcher's position: how
    forced-program mode stands in for the model (as the in-process decoder does). ``None`` when
    no token does."""
    remaining = target[len(matcher.text) :]
    vocabulary = index.vocabulary
    allowed = matcher.allowed_tokens()
    for length in range(min(len(remaining), vocabulary.longest_token), 0, -1):
        token = vocabulary.ids_by_bytes.get(remaining[:length])
        if token is not None and bool(allowed[token]):
            return token
    return None


class ProgramMirror:
    """The program FSM of one edit, as the engine sees it."""

    def __init__(self, index: ProgramTokenIndex, spec: ProgramSpec) -> None:
        self.index = index
        self.edit = spec.edit
        self.key = (spec.line_widths, spec.subline, spec.target)
        self.matcher = ProgramMatcher(index, spec.line_widths, subline=spec.subline)
        self.target = spec.target
        self.broken = False

    def sync(self, spec: ProgramSpec) -> None:
        """Bring the matcher to exactly ``spec.program``: undo what the engine sampled past it
        (a chunk's last token is resampled in the next chunk's forward) and accept the rest."""
        matcher = self.matcher
        while not spec.program.startswith(matcher.text):
            matcher.rollback(1)
        rest = spec.program[len(matcher.text) :]
        if rest and not matcher.accept_bytes(rest):
            raise ValueError(f"edit {spec.edit}: the program FSM rejects the program so far")
        self.broken = False

    def accept(self, token: int) -> None:
        """A token the engine sampled under this mirror's mask."""
        if self.broken:
            return
        if not self.matcher.accept_token(token):
            log.error("edit %s: sampled token %d is outside the program FSM", self.edit, token)
            self.broken = True

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed next tokens into ``bitmask[row]``: the FSM's mask, or in
        forced-program mode the one token that continues the target. A mirror that lost
        track (it never should) allows only end-of-sequence, which ends the chunk."""
        if self.broken or self.matcher.is_accepting():
            _only(bitmask, row, self.index.vocabulary.eos_token_id)
            return
        if self.target is None:
            self.matcher.fill_next_token_bitmask(bitmask, row)
            return
        token = target_token(self.index, self.matcher, self.target)
        if token is None:
            log.error("edit %s: the target program cannot be followed token by token", self.edit)
            self.broken = True
        _only(bitmask, row, token if token is not None else self.index.vocabulary.eos_token_id)


class FixedChoice:
    """A chunk whose one sample the front end has fixed (``ProgramSpec.token``): the row allows
    that token alone; no program FSM is followed or kept."""

    def __init__(self, token: int) -> None:
        self.token = token

    def accept(self, token: int) -> None:
        """Nothing to follow: the front end's tape holds the program."""

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        """Allow the fixed token alone in ``bitmask[row]``."""
        _only(bitmask, row, self.token)


def _only(bitmask: torch.Tensor, row: int, token: int | None) -> None:
    """Allow exactly ``token`` in ``bitmask[row]`` (nothing when ``token`` is ``None``)."""
    bitmask[row].zero_()
    if token is None:
        return
    bit = token % _BITS
    bitmask[row, token // _BITS] = (1 << bit) - (1 << _BITS if bit == _BITS - 1 else 0)


@dataclass
class _Row:
    mirror: ProgramMirror | FixedChoice
    outputs: Sequence[int]
    seen: int = 0

    def catch_up(self) -> None:
        """Accept the tokens sampled for this row since the last step. A ``-1`` is a
        placeholder for a token still on its way (asynchronous scheduling): stop there."""
        outputs = self.outputs
        while self.seen < len(outputs) and outputs[self.seen] >= 0:
            self.mirror.accept(int(outputs[self.seen]))
            self.seen += 1


class BatchMasks:
    """The program rows of a batch and their masks.

    Rows come and go with vLLM's batch updates (``remove``, ``add``, ``move``, in that
    order); a row's mirror outlives it, parked by edit id, so the edit's next chunk continues
    from it instead of replaying the program. At most ``parked`` mirrors are kept."""

    def __init__(
        self,
        index: Callable[[], ProgramTokenIndex],
        max_rows: int,
        *,
        parked: int = 256,
        device: torch.device | str | None = None,
    ) -> None:
        self._index_factory = index
        self._index: ProgramTokenIndex | None = None
        self.max_rows = max_rows
        self.device = device
        self.rows: dict[int, _Row] = {}
        self.parked: OrderedDict[str, ProgramMirror] = OrderedDict()
        self.parked_limit = parked
        self._bitmask: torch.Tensor | None = None

    def prepare(self) -> None:
        """Build the program index now (at engine start) rather than on the first edit."""
        _ = self.index

    @property
    def index(self) -> ProgramTokenIndex:
        """The tokenizer's program index, built on the first program edit."""
        if self._index is None:
            self._index = self._index_factory()
        return self._index

    def remove(self, row: int) -> None:
        """The request at ``row`` left the batch (finished, preempted or between chunks)."""
        entry = self.rows.pop(row, None)
        if entry is not None:
            self._park(entry.mirror)

    def add(self, row: int, spec: ProgramSpec | None, outputs: Sequence[int]) -> None:
        """A request entered the batch at ``row``; ``outputs`` is its live list of sampled
        tokens. Requests without a spec are not program edits and are left alone."""
        self.remove(row)
        if spec is None:
            return
        if spec.token is not None:
            self.rows[row] = _Row(FixedChoice(spec.token), outputs, 0)
            return
        mirror = self.parked.pop(spec.edit, None)
        if mirror is None or mirror.key != (spec.line_widths, spec.subline, spec.target):
            mirror = ProgramMirror(self.index, spec)
        try:
            mirror.sync(spec)
        except ValueError:
            mirror = ProgramMirror(self.index, spec)
            mirror.sync(spec)
        self.rows[row] = _Row(mirror, outputs, 0)

    def move(self, source: int, destination: int, swap: bool) -> None:
        """The request at ``source`` moved to ``destination`` (``swap``: the two traded)."""
        moving = self.rows.pop(source, None)
        other = self.rows.pop(destination, None)
        if moving is not None:
            self.rows[destination] = moving
        if other is not None:
            if swap:
                self.rows[source] = other
            else:
                self._park(other.mirror)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask the logits of every program row in place (other rows are untouched)."""
        if not self.rows:
            return logits
        rows = sorted(row for row in self.rows if row < logits.shape[0])
        if not rows:
            return logits
        bitmask = self._bitmask_for(len(rows), logits.shape[-1])
        for slot, row in enumerate(rows):
            entry = self.rows[row]
            entry.catch_up()
            entry.mirror.fill(bitmask, slot)
        selected = torch.tensor(rows, dtype=torch.long, device=logits.device)
        masked = logits.index_select(0, selected)
        apply_token_bitmask_inplace(masked, bitmask[: len(rows)])
        logits.index_copy_(0, selected, masked)
        return logits

    def _bitmask_for(self, rows: int, vocab: int) -> torch.Tensor:
        bitmask = self._bitmask
        if bitmask is None or bitmask.shape[0] < rows:
            bitmask = allocate_token_bitmask(max(rows, self.max_rows), vocab)
            self._bitmask = bitmask
        return bitmask

    def _park(self, mirror: ProgramMirror | FixedChoice) -> None:
        if not isinstance(mirror, ProgramMirror):
            return
        self.parked[mirror.edit] = mirror
        self.parked.move_to_end(mirror.edit)
        while len(self.parked) > self.parked_limit:
            self.parked.popitem(last=False)
