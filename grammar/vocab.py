"""The byte string behind every token id of a Hugging Face tokenizer, shared by all engines."""

from __future__ import annotations

import hashlib
import re
import weakref
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from cad.grammar import _native

_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_NOT_A_BYTE = 0x100


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-to-printable-unicode table used by byte-level BPE."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes, strict=True)}


@lru_cache(maxsize=1)
def _byte_translation() -> dict[int, int]:
    """``str.translate`` table from byte-level BPE characters to the bytes they stand for;
    characters below 256 that are not part of the alphabet become a code point above 255, so
    that encoding the result as latin-1 fails exactly where the alphabet is not followed."""
    table = {ord(char): byte for char, byte in _byte_decoder().items()}
    for code in range(256):
        table.setdefault(code, _NOT_A_BYTE)
    return table


def _is_byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None)
    return decoder is not None and type(decoder).__name__ == "ByteLevel"


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """``token_bytes[i]`` is what token ``i`` adds to the text; ``None`` for special tokens
    and unused ids, which never appear inside a program or a grammar's language."""

    token_bytes: tuple[bytes | None, ...]
    eos_token_id: int | None

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> Vocabulary:
        """:meth:`from_tokenizer`, built once per tokenizer object and size, then shared."""
        per_tokenizer = _VOCABULARIES.setdefault(tokenizer, {})
        if vocab_size not in per_tokenizer:
            per_tokenizer[vocab_size] = cls.from_tokenizer(tokenizer, vocab_size)
        return per_tokenizer[vocab_size]

    @property
    def size(self) -> int:
        """Vocabulary size, padded ids included (the width of every mask)."""
        return len(self.token_bytes)

    @cached_property
    def ids_by_bytes(self) -> dict[bytes, int]:
        """The token id for each byte string (the lowest id where several share one)."""
        table: dict[bytes, int] = {}
        for index, data in enumerate(self.token_bytes):
            if data:
                table.setdefault(data, index)
        return table

    @cached_property
    def longest_token(self) -> int:
        """Length in bytes of the longest token."""
        return max((len(data) for data in self.token_bytes if data), default=0)

    @cached_property
    def _packed(self) -> tuple[bytes, bytes]:
        """Every token's bytes concatenated, and the ``size + 1`` uint32 offsets into them."""
        lengths = np.fromiter((len(data or b"") for data in self.token_bytes), np.uint32)
        offsets = np.zeros(len(lengths) + 1, dtype=np.uint32)
        np.cumsum(lengths, out=offsets[1:])
        return b"".join(data for data in self.token_bytes if data), offsets.tobytes()

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of every token's bytes and the end-of-sequence id: the key of tables
        derived from this vocabulary, such as the on-disk program token index."""
        data, offsets = self._packed
        digest = hashlib.sha256(f"{self.size}:{self.eos_token_id}:".encode())
        digest.update(offsets)
        digest.update(data)
        return digest.hexdigest()

    @cached_property
    def native_table(self) -> _native.TokenTable:
        """The token bytes as the native core's table (built once)."""
        data, offsets = self._packed
        eos = -1 if self.eos_token_id is None else self.eos_token_id
        return _native.TokenTable(data, offsets, eos)

    @cached_property
    def native_trie(self) -> _native.TokenTrie:
        """The vocabulary's token trie in the native core (built once, shared by every
        grammar over this vocabulary)."""
        return _native.TokenTrie(self.native_table)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> Vocabulary:
        """Read every token's bytes from a Hugging Face (fast) tokenizer.

        ``vocab_size`` pads to the model's embedding size, which is often larger than the
        tokenizer's; padded ids map to ``None``."""
        vocab: dict[str, int] = tokenizer.get_vocab()
        size = max(vocab_size or 0, max(vocab.values()) + 1)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        special.update(i for i, tok in added.items() if getattr(tok, "special", False))
        table: list[bytes | None] = [None] * size
        byte_level = _is_byte_level(tokenizer)
        translation = _byte_translation()
        for piece, index in vocab.items():
            if index in special:
                continue
            if index in added:
                table[index] = piece.encode("utf-8")
            elif byte_level:
                try:
                    table[index] = piece.translate(translation).encode("latin-1")
                except UnicodeEncodeError:
                    table[index] = piece.encode("utf-8")
            else:
                fallback = _BYTE_FALLBACK.fullmatch(piece)
                if fallback:
                    table[index] = bytes([int(fallback.group(1), 16)])
                else:
                    table[index] = piece.replace("\u2581", " ").encode("utf-8")
        return cls(tuple(table), getattr(tokenizer, "eos_token_id", None))


_VOCABULARIES: weakref.WeakKeyDictionary[Any, dict[int | None, Vocabulary]] = (
    weakref.WeakKeyDictionary()
)
