"""The token-level program FSM: only canonical programs valid for *this* document get through.

The automaton runs over bytes (tokens are byte strings and may split UTF-8 characters).
Its states follow the program's structure:

* ``await``: between ops, matching one of the op openers (``<copy lines="``, ``<copy span="``,
  ``<gen>``, ``</program>``) byte by byte;
* ``num``: reading a line or column number, constrained to the document (``1 <= i <= j <= n``,
  columns within their line), followed by its delimiter;
* ``lit``: a fixed literal that must follow (``"/>`` and the newline that ends an op);
* ``gen``: a gen body — any valid UTF-8 that ends only through ``</gen>``;
* ``end``: after ``</program>``; only the end-of-sequence token may follow.

A token may not run past the newline that ends an op: the decoder appends the copied text
right there, so every op ends on a token boundary.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grammar.vocab import Vocabulary
from resolver import CopyLines, CopySpan, Gen, Op, unescape_gen_text

COPY_LINES = b'<copy lines="'
COPY_SPAN = b'<copy span="'
GEN_OPEN = b"<gen>"
GEN_CLOSE = b"</gen>"
PROGRAM_END = b"</program>"
COPY_TAIL = b'"/>\n'
DIGITS = frozenset(b"0123456789")

_SMALLEST_CONTINUATION = {
    1: b"\x80", 2: b"\x80\x80", 3: b"\x80\x80\x80", 4: b"\xa0\x80",
    5: b"\x80\x80", 6: b"\x90\x80\x80", 7: b"\x80\x80\x80",
}  # fmt: skip

State = tuple[Any, ...]
AWAIT: State = ("await", b"")
END: State = ("end",)


def utf8_step(pending: int, byte: int) -> int | None:
    """One step of a UTF-8 validator: ``pending`` encodes what the next byte must be
    (0: a character start; 1-3: that many continuation bytes; 4-7: the restricted second
    bytes after E0, ED, F0, F4). Returns the next state, or None for invalid UTF-8."""
    if pending == 0:
        if byte < 0x80:
            return 0
        if 0xC2 <= byte <= 0xDF:
            return 1
        if byte == 0xE0:
            return 4
        if byte == 0xED:
            return 5
        if 0xE1 <= byte <= 0xEF:
            return 2
        if byte == 0xF0:
            return 6
        if 0xF1 <= byte <= 0xF3:
            return 3
        if byte == 0xF4:
            return 7
        return None
    low, high, then = {
        1: (0x80, 0xBF, 0),
        2: (0x80, 0xBF, 1),
        3: (0x80, 0xBF, 2),
        4: (0xA0, 0xBF, 1),
        5: (0x80, 0x9F, 1),
        6: (0x90, 0xBF, 2),
        7: (0x80, 0x8F, 2),
    }[pending]
    return then if low <= byte <= high else None


def number_prefix_ok(digits: bytes, low: int, high: int) -> bool:
    """Whether ``digits`` (no leading zero) starts some number in ``[low, high]``."""
    if not digits or digits[0] == ord("0") or low > high:
        return False
    value = int(digits)
    for extra in range(len(str(high)) - len(digits) + 1):
        scale = 10**extra
        if value * scale <= high and (value + 1) * scale - 1 >= low:
            return True
    return False


@dataclass(eq=False)
class ProgramTokenIndex:
    """Per-tokenizer tables shared by every program matcher: token bytes, tokens grouped by
    first byte, and the document-independent gen-body masks (computed once, then cached)."""

    vocabulary: Vocabulary
    by_first_byte: list[list[int]] = field(default_factory=list)
    gen_masks: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    plain_tokens: torch.Tensor | None = None
    other_tokens: list[int] = field(default_factory=list)

    @property
    def vocab_size(self) -> int:
        """Width of every mask."""
        return self.vocabulary.size

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> ProgramTokenIndex:
        """The index for ``tokenizer`` padded to ``vocab_size``; built once, then cached."""
        per_tokenizer = _INDEXES.setdefault(tokenizer, {})
        if vocab_size not in per_tokenizer:
            per_tokenizer[vocab_size] = cls.build(Vocabulary.from_tokenizer(tokenizer, vocab_size))
        return per_tokenizer[vocab_size]

    @classmethod
    def build(cls, vocabulary: Vocabulary) -> ProgramTokenIndex:
        """Group tokens by first byte and mark the tokens a gen body always accepts: no ``<``
        and complete UTF-8 on their own."""
        by_first: list[list[int]] = [[] for _ in range(256)]
        plain: list[int] = []
        other: list[int] = []
        for token, data in enumerate(vocabulary.token_bytes):
            if not data:
                continue
            by_first[data[0]].append(token)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                other.append(token)
                continue
            (other if b"<" in data else plain).append(token)
        plain_mask = torch.zeros(vocabulary.size, dtype=torch.bool)
        plain_mask[plain] = True
        return cls(vocabulary, by_first, {}, plain_mask, other)


_INDEXES: weakref.WeakKeyDictionary[Any, dict[int | None, ProgramTokenIndex]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class _Snapshot:
    state: State
    text_length: int
    op_count: int
    gen_start: int


class ProgramMatcher:
    """The program FSM as a :class:`grammar.Matcher` for one document.

    ``line_widths[k]`` is the number of characters of line k+1, terminator included; with
    ``subline=True`` the ``<copy span="L:C-L:C"/>`` form is allowed too.
    """

    def __init__(
        self, index: ProgramTokenIndex, line_widths: Sequence[int], *, subline: bool = False
    ) -> None:
        self.index = index
        self.vocab_size = index.vocab_size
        self.widths = list(line_widths)
        self.n_lines = len(self.widths)
        openers: dict[bytes, State] = {GEN_OPEN: ("gen", 0, 0), PROGRAM_END: END}
        if self.n_lines:
            openers[COPY_LINES] = ("num", "lines", (), b"")
            if subline:
                openers[COPY_SPAN] = ("num", "span", (), b"")
        self.openers = openers
        self._state: State = AWAIT
        self._text = bytearray()
        self._ops: list[Op] = []
        self._gen_start = 0
        self._history: list[_Snapshot] = []
        self._masks: dict[State, torch.Tensor] = {}

    # -- the automaton -------------------------------------------------------------------

    def _bounds(self, kind: str, values: tuple[int, ...]) -> tuple[int, int]:
        n = self.n_lines
        if kind == "lines":
            return (1, n) if not values else (values[0], n)
        field_index = len(values)
        if field_index == 0:
            return 1, n
        if field_index == 1:
            return 1, self.widths[values[0] - 1]
        if field_index == 2:
            return values[0], n
        low = values[1] if values[2] == values[0] else 1
        return low, self.widths[values[2] - 1]

    def _finish_number(self, kind: str, values: tuple[int, ...], byte: int) -> State | None:
        expected = self._delimiter(kind, len(values) - 1)
        if byte != expected:
            return None
        if expected != COPY_TAIL[0]:
            return ("num", kind, values, b"")
        op: Op = CopyLines(*values) if kind == "lines" else CopySpan(*values)
        return ("lit", COPY_TAIL[1:], op)

    def step(self, state: State, byte: int) -> tuple[State, bool] | None:
        """The state after ``byte`` and whether an op ended there, or None if not allowed."""
        mode = state[0]
        if mode == "gen":
            _, pending, matched = state
            after = utf8_step(pending, byte)
            if after is None:
                return None
            if byte == GEN_CLOSE[matched]:
                if matched + 1 == len(GEN_CLOSE):
                    return ("lit", b"\n", "gen"), False
                return ("gen", after, matched + 1), False
            return ("gen", after, 1 if byte == GEN_CLOSE[0] else 0), False
        if mode == "num":
            _, kind, values, digits = state
            low, high = self._bounds(kind, values)
            if byte in DIGITS:
                grown = digits + bytes([byte])
                return (
                    (("num", kind, values, grown), False)
                    if number_prefix_ok(grown, low, high)
                    else None
                )
            if not digits or not low <= int(digits) <= high:
                return None
            finished = self._finish_number(kind, (*values, int(digits)), byte)
            return (finished, False) if finished is not None else None
        if mode == "lit":
            _, remaining, then = state
            if byte != remaining[0]:
                return None
            if len(remaining) > 1:
                return ("lit", remaining[1:], then), False
            return AWAIT, True
        if mode == "await":
            grown = state[1] + bytes([byte])
            if grown in self.openers:
                return self.openers[grown], False
            if any(opener.startswith(grown) for opener in self.openers):
                return ("await", grown), False
            return None
        return None

    def _walk(self, state: State, data: bytes, *, cross_ops: bool) -> State | None:
        for position, byte in enumerate(data):
            stepped = self.step(state, byte)
            if stepped is None:
                return None
            state, op_ended = stepped
            if op_ended and not cross_ops and position + 1 < len(data):
                return None
        return state

    # -- Matcher ---------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the token is not allowed here."""
        if not 0 <= token_id < self.vocab_size:
            return False
        if self._state == END and token_id == self.index.vocabulary.eos_token_id:
            self._history.append(_Snapshot(END, len(self._text), len(self._ops), self._gen_start))
            return True
        data = self.index.vocabulary.token_bytes[token_id]
        if not data:
            return False
        return self._advance(data, cross_ops=False)

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (forced literals, completions); one entry for ``rollback``."""
        return bool(data) and self._advance(data, cross_ops=True)

    def _advance(self, data: bytes, *, cross_ops: bool) -> bool:
        if self._walk(self._state, data, cross_ops=cross_ops) is None:
            return False
        self._history.append(
            _Snapshot(self._state, len(self._text), len(self._ops), self._gen_start)
        )
        for byte in data:
            before = self._state
            self._state, op_ended = self.step(before, byte)  # type: ignore[misc]
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

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (or byte strings)."""
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
        """Vocabulary-sized bool mask of the tokens allowed next (a cached tensor: read only)."""
        state = self._state
        if state[0] == "gen":
            return self._gen_mask(state[1], state[2])
        if state not in self._masks:
            self._masks[state] = self._walked_mask(state)
        return self._masks[state]

    def _walked_mask(self, state: State) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        if state == END:
            eos = self.index.vocabulary.eos_token_id
            if eos is not None and eos < self.vocab_size:
                mask[eos] = True
            return mask
        token_bytes = self.index.vocabulary.token_bytes
        allowed = [
            token
            for byte in range(256)
            if self.step(state, byte) is not None
            for token in self.index.by_first_byte[byte]
            if self._walk(state, token_bytes[token], cross_ops=False) is not None  # type: ignore[arg-type]
        ]
        if allowed:
            mask[allowed] = True
        return mask

    def _gen_mask(self, pending: int, matched: int) -> torch.Tensor:
        """Gen-body masks depend only on (pending UTF-8 state, matched part of ``</gen>``),
        so they are computed once per tokenizer: plain tokens are allowed wholesale, and only
        tokens that touch ``<``, the closing literal or a split character are walked."""
        key = (pending, matched)
        cached = self.index.gen_masks.get(key)
        if cached is not None:
            return cached
        state: State = ("gen", pending, matched)
        token_bytes = self.index.vocabulary.token_bytes
        if pending == 0:
            assert self.index.plain_tokens is not None
            mask = self.index.plain_tokens.clone()
            suspects = list(self.index.other_tokens)
            if matched:
                closing = self.index.by_first_byte[GEN_CLOSE[matched]]
                mask[closing] = False
                suspects.extend(closing)
        else:
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            suspects = [
                token for byte in range(0x80, 0xC0) for token in self.index.by_first_byte[byte]
            ]
        walked = [
            t for t in suspects if self._walk(state, token_bytes[t], cross_ops=False) is not None
        ]  # type: ignore[arg-type]
        if walked:
            mask[walked] = True
        self.index.gen_masks[key] = mask
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

    def _next_bytes(self, state: State) -> list[int]:
        return [byte for byte in range(256) if self.step(state, byte) is not None]

    def forced_bytes(self) -> bytes:
        """The bytes every continuation must start with, up to the end of the current op:
        structural literals the decoder feeds without asking the model."""
        state = self._state
        forced = bytearray()
        while state[0] != "gen":
            options = self._next_bytes(state)
            if len(options) != 1:
                break
            forced.append(options[0])
            state, op_ended = self.step(state, options[0])  # type: ignore[misc]
            if op_ended:
                break
        return bytes(forced)

    def completion_bytes(self) -> bytes:
        """Short bytes that end the program validly from here (used when a budget is spent):
        finish the character, number or literal in progress with the smallest valid choice,
        close the op, then ``</program>``."""
        state = self._state
        completion = bytearray()
        while state != END:
            chunk = self._completion_chunk(state)
            for byte in chunk:
                state = self.step(state, byte)[0]  # type: ignore[index]
            completion.extend(chunk)
        return bytes(completion)

    def _completion_chunk(self, state: State) -> bytes:
        mode = state[0]
        if mode == "gen":
            _, pending, matched = state
            if pending:
                return _SMALLEST_CONTINUATION[pending]
            return GEN_CLOSE[matched:]
        if mode == "num":
            _, kind, values, digits = state
            low, high = self._bounds(kind, values)
            if digits and low <= int(digits) <= high:
                return bytes([self._delimiter(kind, len(values))])
            if not digits:
                return str(low).encode()
            value = int(digits)
            for extra in range(len(str(high)) - len(digits) + 1):
                smallest = max(low, value * 10**extra)
                if smallest <= min(high, (value + 1) * 10**extra - 1):
                    return str(smallest).encode()[len(digits) :]
            raise RuntimeError("unreachable: a live number state always has a completion")
        if mode == "lit":
            return state[1]
        prefix = state[1]
        if PROGRAM_END.startswith(prefix):
            return PROGRAM_END[len(prefix) :]
        return next(o for o in self.openers if o.startswith(prefix))[len(prefix) :]

    @staticmethod
    def _delimiter(kind: str, field_index: int) -> int:
        delimiters = b"-" if kind == "lines" else b":-:"
        return delimiters[field_index] if field_index < len(delimiters) else COPY_TAIL[0]
