"""Program mode under a syntax constraint: the text an edit program resolves to is always
a prefix of a file of the language, and the program ends only on a whole file.

:class:`SyntaxProgramMatcher` is the program FSM (:class:`cad.grammar.ProgramMatcher`) with
a syntax machine reading the resolved text alongside. The FSM walks every candidate's bytes
natively and reports the resolved text they decide (gen bodies unescaped, copies that end);
only the syntax machine's answers and the bookkeeping around them are Python:

* a copy's start line is admitted only where the copied text, fed from the current parser
  state, keeps it alive (one pass over the candidate lines per state), its end line only up
  to the last line that does (one pass per start); the digit tokens of a line number are
  filtered to those that can still spell an admitted number. Sub-line spans likewise, per
  character;
* a gen body's tokens are masked by the parser (the FSM's gen mask and'ed with the
  language's mask); bytes that may still turn out to be ``</gen>`` or an escaped
  ``<\\/gen>`` are held back until they are decided;
* ``</program>`` only where the text is a whole file (with the text after an edited region);
* between ops a token is allowed only if some op can still follow (a gen always can, a copy
  when some start line is admitted).

Everything is undone with :meth:`rollback`, step for step with the FSM.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from cad.grammar._native import ProgramState
from cad.grammar.bitmask import fill_from_allowed
from cad.grammar.program_matcher import ProgramMatcher, ProgramTokenIndex
from cad.grammar.program_states import (
    COPY_LINES,
    COPY_SPAN,
    GEN_OPEN,
    PROGRAM_END,
    number_prefix_ok,
)
from cad.grammar.syntax.constraint import SyntaxConstraint
from cad.grammar.syntax.machine import DEAD, packed_to_bool
from cad.resolver import CopyLines, CopySpan, Document, op_text

_ESCAPED = re.compile(rb"<\\(\\*)/gen>")
_TRICKY = re.compile(rb"<\\*(?:/|\Z)")
"""Tokens whose text is not their bytes in every context (they may hold, close or escape)."""


def _unescape(body: bytes) -> bytes:
    return _ESCAPED.sub(rb"<\1/gen>", body)


@dataclass(frozen=True)
class _Snapshot:
    syntax: int
    definite: int
    broken: bool


_TRICKY_TOKENS: weakref.WeakKeyDictionary[ProgramTokenIndex, np.ndarray] = (
    weakref.WeakKeyDictionary()
)


_BY_FIRST_BYTE: weakref.WeakKeyDictionary[ProgramTokenIndex, tuple[tuple[int, ...], ...]] = (
    weakref.WeakKeyDictionary()
)


def _by_first_byte(index: ProgramTokenIndex) -> tuple[tuple[int, ...], ...]:
    """The tokens of the vocabulary grouped by their first byte."""
    found = _BY_FIRST_BYTE.get(index)
    if found is None:
        groups: list[list[int]] = [[] for _ in range(256)]
        for token, data in enumerate(index.vocabulary.token_bytes):
            if data:
                groups[data[0]].append(token)
        found = _BY_FIRST_BYTE[index] = tuple(tuple(group) for group in groups)
    return found


def _tricky_tokens(index: ProgramTokenIndex) -> np.ndarray:
    found = _TRICKY_TOKENS.get(index)
    if found is None:
        found = np.array(
            [
                token
                for token, data in enumerate(index.vocabulary.token_bytes)
                if data and b"<" in data and _TRICKY.search(data)
            ],
            dtype=np.int64,
        )
        _TRICKY_TOKENS[index] = found
    return found


class SyntaxProgramMatcher:
    """The program FSM for ``document`` with the resolved text held to ``constraint``'s
    language (same interface as :class:`cad.grammar.ProgramMatcher`)."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        document: Document,
        constraint: SyntaxConstraint,
        *,
        subline: bool = False,
    ) -> None:
        self.index = index
        self.vocab_size = index.vocab_size
        self.document = document
        self.constraint = constraint
        self.machine = constraint.machine
        self.program = ProgramMatcher(
            index, [len(line) for line in document.lines], subline=subline
        )
        self._openers = (GEN_OPEN, PROGRAM_END)
        if document.lines:
            self._openers += (COPY_LINES, COPY_SPAN) if subline else (COPY_LINES,)
        self._line_bytes = [line.encode("utf-8") for line in document.lines]
        self._syntax = constraint.start
        self._definite = 0
        self._broken = False
        self._history: list[_Snapshot] = []
        self._starts: dict[int, frozenset[int]] = {}
        self._ends: dict[tuple[int, int], int] = {}
        self._prefixes: dict[frozenset[int], frozenset[bytes]] = {}
        self._span_starts: dict[int, dict[int, frozenset[int]]] = {}
        self._span_ends: dict[tuple[int, int, int], int] = {}

    # -- Matcher -----------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the program or the syntax forbids
        it."""
        if not 0 <= token_id < self.vocab_size:
            return False
        if self.program.is_accepting():
            if not self.program.accept_token(token_id):
                return False
            self._history.append(self._snapshot())
            return True
        data = self.index.vocabulary.token_bytes[token_id]
        return bool(data) and self._advance(data, cross_ops=False, lenient=False, token=token_id)  # type: ignore[arg-type]

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes that may span ops (forced literals, the completion of a
        spent budget). The program structure is enforced; text that breaks the syntax is
        taken, and from then on :attr:`syntax_ok` is False and the syntax is no longer
        checked (only a truncated edit, which is never written, does that)."""
        return bool(data) and self._advance(data, cross_ops=True, lenient=True, token=-1)

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` successful ``accept_token``/``accept_bytes`` calls."""
        if k < 0 or k > len(self._history):
            raise ValueError(f"cannot roll back {k} of {len(self._history)} steps")
        if not k:
            return
        self.program.rollback(k)
        snapshot = self._history[-k]
        del self._history[-k:]
        self._syntax = snapshot.syntax
        self._definite = snapshot.definite
        self._broken = snapshot.broken

    def is_accepting(self) -> bool:
        """True once ``</program>`` has been accepted."""
        return self.program.is_accepting()

    def allowed_tokens(self) -> torch.Tensor:
        """The tokens that keep the program valid and its text a prefix of a file."""
        allowed = self.program.allowed_tokens()
        mode = self.program.state.mode
        if self._broken or mode == "end":
            return allowed
        if mode == "gen":
            return self._gen_mask(allowed)
        candidates = torch.nonzero(allowed).flatten().tolist()
        result = torch.zeros(self.vocab_size, dtype=torch.bool)
        token_bytes = self.index.vocabulary.token_bytes
        for token in candidates:
            data = token_bytes[token]
            if data and self._advance(data, cross_ops=False, lenient=False):
                result[token] = True
        return result

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write :meth:`allowed_tokens` into ``bitmask[row]``."""
        fill_from_allowed(bitmask, row, self.allowed_tokens())

    # -- what the decoder asks besides the Matcher interface ---------------------------------

    @property
    def ops(self):
        """The ops completed so far."""
        return self.program.ops

    @property
    def text(self) -> bytes:
        """The program bytes accepted so far."""
        return self.program.text

    @property
    def syntax_ok(self) -> bool:
        """Whether the resolved text has been held to the language all along."""
        return not self._broken

    def forced_bytes(self) -> bytes:
        """Structural literals every continuation starts with (see ProgramMatcher)."""
        return self.program.forced_bytes()

    def completion_bytes(self) -> bytes:
        """The shortest bytes that end the program (a spent budget); see accept_bytes."""
        return self.program.completion_bytes()

    # -- stepping ----------------------------------------------------------------------------

    def _snapshot(self) -> _Snapshot:
        return _Snapshot(self._syntax, self._definite, self._broken)

    def _advance(
        self, data: bytes, *, cross_ops: bool, lenient: bool, token: int | None = None
    ) -> bool:
        """Check (and with ``token`` given, take: an id, or -1 for raw bytes) ``data``: the
        program structure (walked natively, which also says what resolved text the bytes
        decide), the text it adds, and that some continuation stays open."""
        probed = self.program.probe(data, cross_ops, self._definite)
        if probed is None:
            return False
        state, pieces, definite, held = probed
        syntax = self._syntax
        broken = self._broken
        for piece in pieces:
            if broken:
                break
            text = piece if isinstance(piece, bytes) else self._copied(piece)
            if not text:
                continue
            following = self.machine.feed(syntax, text)
            if following != DEAD:
                syntax = following
            elif lenient:
                broken = True
            else:
                return False
        if not broken and not self._open(state, syntax, held):
            if not lenient:
                return False
            broken = True
        if token is None:
            return True
        accepted = (
            self.program.accept_bytes(data) if token < 0 else self.program.accept_token(token)
        )
        if not accepted:
            return False
        self._history.append(self._snapshot())
        self._syntax = syntax
        self._definite = definite
        self._broken = broken
        return True

    def _copied(self, copy: tuple[Any, ...]) -> bytes:
        """The text of a copy the native walk reported as ``(kind, *numbers)``."""
        kind, *numbers = copy
        op = CopyLines(*numbers) if kind == "lines" else CopySpan(*numbers)
        return op_text(op, self.document).encode("utf-8")

    def _open(self, state: ProgramState, syntax: int, held: bytes = b"") -> bool:
        """Whether some continuation from the program ``state`` keeps the text a prefix of a
        file (``held``: the undecided end of a gen body)."""
        mode = state.mode
        if mode == "gen":
            return self._held_open(syntax, held)
        if mode == "await":
            prefix = state.prefix
            for opener in self._openers:
                if not opener.startswith(prefix):
                    continue
                if opener == GEN_OPEN:
                    return True
                if opener == PROGRAM_END and self.constraint.complete(syntax):
                    return True
                if opener == COPY_LINES and self._start_lines(syntax):
                    return True
                if opener == COPY_SPAN and self._span_start_map(syntax):
                    return True
            return False
        if mode == "num":
            return self._number_open(syntax, state.kind, state.values, state.digits)
        if mode == "end":
            return self.constraint.complete(syntax)
        return True

    def _held_open(self, syntax: int, held: bytes) -> bool:
        """Whether held gen-body bytes can still be settled: a prefix of ``</gen>`` can always
        close the body; an escape in progress must complete or break into viable text."""
        if b"\\" not in held:
            return True
        slash = held.find(b"/")
        pattern = held + b"/gen>"[len(held) - slash :] if slash >= 0 else held + b"/gen>"
        feed = self.machine.feed
        if feed(syntax, _unescape(pattern)) != DEAD:
            return True
        following = pattern[len(held)]
        alternatives = {b"\\"[0]} if slash < 0 else set()
        for byte in range(1, 256):
            if byte == following or byte in alternatives:
                continue
            if feed(syntax, held + bytes((byte,))) != DEAD:
                return True
        return False

    # -- copies ------------------------------------------------------------------------------

    def _start_lines(self, syntax: int) -> frozenset[int]:
        """Lines a copy may start at: the parser survives the line's text."""
        found = self._starts.get(syntax)
        if found is None:
            feed = self.machine.feed
            found = frozenset(
                number
                for number, line in enumerate(self._line_bytes, 1)
                if feed(syntax, line) != DEAD
            )
            self._starts[syntax] = found
        return found

    def _last_line(self, syntax: int, start: int) -> int:
        """The last line a copy from ``start`` may end at (start - 1 if none)."""
        key = (syntax, start)
        found = self._ends.get(key)
        if found is None:
            state = syntax
            found = start - 1
            for number in range(start, len(self._line_bytes) + 1):
                state = self.machine.feed(state, self._line_bytes[number - 1])
                if state == DEAD:
                    break
                found = number
            self._ends[key] = found
        return found

    def _span_start_map(self, syntax: int) -> dict[int, frozenset[int]]:
        """For each line, the columns a sub-line copy may start at (the character there is
        a viable continuation)."""
        found = self._span_starts.get(syntax)
        if found is None:
            by_char: dict[str, bool] = {}
            found = {}
            for number, line in enumerate(self.document.lines, 1):
                columns = []
                for column, char in enumerate(line, 1):
                    ok = by_char.get(char)
                    if ok is None:
                        ok = by_char[char] = self.machine.feed(syntax, char.encode("utf-8")) != DEAD
                    if ok:
                        columns.append(column)
                if columns:
                    found[number] = frozenset(columns)
            self._span_starts[syntax] = found
        return found

    def _span_last(self, syntax: int, line: int, column: int) -> int:
        """The document offset of the last character a span from (line, column) may end at
        (one before its start if none)."""
        key = (syntax, line, column)
        found = self._span_ends.get(key)
        if found is None:
            text = self.document.text
            start = self.document.offset(line, column)
            state = syntax
            found = start - 1
            for offset in range(start, len(text)):
                state = self.machine.feed(state, text[offset].encode("utf-8"))
                if state == DEAD:
                    break
                found = offset
            self._span_ends[key] = found
        return found

    def _prefix_ok(self, digits: bytes, allowed: frozenset[int]) -> bool:
        if not digits:
            return bool(allowed)
        prefixes = self._prefixes.get(allowed)
        if prefixes is None:
            prefixes = self._prefixes[allowed] = frozenset(
                str(value).encode()[:size]
                for value in allowed
                for size in range(1, len(str(value)) + 1)
            )
        return digits in prefixes

    def _number_open(self, syntax: int, kind: str, values: tuple[int, ...], digits: bytes) -> bool:
        """Whether the number being read can still be an admitted one (given the ones read
        before it, which were admitted)."""
        if kind == "lines":
            if not values:
                return self._prefix_ok(digits, self._start_lines(syntax))
            start = values[0]
            last = self._last_line(syntax, start)
            return last >= start and (not digits or number_prefix_ok(digits, start, last))
        starts = self._span_start_map(syntax)
        field = len(values)
        if field == 0:
            return self._prefix_ok(digits, frozenset(starts))
        if field == 1:
            return self._prefix_ok(digits, starts.get(values[0], frozenset()))
        last_offset = self._span_last(syntax, values[0], values[1])
        if last_offset < self.document.offset(values[0], values[1]):
            return False
        last_line, last_column = self.document.position(last_offset)
        if field == 2:
            return not digits or number_prefix_ok(digits, values[0], last_line)
        end_line = values[2]
        if end_line > last_line:
            return False
        low = values[1] if end_line == values[0] else 1
        high = last_column if end_line == last_line else len(self.document.lines[end_line - 1])
        return low <= high and (not digits or number_prefix_ok(digits, low, high))

    # -- gen bodies --------------------------------------------------------------------------

    def _gen_mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """The FSM's gen mask and'ed with the language's mask at the decided text; tokens
        that may hold, close or escape (and, while bytes are held, every token that would
        continue them) are checked one by one."""
        held = self.program.gen_body[self._definite :]
        state = self._syntax
        if held:
            state = self.machine.feed(state, held)
        result = (
            allowed & packed_to_bool(self.machine.packed(state), self.vocab_size)
            if state != DEAD
            else torch.zeros(self.vocab_size, dtype=torch.bool)
        )
        tricky = _tricky_tokens(self.index)
        candidates = tricky[allowed[tricky].numpy()].tolist() if tricky.size else []
        if held:
            candidates += self._continuing(held, allowed)
        token_bytes = self.index.vocabulary.token_bytes
        for token in set(candidates):
            result[token] = self._advance(token_bytes[token], cross_ops=False, lenient=False)  # type: ignore[arg-type]
        return result

    def _continuing(self, held: bytes, allowed: torch.Tensor) -> list[int]:
        """Allowed tokens whose first byte could continue the held bytes' pattern."""
        following = {b"\\"[0], b"/"[0]} if b"/" not in held else set()
        tail = held[held.find(b"/") :] if b"/" in held else b""
        if tail:
            complete = b"/gen>"
            if complete.startswith(tail) and len(tail) < len(complete):
                following.add(complete[len(tail)])
        by_first = _by_first_byte(self.index)
        return [t for byte in following for t in by_first[byte] if bool(allowed[t])]


def syntax_program_matcher(
    index: ProgramTokenIndex,
    document: Document,
    constraint: SyntaxConstraint | None,
    *,
    subline: bool = False,
) -> ProgramMatcher | SyntaxProgramMatcher:
    """The program matcher for ``document``: held to ``constraint``'s language when given,
    the plain FSM otherwise."""
    if constraint is None:
        return ProgramMatcher(index, [len(line) for line in document.lines], subline=subline)
    return SyntaxProgramMatcher(index, document, constraint, subline=subline)
