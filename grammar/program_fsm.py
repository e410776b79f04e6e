"""The token-level program FSM in pure Python: the reference implementation.

The decoder runs the native twin (:class:`cad.grammar.ProgramMatcher`); tests hold the two
equal token by token and mask by mask. Only canonical programs valid for *this* document get
through.

The automaton runs over bytes (tokens are byte strings and may split UTF-8 characters); its
states and transitions are in :mod:`cad.grammar.program_states`, the per-tokenizer tables in
:mod:`cad.grammar.program_index`. Between ops it matches an opener, reads line and column
numbers bounded by the document (``1 <= i <= j <= n``, columns within their line, no leading
zeros), forces the literals, takes any valid UTF-8 in a gen body until ``</gen>``, and after
``</program>`` only the end-of-sequence token.

A token may not run past the newline that ends an op: the decoder appends the copied text
right there, so every op ends on a token boundary.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cad.grammar.bitmask import fill_from_allowed
from cad.grammar.program_index import ReferenceProgramIndex
from cad.grammar.program_states import (
    AWAIT,
    COPY_LINES,
    END,
    GEN_CLOSE,
    PROGRAM_END,
    ProgramStructure,
    State,
    abstract_state,
    smallest_continuation,
    smallest_number_suffix,
)
from cad.resolver import Gen, Op, unescape_gen_text

__all__ = ["ReferenceProgramIndex", "ReferenceProgramMatcher"]

_MASK_CACHE_SIZE = 128


@dataclass(frozen=True)
class _Snapshot:
    state: State
    text_length: int
    op_count: int
    gen_start: int


class ReferenceProgramMatcher:
    """The program FSM as a :class:`cad.grammar.Matcher` for one document.

    ``line_widths[k]`` is the number of characters of line k+1, terminator included (each at
    least 1); with ``subline=True`` the ``<copy span="L:C-L:C"/>`` form is allowed too.
    """

    def __init__(
        self, index: ReferenceProgramIndex, line_widths: Sequence[int], *, subline: bool = False
    ) -> None:
        if any(width < 1 for width in line_widths):
            raise ValueError("every line has at least one character")
        self.index = index
        self.vocab_size = index.vocab_size
        self.structure = ProgramStructure(line_widths, subline=subline)
        self._state: State = AWAIT
        self._text = bytearray()
        self._ops: list[Op] = []
        self._gen_start = 0
        self._history: list[_Snapshot] = []
        self._masks: OrderedDict[State, torch.Tensor] = OrderedDict()

    # -- Matcher ---------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the token is not allowed here."""
        if not 0 <= token_id < self.vocab_size:
            return False
        if self._state == END and token_id == self.index.vocabulary.eos_token_id:
            self._history.append(self._snapshot())
            return True
        data = self.index.vocabulary.token_bytes[token_id]
        return bool(data) and self._advance(data, cross_ops=False)  # type: ignore[arg-type]

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (forced literals, completions), which unlike a token may span
        several ops; one entry for ``rollback``. False (and no change) if not allowed."""
        return bool(data) and self._advance(data, cross_ops=True)

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write :meth:`allowed_tokens` into ``bitmask[row]`` (packed, see
        :mod:`cad.grammar.bitmask`)."""
        fill_from_allowed(bitmask, row, self.allowed_tokens())

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` ``accept_token``/``accept_bytes`` calls that succeeded."""
        if k < 0 or k > len(self._history):
            raise ValueError(f"cannot roll back {k} of {len(self._history)} steps")
        for _ in range(k):
            snapshot = self._history.pop()
            self._state = snapshot.state
            del self._text[snapshot.text_length :]
            del self._ops[snapshot.op_count :]
            self._gen_start = snapshot.gen_start

    def is_accepting(self) -> bool:
        """True once ``</program>`` has been accepted."""
        return self._state == END

    def allowed_tokens(self) -> torch.Tensor:
        """Vocabulary-sized bool mask of the tokens allowed next.

        The tensor may be shared with later calls and other matchers: read it, never write it.
        Gen-body and structural states take a precomputed mask; number states add the digit
        tokens in bulk and walk only the few other tokens that read number bytes."""
        state = self._state
        if state[0] == "gen":
            return self.index.gen_masks[(state[1], state[2])]
        cached = self._masks.get(state)
        if cached is not None:
            self._masks.move_to_end(state)
            return cached
        entry = self.index.shape(self.structure, abstract_state(state))
        if state[0] != "num" and not entry.dynamic:
            return entry.static
        mask = entry.static.clone()
        if state[0] == "num":
            _, kind, values, digits = state
            low, high = self.structure.bounds(kind, values)
            self.index.add_digit_tokens(mask, digits, low, high)
        token_bytes = self.index.vocabulary.token_bytes
        walked = [
            token
            for token in entry.dynamic
            if self.structure.walk(state, token_bytes[token], cross_ops=False) is not None  # type: ignore[arg-type]
        ]
        mask[walked] = True
        self._masks[state] = mask
        if len(self._masks) > _MASK_CACHE_SIZE:
            self._masks.popitem(last=False)
        return mask

    # -- what the decoder asks besides the Matcher interface -------------------------------

    @property
    def ops(self) -> tuple[Op, ...]:
        """The ops completed so far (an op completes with its separating newline)."""
        return tuple(self._ops)

    @property
    def text(self) -> bytes:
        """The program bytes accepted so far."""
        return bytes(self._text)

    def forced_bytes(self) -> bytes:
        """The longest bytes every continuation must start with, stopping at the newline that
        ends the current op: structural literals the decoder feeds without asking the model."""
        state = self._state
        forced = bytearray()
        while state[0] != "gen":
            options = self.structure.next_bytes(state)
            if len(options) != 1:
                break
            forced.append(options[0])
            state, op_ended = self.structure.step(state, options[0])  # type: ignore[misc]
            if op_ended:
                break
        return bytes(forced)

    def completion_bytes(self) -> bytes:
        """The shortest bytes that end the program validly from here (used when a budget is
        spent): finish the character, number or literal in progress with the smallest valid
        choice, close the op, then ``</program>``."""
        state = self._state
        completion = bytearray()
        while state != END:
            chunk = self._completion_chunk(state)
            state = self.structure.walk(state, chunk, cross_ops=True)  # type: ignore[assignment]
            completion.extend(chunk)
        return bytes(completion)

    # -- internals -------------------------------------------------------------------------

    def _snapshot(self) -> _Snapshot:
        return _Snapshot(self._state, len(self._text), len(self._ops), self._gen_start)

    def _advance(self, data: bytes, *, cross_ops: bool) -> bool:
        if self.structure.walk(self._state, data, cross_ops=cross_ops) is None:
            return False
        self._history.append(self._snapshot())
        for byte in data:
            before = self._state
            self._state, op_ended = self.structure.step(before, byte)  # type: ignore[misc]
            self._text.append(byte)
            if self._state[0] == "gen" and before[0] == "await":
                self._gen_start = len(self._text)
            if op_ended:
                self._ops.append(self._completed_op(before))
        return True

    def _completed_op(self, last_state: State) -> Op:
        then = last_state[2]
        if then != "gen":
            return then
        body = bytes(self._text[self._gen_start : len(self._text) - len(GEN_CLOSE) - 1])
        return Gen(unescape_gen_text(body.decode("utf-8")))

    def _completion_chunk(self, state: State) -> bytes:
        mode = state[0]
        if mode == "gen":
            _, pending, matched = state
            return smallest_continuation(pending) if pending else GEN_CLOSE[matched:]
        if mode == "num":
            return self._number_completion(state)
        if mode == "lit":
            return state[1]
        prefix = state[1]
        for opener in (PROGRAM_END, COPY_LINES, *self.structure.openers):
            if opener in self.structure.openers and opener.startswith(prefix):
                return opener[len(prefix) :]
        raise ValueError(f"no op starts with {prefix!r}")

    def _number_completion(self, state: State) -> bytes:
        """Finish the number in progress, or write its delimiter once it is complete.

        Numbers are finished with the fewest digits; the one exception is a span's end line
        equal to its start line, where the end column must reach the start column: moving to
        the next line (end column 1) can be shorter."""
        _, kind, values, digits = state
        low, high = self.structure.bounds(kind, values)
        suffix = smallest_number_suffix(digits, low, high)
        if suffix is None:
            raise ValueError(f"number state {state!r} has no completion")
        if kind == "span" and len(values) == 2 and int(digits + suffix) == values[0]:
            later = smallest_number_suffix(digits, values[0] + 1, high)
            if later is not None and len(later) + 1 < len(suffix) + len(str(values[1])):
                suffix = later
        return suffix or bytes((self.structure.delimiter(kind, len(values)),))
