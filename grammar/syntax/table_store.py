"""The built Python syntax tables as data: a versioned binary layout read back with every
field checked, so a cache file can only ever be loaded as tables or refused.

Layout (little-endian): the magic ``CADSYNTX``, a format version (u32) and an array count
(u32), then per array its name (u16 length, UTF-8), its element type (u8: 1 for int32, 2 for
bytes) and its element count (u64), followed by the elements; last, the SHA-256 of all that.
Strings are stored as one byte array of UTF-8 text and one int32 array of offsets. Nothing in
the file is executed or used to pick code: :func:`decode` checks the header and the digest,
that every length fits in what is left of the file, that exactly the expected arrays are
present, and every value's range (LR states, actions, gotos, automaton transitions and
labels) and the token names the layout layer reads before anything is built from them; any
mismatch raises :class:`StoreError`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from itertools import pairwise

import numpy as np

from cad.grammar.syntax.lalr import ACCEPT, END, Tables
from cad.grammar.syntax.lexer_dfa import Dfa

MAGIC = b"CADSYNTX"
FORMAT_VERSION = 1
_INT32 = 1
_BYTES = 2
_ITEM_SIZE = {_INT32: 4, _BYTES: 1}
_MAX_PRODUCTION = 1 << 10
"""Longest right-hand side accepted on load (the grammar's longest is far shorter)."""
_MAX_TOKENS = 192
"""Most grammar tokens accepted on load (the native core's limit; Python has about 100)."""
_DIGEST = 32
_LAYOUT_TOKENS = ("NEWLINE", "INDENT", "DEDENT", "ENDMARKER")
"""Tokens the layout layer emits itself, so every table has them."""


class StoreError(ValueError):
    """The data is not a table store this version writes (damaged, truncated, foreign)."""


def encode(tables: Tables, automata: Mapping[str, Dfa]) -> bytes:
    """The tables and the lexer automata (by name) as one byte string."""
    arrays: dict[str, np.ndarray] = {}
    state_offsets, tokens, action_offsets, actions = [0], [], [0], []
    for row in tables.actions:
        for token in sorted(row):
            tokens.append(token)
            actions.extend(row[token])
            action_offsets.append(len(actions))
        state_offsets.append(len(tokens))
    arrays["actions.state_offsets"] = _int32(state_offsets)
    arrays["actions.tokens"] = _int32(tokens)
    arrays["actions.offsets"] = _int32(action_offsets)
    arrays["actions.values"] = _int32(actions)
    goto_offsets, symbols, targets = [0], [], []
    for row in tables.gotos:
        for symbol in sorted(row):
            symbols.append(symbol)
            targets.append(row[symbol])
        goto_offsets.append(len(symbols))
    arrays["gotos.offsets"] = _int32(goto_offsets)
    arrays["gotos.symbols"] = _int32(symbols)
    arrays["gotos.targets"] = _int32(targets)
    arrays["productions.lhs"] = _int32(tables.production_lhs)
    arrays["productions.length"] = _int32(tables.production_length)
    arrays["conflicts"] = _int32([tables.conflicts])
    _put_strings(arrays, "tokens", tables.tokens)
    _put_strings(arrays, "nonterminals", tables.nonterminals)
    for name, dfa in automata.items():
        arrays[f"dfa.{name}.transitions"] = np.ascontiguousarray(dfa.transitions, dtype="<i4")
        arrays[f"dfa.{name}.accept"] = np.ascontiguousarray(dfa.accept, dtype="<i4")
        _put_strings(arrays, f"dfa.{name}.labels", dfa.labels)
    parts = [MAGIC, struct.pack("<II", FORMAT_VERSION, len(arrays))]
    for name, array in arrays.items():
        label = name.encode()
        kind = _BYTES if array.dtype == np.uint8 else _INT32
        parts.append(struct.pack("<H", len(label)) + label + struct.pack("<BQ", kind, array.size))
        parts.append(array.tobytes())
    payload = b"".join(parts)
    return payload + hashlib.sha256(payload).digest()


def decode(data: bytes, automaton_names: Iterable[str]) -> tuple[Tables, dict[str, Dfa]]:
    """The tables and automata stored in ``data``, which must hold exactly the automata
    ``automaton_names``; raises :class:`StoreError` for anything else."""
    arrays = _read_arrays(data)
    tables = _tables(arrays)
    automata = {name: _dfa(arrays, f"dfa.{name}") for name in automaton_names}
    expected = {name for name in arrays if not name.startswith("dfa.")} | {
        f"dfa.{name}.{part}"
        for name in automata
        for part in ("transitions", "accept", "labels.text", "labels.offsets")
    }
    if set(arrays) != expected:
        raise StoreError("unexpected arrays")
    return tables, automata


def _int32(values: Iterable[int]) -> np.ndarray:
    return np.array(list(values), dtype="<i4")


def _put_strings(arrays: dict[str, np.ndarray], name: str, values: Iterable[str]) -> None:
    encoded = [value.encode() for value in values]
    arrays[f"{name}.text"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    arrays[f"{name}.offsets"] = _int32(np.cumsum([0, *map(len, encoded)]).tolist())


def _read_arrays(data: bytes) -> dict[str, np.ndarray]:
    header = len(MAGIC) + 8
    if len(data) < header + _DIGEST or data[: len(MAGIC)] != MAGIC:
        raise StoreError("not a table store")
    version, count = struct.unpack_from("<II", data, len(MAGIC))
    if version != FORMAT_VERSION:
        raise StoreError(f"format version {version}, expected {FORMAT_VERSION}")
    view = memoryview(data)[: len(data) - _DIGEST]
    if hashlib.sha256(view).digest() != data[len(data) - _DIGEST :]:
        raise StoreError("digest mismatch")
    arrays: dict[str, np.ndarray] = {}
    position = header
    for _ in range(count):
        if position + 2 > len(view):
            raise StoreError("truncated")
        (length,) = struct.unpack_from("<H", view, position)
        position += 2
        if position + length + 9 > len(view):
            raise StoreError("truncated")
        try:
            name = bytes(view[position : position + length]).decode()
        except UnicodeDecodeError:
            raise StoreError("bad array name") from None
        kind, size = struct.unpack_from("<BQ", view, position + length)
        position += length + 9
        if kind not in _ITEM_SIZE or name in arrays:
            raise StoreError(f"bad array {name!r}")
        end = position + size * _ITEM_SIZE[kind]
        if end > len(view):
            raise StoreError("truncated")
        stored, native = (np.uint8, np.uint8) if kind == _BYTES else ("<i4", np.int32)
        arrays[name] = np.frombuffer(view[position:end], dtype=stored).astype(native)
        position = end
    if position != len(view):
        raise StoreError("trailing data")
    return arrays


def _get(arrays: Mapping[str, np.ndarray], name: str, dtype: type = np.int32) -> np.ndarray:
    array = arrays.get(name)
    if array is None or array.dtype != dtype or array.ndim != 1:
        raise StoreError(f"missing or mistyped array {name!r}")
    return array


def _offsets(arrays: Mapping[str, np.ndarray], name: str, rows: int, total: int) -> list[int]:
    """Row offsets into an array of ``total`` entries: ``rows + 1`` values from 0 to
    ``total``, never decreasing."""
    offsets = _get(arrays, name)
    if (
        offsets.size != rows + 1
        or offsets[0] != 0
        or offsets[-1] != total
        or (np.diff(offsets) < 0).any()
    ):
        raise StoreError(f"bad offsets {name!r}")
    return offsets.tolist()


def _in_range(values: np.ndarray, low: int, high: int, name: str) -> None:
    if values.size and (values.min() < low or values.max() >= high):
        raise StoreError(f"{name} out of range")


def _strings(arrays: Mapping[str, np.ndarray], name: str) -> tuple[str, ...]:
    text = _get(arrays, f"{name}.text", np.uint8)
    offsets = _get(arrays, f"{name}.offsets")
    if offsets.size < 1:
        raise StoreError(f"bad offsets {name!r}")
    bounds = _offsets(arrays, f"{name}.offsets", offsets.size - 1, text.size)
    raw = text.tobytes()
    try:
        return tuple(raw[a:b].decode() for a, b in pairwise(bounds))
    except UnicodeDecodeError:
        raise StoreError(f"bad text {name!r}") from None


def _tables(arrays: Mapping[str, np.ndarray]) -> Tables:
    tokens = _strings(arrays, "tokens")
    nonterminals = _strings(arrays, "nonterminals")
    if (
        not tokens
        or len(tokens) > _MAX_TOKENS
        or tokens[-1] != END
        or len(set(tokens)) != len(tokens)
        or not set(_LAYOUT_TOKENS) <= set(tokens)
    ):
        raise StoreError("bad token names")
    if len(set(nonterminals)) != len(nonterminals):
        raise StoreError("bad nonterminal names")
    lhs = _get(arrays, "productions.lhs")
    length = _get(arrays, "productions.length")
    if lhs.size != length.size:
        raise StoreError("productions disagree")
    _in_range(lhs, 0, len(nonterminals), "production lhs")
    _in_range(length, 0, _MAX_PRODUCTION, "production length")
    conflicts = _get(arrays, "conflicts")
    if conflicts.size != 1 or conflicts[0] < 0:
        raise StoreError("bad conflict count")
    state_offsets = _get(arrays, "actions.state_offsets")
    states = state_offsets.size - 1
    if states < 1:
        raise StoreError("no LR states")
    cells = _get(arrays, "actions.tokens")
    values = _get(arrays, "actions.values").astype(np.int64)
    rows = _offsets(arrays, "actions.state_offsets", states, cells.size)
    spans = _offsets(arrays, "actions.offsets", cells.size, values.size)
    _in_range(cells, 0, len(tokens), "action token")
    reduce = values < 0
    if ((values >= states) & (values != ACCEPT)).any() or (
        reduce.any() and (-values[reduce] - 1).max() >= lhs.size
    ):
        raise StoreError("action out of range")
    goto_symbols = _get(arrays, "gotos.symbols")
    goto_targets = _get(arrays, "gotos.targets")
    if goto_symbols.size != goto_targets.size:
        raise StoreError("gotos disagree")
    goto_rows = _offsets(arrays, "gotos.offsets", states, goto_symbols.size)
    _in_range(goto_symbols, 0, len(nonterminals), "goto symbol")
    _in_range(goto_targets, 0, states, "goto target")
    token_list, value_list = cells.tolist(), values.tolist()
    actions = []
    for state in range(states):
        row: dict[int, tuple[int, ...]] = {}
        for cell in range(rows[state], rows[state + 1]):
            if token_list[cell] in row or spans[cell] == spans[cell + 1]:
                raise StoreError("bad action row")
            row[token_list[cell]] = tuple(value_list[spans[cell] : spans[cell + 1]])
        actions.append(row)
    symbol_list, target_list = goto_symbols.tolist(), goto_targets.tolist()
    gotos = []
    for state in range(states):
        goto_row = {
            symbol_list[i]: target_list[i] for i in range(goto_rows[state], goto_rows[state + 1])
        }
        if len(goto_row) != goto_rows[state + 1] - goto_rows[state]:
            raise StoreError("bad goto row")
        gotos.append(goto_row)
    return Tables(
        actions=tuple(actions),
        gotos=tuple(gotos),
        production_lhs=tuple(lhs.tolist()),
        production_length=tuple(length.tolist()),
        tokens=tokens,
        nonterminals=nonterminals,
        conflicts=int(conflicts[0]),
    )


def _dfa(arrays: Mapping[str, np.ndarray], prefix: str) -> Dfa:
    labels = _strings(arrays, f"{prefix}.labels")
    accept = _get(arrays, f"{prefix}.accept")
    flat = _get(arrays, f"{prefix}.transitions")
    states = accept.size
    if not labels or not states or flat.size != states * 256:
        raise StoreError(f"bad automaton {prefix!r}")
    _in_range(accept, -1, len(labels), f"{prefix} labels")
    _in_range(flat, -1, states, f"{prefix} transitions")
    return Dfa(flat.reshape(states, 256), accept, labels)
