"""JSON numbers under ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum``
/ ``multipleOf``, as exact character automata.

A constrained number is written in plain decimal notation, ``-?(0|[1-9][0-9]*)(.[0-9]+)?``
(integers without the fraction): an exponent would let one value have unboundedly many
spellings of unbounded length. Within that notation every bound and every decimal
``multipleOf`` is decided exactly, digit by digit, on the value (``2.50`` is a multiple of
``0.5``; ``-0`` is zero)."""

from __future__ import annotations

from collections.abc import Hashable
from decimal import Decimal

from cad.grammar.cfg.char_automata import Dfa, explicit_dfa
from cad.grammar.cfg.errors import GrammarError

_CHARS = "-.0123456789"
_LESS, _EQUAL, _GREATER = -1, 0, 1
MAX_MULTIPLE_STATES = 5000
"""``multipleOf`` p/10^q needs about p*(q+2) states; larger ones are refused."""


def number_syntax_dfa(*, integer: bool) -> Dfa:
    """Plain decimal JSON numbers (``integer``: without a fraction)."""

    def step(state: Hashable, char: str) -> Hashable | None:
        if state == "start" and char == "-":
            return "sign"
        if state in ("start", "sign") and char.isdigit():
            return "zero" if char == "0" else "int"
        if state == "int" and char.isdigit():
            return "int"
        if state in ("zero", "int") and char == "." and not integer:
            return "dot"
        if state in ("dot", "frac") and char.isdigit():
            return "frac"
        return None

    return explicit_dfa("start", _CHARS, step, lambda s: s in ("zero", "int", "frac"))


def bound_dfa(bound: Decimal, wanted: frozenset[int]) -> Dfa:
    """Plain decimal numbers whose value compares to ``bound`` as one of ``wanted``
    (``-1`` less, ``0`` equal, ``1`` greater)."""
    if not bound.is_finite():
        raise GrammarError(f"a numeric bound must be finite, not {bound}")
    digits_int, digits_frac = _split_decimal(abs(bound))

    def step(state: Hashable, char: str) -> Hashable | None:
        assert isinstance(state, tuple)
        phase = state[0]
        if phase == "start":
            if char == "-":
                return ("sign", -1)
            if not char.isdigit():
                return None
            # An unsigned number: its first digit is read as after a sign.
            state, phase = ("sign", 1), "sign"
        if phase == "sign":
            sign = state[1]
            if not char.isdigit():
                return None
            if sign > 0 and bound < 0:
                return ("fixed", _GREATER)
            if sign < 0 and bound > 0:
                return ("fixed", _LESS)
            return _advance_int(("int", sign, 0, _EQUAL), char, digits_int)
        if phase == "fixed":
            return state if char.isdigit() or char == "." else None
        if phase == "int":
            if char == ".":
                return ("frac", state[1], state[2], state[3], 0, _EQUAL)
            return _advance_int(state, char, digits_int) if char.isdigit() else None
        if phase == "frac":
            return _advance_frac(state, char, digits_frac) if char.isdigit() else None
        return None

    def accepts(state: Hashable) -> bool:
        assert isinstance(state, tuple)
        if state[0] == "fixed":
            return state[1] in wanted
        if state[0] not in ("int", "frac"):
            return False
        relation = _final_relation(state, digits_int, digits_frac)
        return (relation * state[1]) in wanted

    return explicit_dfa(("start",), _CHARS, step, accepts)


def _split_decimal(value: Decimal) -> tuple[str, str]:
    text = format(value, "f")
    whole, _, fraction = text.partition(".")
    return whole.lstrip("0") or "0", fraction.rstrip("0")


def _advance_int(state: tuple, char: str, digits: str) -> tuple:
    _, sign, length, relation = state
    if length < len(digits) and relation == _EQUAL:
        relation = (char > digits[length]) - (char < digits[length])
    return ("int", sign, min(length + 1, len(digits) + 1), relation)


def _advance_frac(state: tuple, char: str, digits: str) -> tuple:
    _, sign, length, int_relation, position, relation = state
    if relation == _EQUAL:
        if position < len(digits):
            relation = (char > digits[position]) - (char < digits[position])
        elif char != "0":
            relation = _GREATER
    return ("frac", sign, length, int_relation, min(position + 1, len(digits)), relation)


def _final_relation(state: tuple, digits_int: str, digits_frac: str) -> int:
    """The magnitude's relation to the bound's magnitude (no leading zeros are assumed:
    the syntax automaton is intersected with this one)."""
    length, int_relation = state[2], state[3]
    if length != len(digits_int):
        return _GREATER if length > len(digits_int) else _LESS
    if int_relation != _EQUAL:
        return int_relation
    if state[0] == "int":
        return _LESS if digits_frac else _EQUAL
    position, relation = state[4], state[5]
    if relation == _EQUAL and position < len(digits_frac):
        return _LESS
    return relation


def multiple_dfa(divisor: Decimal) -> Dfa:
    """Plain decimal numbers whose value is an integer multiple of ``divisor`` (> 0)."""
    if not divisor.is_finite() or divisor <= 0:
        raise GrammarError(f"multipleOf must be a positive number, not {divisor}")
    _, digits, exponent = divisor.normalize().as_tuple()
    assert isinstance(exponent, int)
    modulus = int("".join(map(str, digits)))
    scale = max(-exponent, 0)
    if exponent > 0:
        modulus *= 10**exponent
    if modulus * (scale + 2) > MAX_MULTIPLE_STATES:
        raise GrammarError(f"multipleOf {divisor} needs too large an automaton")

    def step(state: Hashable, char: str) -> Hashable | None:
        assert isinstance(state, tuple)
        phase, remainder, position = state
        if phase == "start" and char == "-":
            return ("int", 0, 0)
        if phase in ("start", "int") and char.isdigit():
            return ("int", (remainder * 10 + int(char)) % modulus, 0)
        if phase == "int" and char == ".":
            return ("frac", remainder, 0)
        if phase == "frac" and char.isdigit():
            if position < scale:
                return ("frac", (remainder * 10 + int(char)) % modulus, position + 1)
            return state if char == "0" else None
        return None

    def accepts(state: Hashable) -> bool:
        assert isinstance(state, tuple)
        phase, remainder, position = state
        if phase == "start":
            return False
        return remainder * 10 ** (scale - position) % modulus == 0

    return explicit_dfa(("start", 0, 0), _CHARS, step, accepts)
