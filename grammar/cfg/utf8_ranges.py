"""Code point ranges as UTF-8 byte-range sequences, so grammars stay byte-level.

A range of code points becomes a few sequences of byte ranges; every combination of bytes
drawn from one sequence's ranges is a valid encoding of a code point in the range."""

from __future__ import annotations

SURROGATES = (0xD800, 0xDFFF)
_LIMITS = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)

ByteRanges = tuple[tuple[int, int], ...]


def complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The code points (surrogates excluded) not covered by ``ranges``."""
    result: list[tuple[int, int]] = []
    cursor = 0
    for low, high in normalize(ranges):
        if low > cursor:
            result.append((cursor, low - 1))
        cursor = max(cursor, high + 1)
    if cursor <= 0x10FFFF:
        result.append((cursor, 0x10FFFF))
    return tuple(result)


def normalize(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Sorted, merged ranges with surrogate code points removed (they have no UTF-8 form)."""
    merged: list[list[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    result: list[tuple[int, int]] = []
    for low, high in merged:
        if low <= SURROGATES[1] and high >= SURROGATES[0]:
            if low < SURROGATES[0]:
                result.append((low, SURROGATES[0] - 1))
            if high > SURROGATES[1]:
                result.append((SURROGATES[1] + 1, high))
        else:
            result.append((low, high))
    return tuple(result)


def utf8_sequences(ranges: tuple[tuple[int, int], ...]) -> list[ByteRanges]:
    """Byte-range sequences whose union encodes exactly the code points in ``ranges``."""
    out: list[ByteRanges] = []
    for low, high in normalize(ranges):
        _split(low, high, out)
    return out


def _split(low: int, high: int, out: list[ByteRanges]) -> None:
    for limit in _LIMITS[:-1]:
        if low <= limit < high:
            _split(low, limit, out)
            _split(limit + 1, high, out)
            return
    if high <= 0x7F:
        out.append(((low, high),))
        return
    for continuation_count in (1, 2, 3):
        mask = (1 << (6 * continuation_count)) - 1
        if (low & ~mask) != (high & ~mask):
            if (low & mask) != 0:
                _split(low, (low | mask), out)
                _split((low | mask) + 1, high, out)
                return
            if (high & mask) != mask:
                _split(low, (high & ~mask) - 1, out)
                _split(high & ~mask, high, out)
                return
    low_bytes = _encode(low)
    high_bytes = _encode(high)
    out.append(tuple(zip(low_bytes, high_bytes, strict=True)))


def _encode(code_point: int) -> bytes:
    return chr(code_point).encode("utf-8", "surrogatepass")
