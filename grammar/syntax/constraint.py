"""Where an edit sits in its file, for the syntax constraint.

An edit rewrites a region of whole lines (the whole file without a range). The syntax
constraint reads the text before the region first, so the region's text starts from the
parser state the file has there, and it may end only where the text after the region
still completes a whole file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cad.grammar.syntax.machine import (
    DEAD,
    SyntaxMachine,
    SyntaxMatcher,
    hold_states,
    packed_to_bool,
)
from cad.resolver import split_lines


class SyntaxMismatch(ValueError):
    """The file does not parse as the language before the edit (with the line where the
    parser stopped, 1-based, or None when the end of the file came too early)."""

    def __init__(self, language: str, line: int | None, schema: bool = False) -> None:
        where = f"at line {line}" if line is not None else "at the end of the file"
        what = "JSON that follows the schema" if schema else language.capitalize()
        if language == "json" and not schema:
            what = "JSON"
        super().__init__(f"the file does not parse as {what} ({where})")
        self.language = language
        self.line = line


@dataclass
class SyntaxConstraint:
    """A language machine and the region being edited: ``start`` is the machine state after
    the text before the region, ``suffix`` the text after it. The machine's states stay valid
    while the constraint lives (:func:`hold_states`)."""

    machine: SyntaxMachine
    start: int
    suffix: bytes = b""
    _complete: dict[int, bool] = field(default_factory=dict, repr=False)
    _steps: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)
    _suffix_lines: tuple[bytes, ...] = field(default=(), repr=False)
    _from_line: dict[tuple[int, int], bool] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        hold_states(self.machine, self, fresh=self.start == self.machine.initial)
        self._suffix_lines = tuple(self.suffix.splitlines(keepends=True))

    @property
    def language(self) -> str:
        """The language's name (``python``, ``json``)."""
        return self.machine.language

    @classmethod
    def for_region(
        cls, machine: SyntaxMachine, before: str, region: str, after: str = ""
    ) -> SyntaxConstraint:
        """The constraint for editing ``region`` of the file ``before + region + after``;
        raises :class:`SyntaxMismatch` when that file does not parse."""
        constraint = cls(machine, machine.initial, after.encode("utf-8"))
        prefix = before.encode("utf-8")
        state = machine.feed(machine.initial, prefix) if prefix else machine.initial
        schema = getattr(machine, "schema", False)
        if state == DEAD:
            raise SyntaxMismatch(machine.language, _failing_line(machine, before), schema)
        constraint.start = state
        whole = machine.feed(state, region.encode("utf-8")) if region else state
        if whole == DEAD or not constraint.complete(whole):
            raise SyntaxMismatch(
                machine.language, _failing_line(machine, before + region + after), schema
            )
        return constraint

    def complete(self, state: int) -> bool:
        """Whether the region may end at ``state``: the text after it then completes a
        whole file."""
        found = self._complete.get(state)
        if found is None:
            found = self._complete[state] = self._completes_after(state)
        return found

    def _completes_after(self, state: int) -> bool:
        """Whether the text after the region, read from ``state``, ends a whole file. Read
        line by line and remembered per (line, state): the states of different endings of the
        region meet again a few lines into the text after it, so each ending reads only the
        lines until they meet, not the whole text after it."""
        lines = self._suffix_lines
        path: list[tuple[int, int]] = []
        result: bool | None = None
        line = 0
        while line < len(lines):
            known = self._from_line.get((line, state))
            if known is not None:
                result = known
                break
            path.append((line, state))
            state = self.machine.feed(state, lines[line])
            line += 1
            if state == DEAD:
                result = False
                break
        if result is None:
            result = self.machine.is_complete(state)
        for key in path:
            self._from_line[key] = result
        return result

    def token_step(self, state: int, token: int) -> int:
        """The state after ``token`` (memoised); :data:`DEAD` if the region's text cannot go
        on with it. The end-of-sequence token leaves the state as it is where the region may
        end and is :data:`DEAD` elsewhere."""
        key = (state, token)
        found = self._steps.get(key)
        if found is None:
            machine = self.machine
            if token == machine.eos_token_id:
                found = state if self.complete(state) else DEAD
            elif 0 <= token < machine.vocab_size and machine.token_bytes[token]:
                found = machine.feed(state, machine.token_bytes[token])  # type: ignore[arg-type]
            else:
                found = DEAD
            self._steps[key] = found
        return found

    def allowed(self, state: int, stops: frozenset[int] = frozenset()) -> torch.Tensor:
        """The tokens the region's text may go on with from ``state`` (``(vocab,)`` bool);
        the end-of-sequence token and every id in ``stops`` exactly where it may end."""
        bits = self.machine.packed(state)
        allowed = packed_to_bool(bits, self.machine.vocab_size)
        complete = self.complete(state)
        for stop in {*stops, self.machine.eos_token_id}:
            if stop is not None and 0 <= stop < len(allowed):
                allowed[stop] = complete
        return allowed

    def matcher(self) -> RegionMatcher:
        """A matcher for the region's new text (rewrite mode)."""
        return RegionMatcher(self)


class RegionMatcher(SyntaxMatcher):
    """A :class:`SyntaxMatcher` for the text of a region: it starts after the text before
    the region and offers end-of-sequence only where the text after the region completes
    the file."""

    def __init__(self, constraint: SyntaxConstraint) -> None:
        super().__init__(constraint.machine, constraint.start)
        self.constraint = constraint

    def is_accepting(self) -> bool:
        """Whether the region may end here (or the end-of-sequence token is in)."""
        return self.is_finished() or self.constraint.complete(self.state)

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; end-of-sequence only where the region may end."""
        if token_id == self.machine.eos_token_id and not self.is_finished():
            if not self.constraint.complete(self.state):
                return False
            self._finished = True
            self._history.append(self.state)
            return True
        return super().accept_token(token_id)

    def packed(self):
        """Allowed tokens; end-of-sequence set exactly where the region may end."""
        bits = super().packed()
        eos = self.machine.eos_token_id
        if eos is None or self.is_finished():
            return bits
        wanted = self.constraint.complete(self.state)
        if bool(bits[eos >> 3] >> (eos & 7) & 1) != wanted:
            bits = bits.copy()
            bits[eos >> 3] ^= 1 << (eos & 7)
        return bits


def _failing_line(machine: SyntaxMachine, text: str) -> int | None:
    """The 1-based line where the machine stops accepting ``text`` (None: it accepts all of
    it but the file is not complete)."""
    state = machine.initial
    for number, line in enumerate(split_lines(text), 1):
        state = machine.feed(state, line.encode("utf-8"))
        if state == DEAD:
            return number
    return None
