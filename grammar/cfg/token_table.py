"""Every token's bytes in flat numpy arrays, shared by all engines over one vocabulary.

Rows are the tokens that have bytes (special and padded ids have none). ``by_first_byte``
is the byte-indexed table: the rows whose first byte is ``b``, so a mask computation only
ever touches tokens whose first byte the parser accepts."""

from __future__ import annotations

import weakref

import numpy as np

from cad.grammar.vocab import Vocabulary

_TABLES: weakref.WeakKeyDictionary[Vocabulary, TokenTable] = weakref.WeakKeyDictionary()


class TokenTable:
    """Flat byte storage: token ``token_ids[r]`` is ``data[offsets[r] : offsets[r] + lengths[r]]``."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.vocab_size = vocabulary.size
        self.eos_token_id = vocabulary.eos_token_id
        rows = [(i, data) for i, data in enumerate(vocabulary.token_bytes) if data]
        self.token_ids = np.array([i for i, _ in rows], dtype=np.int64)
        self.lengths = np.array([len(data) for _, data in rows], dtype=np.int64)
        self.offsets = np.zeros(len(rows), dtype=np.int64)
        np.cumsum(self.lengths[:-1], out=self.offsets[1:])
        self.data = np.frombuffer(b"".join(data for _, data in rows), dtype=np.uint8)
        first = self.data[self.offsets]
        order = np.argsort(first, kind="stable")
        bounds = np.searchsorted(first[order], np.arange(257))
        self.by_first_byte = [order[bounds[b] : bounds[b + 1]] for b in range(256)]
        self.packed_width = (self.vocab_size + 7) // 8

    @classmethod
    def for_vocabulary(cls, vocabulary: Vocabulary) -> TokenTable:
        """The shared table of a vocabulary (built once per Vocabulary object)."""
        table = _TABLES.get(vocabulary)
        if table is None:
            table = _TABLES[vocabulary] = cls(vocabulary)
        return table

    def pack(self, rows: np.ndarray) -> np.ndarray:
        """A packed little-endian bitset over token ids with the given rows set."""
        bits = np.zeros(self.vocab_size, dtype=bool)
        bits[self.token_ids[rows]] = True
        return np.packbits(bits, bitorder="little")
