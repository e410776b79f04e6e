"""States and byte transitions of the canonical program language.

A state is a small tuple, so it can key caches:

* ``("await", prefix)``: between ops, ``prefix`` of one of the op openers (``<copy lines="``,
  ``<copy span="``, ``<gen>``, ``</program>``) read so far;
* ``("num", kind, values, digits)``: reading a number of a ``lines`` or ``span`` copy;
  ``values`` are the numbers already finished, ``digits`` the current one so far;
* ``("lit", remaining, then)``: a fixed literal must follow (``"/>`` and the op's newline);
  ``then`` is the finished copy op, or ``"gen"`` after ``</gen>``;
* ``("gen", pending, matched)``: inside a gen body; ``pending`` is the UTF-8 validator's
  state and ``matched`` how much of ``</gen>`` the body ends with;
* ``("end",)``: after ``</program>``.

The same transitions serve two purposes: with a document's line widths they accept exactly the
canonical programs valid for it; without (``ProgramStructure.shape``) numbers are unbounded,
which gives a document-independent superset used to precompute token masks per tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cad.resolver import CopyLines, CopySpan, Op

COPY_LINES = b'<copy lines="'
COPY_SPAN = b'<copy span="'
GEN_OPEN = b"<gen>"
GEN_CLOSE = b"</gen>"
PROGRAM_END = b"</program>"
COPY_TAIL = b'"/>\n'
DIGITS = b"0123456789"
UNBOUNDED = 10**18

State = tuple[Any, ...]
AWAIT: State = ("await", b"")
END: State = ("end",)

_CONTINUATION = {
    1: (0x80, 0xBF, 0),
    2: (0x80, 0xBF, 1),
    3: (0x80, 0xBF, 2),
    4: (0xA0, 0xBF, 1),
    5: (0x80, 0x9F, 1),
    6: (0x90, 0xBF, 2),
    7: (0x80, 0x8F, 2),
}


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
    low, high, then = _CONTINUATION[pending]
    return then if low <= byte <= high else None


def smallest_continuation(pending: int) -> bytes:
    """The shortest (and smallest) bytes that finish the UTF-8 character in progress."""
    completion = bytearray()
    while pending:
        low, _, pending = _CONTINUATION[pending]
        completion.append(low)
    return bytes(completion)


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


def smallest_number_suffix(digits: bytes, low: int, high: int) -> bytes | None:
    """The fewest (then smallest) digits that turn ``digits`` into a number in
    ``[low, high]``; None if no number there starts with ``digits``."""
    if not digits:
        return str(low).encode() if low <= high else None
    value = int(digits)
    if digits[0] == ord("0") or value > high:
        return None
    if low <= value:
        return b""
    for extra in range(1, len(str(high)) - len(digits) + 1):
        scale = 10**extra
        smallest = max(low, value * scale)
        if smallest <= min(high, (value + 1) * scale - 1):
            return str(smallest).encode()[len(digits) :]
    return None


def abstract_state(state: State) -> State:
    """The state with the document-dependent parts erased: a number state keeps only which
    field it reads and whether a digit was read; every other state is already independent."""
    if state[0] != "num":
        return state
    _, kind, values, digits = state
    return ("num", kind, len(values), bool(digits))


def representative_state(abstract: State) -> State:
    """A concrete state for ``abstract`` (numbers of 1), to walk under unbounded numbers."""
    if abstract[0] != "num":
        return abstract
    _, kind, fields, has_digits = abstract
    return ("num", kind, (1,) * fields, b"1" if has_digits else b"")


class ProgramStructure:
    """Byte transitions of the canonical programs for one document (``widths`` given) or, as
    :meth:`shape`, with unbounded numbers: a superset that does not depend on the document."""

    def __init__(self, widths: Sequence[int] | None, *, subline: bool, copies: bool = True) -> None:
        self.widths = None if widths is None else tuple(widths)
        self.n_lines = UNBOUNDED if self.widths is None else len(self.widths)
        self.subline = subline
        self.copies = copies and self.n_lines > 0
        self.openers: dict[bytes, State] = {GEN_OPEN: ("gen", 0, 0), PROGRAM_END: END}
        if self.copies:
            self.openers[COPY_LINES] = ("num", "lines", (), b"")
            if subline:
                self.openers[COPY_SPAN] = ("num", "span", (), b"")
        self.opener_prefixes = {o[:k] for o in self.openers for k in range(len(o))}

    @classmethod
    def shape(cls, copies: bool, subline: bool) -> ProgramStructure:
        """The document-independent superset with the same openers."""
        return cls(None, subline=subline, copies=copies)

    @property
    def shape_key(self) -> tuple[bool, bool]:
        """What the shape of this structure depends on: whether copies exist, and spans."""
        return self.copies, self.subline

    def bounds(self, kind: str, values: tuple[int, ...]) -> tuple[int, int]:
        """The range of the next number given the ones already read."""
        if self.widths is None:
            return 1, UNBOUNDED
        n = self.n_lines
        if kind == "lines":
            return (values[0], n) if values else (1, n)
        field_index = len(values)
        if field_index == 0:
            return 1, n
        if field_index == 1:
            return 1, self.widths[values[0] - 1]
        if field_index == 2:
            return values[0], n
        low = values[1] if values[2] == values[0] else 1
        return low, self.widths[values[2] - 1]

    @staticmethod
    def delimiter(kind: str, field_index: int) -> int:
        """The byte that ends number ``field_index`` of a ``kind`` copy."""
        delimiters = b"-" if kind == "lines" else b":-:"
        return delimiters[field_index] if field_index < len(delimiters) else COPY_TAIL[0]

    def step(self, state: State, byte: int) -> tuple[State, bool] | None:
        """The state after ``byte`` and whether an op ended there, or None if not allowed."""
        mode = state[0]
        if mode == "gen":
            return self._gen_step(state, byte)
        if mode == "num":
            return self._number_step(state, byte)
        if mode == "lit":
            _, remaining, then = state
            if byte != remaining[0]:
                return None
            if len(remaining) > 1:
                return ("lit", remaining[1:], then), False
            return AWAIT, True
        if mode == "await":
            grown = state[1] + bytes((byte,))
            opened = self.openers.get(grown)
            if opened is not None:
                return opened, False
            return (("await", grown), False) if grown in self.opener_prefixes else None
        return None

    @staticmethod
    def _gen_step(state: State, byte: int) -> tuple[State, bool] | None:
        _, pending, matched = state
        after = utf8_step(pending, byte)
        if after is None:
            return None
        if byte == GEN_CLOSE[matched]:
            if matched + 1 == len(GEN_CLOSE):
                return ("lit", b"\n", "gen"), False
            return ("gen", after, matched + 1), False
        return ("gen", after, 1 if byte == GEN_CLOSE[0] else 0), False

    def _number_step(self, state: State, byte: int) -> tuple[State, bool] | None:
        _, kind, values, digits = state
        low, high = self.bounds(kind, values)
        if byte in DIGITS:
            grown = digits + bytes((byte,))
            return (
                (("num", kind, values, grown), False)
                if number_prefix_ok(grown, low, high)
                else None
            )
        if not digits or not low <= int(digits) <= high:
            return None
        if byte != self.delimiter(kind, len(values)):
            return None
        finished = (*values, int(digits))
        if byte != COPY_TAIL[0]:
            return ("num", kind, finished, b""), False
        return ("lit", COPY_TAIL[1:], copy_op(kind, finished)), False

    def walk(self, state: State, data: bytes, *, cross_ops: bool) -> State | None:
        """The state after ``data``, or None if some byte is not allowed (or, unless
        ``cross_ops``, if bytes follow the newline that ends an op)."""
        last = len(data) - 1
        for position, byte in enumerate(data):
            stepped = self.step(state, byte)
            if stepped is None:
                return None
            state, op_ended = stepped
            if op_ended and not cross_ops and position < last:
                return None
        return state

    def walk_touching_numbers(self, state: State, data: bytes) -> tuple[State | None, bool]:
        """Like :meth:`walk` (ops not crossed), plus whether a byte was read in a number
        state: only then can the outcome depend on the document."""
        touched = False
        last = len(data) - 1
        for position, byte in enumerate(data):
            touched = touched or state[0] == "num"
            stepped = self.step(state, byte)
            if stepped is None:
                return None, touched
            state, op_ended = stepped
            if op_ended and position < last:
                return None, touched
        return state, touched

    def next_bytes(self, state: State) -> list[int]:
        """Every byte allowed next."""
        mode = state[0]
        if mode == "gen":
            return [byte for byte in range(256) if self.step(state, byte) is not None]
        if mode == "await":
            prefix = state[1]
            depth = len(prefix)
            candidates = {o[depth] for o in self.openers if o.startswith(prefix)}
        elif mode == "num":
            candidates = {*DIGITS, self.delimiter(state[1], len(state[2]))}
        elif mode == "lit":
            candidates = {state[1][0]}
        else:
            return []
        return sorted(byte for byte in candidates if self.step(state, byte) is not None)


def copy_op(kind: str, values: tuple[int, ...]) -> Op:
    """The resolver op for a finished copy."""
    return CopyLines(*values) if kind == "lines" else CopySpan(*values)
