"""The program FSM in the native core: the matcher the decoder runs, and its per-tokenizer index.

Same language and interface as the pure-Python reference (:mod:`cad.grammar.program_fsm`,
whose docstring describes the language; tests hold the two equal). The per-tokenizer tables
are built natively from the token trie in tens of milliseconds and kept on disk
(:mod:`cad.grammar.index_cache`), keyed by the vocabulary's fingerprint, so a warm start only
reads them back.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cad.grammar import _native
from cad.grammar.bitmask import NativeMaskFill
from cad.grammar.index_cache import read_cached, write_cached
from cad.grammar.vocab import Vocabulary
from cad.resolver import CopyLines, CopySpan, Gen, Op, unescape_gen_text

__all__ = ["ProgramMatcher", "ProgramTokenIndex", "op_from_record"]

_CACHE_KIND = "program-index"


@dataclass(eq=False)
class ProgramTokenIndex:
    """Per-tokenizer tables shared by every program matcher of that tokenizer."""

    vocabulary: Vocabulary
    native: _native.ProgramIndex
    loaded_from_cache: bool

    @property
    def vocab_size(self) -> int:
        """Width of every mask."""
        return self.vocabulary.size

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> ProgramTokenIndex:
        """The index for ``tokenizer`` padded to ``vocab_size``; built or loaded once, then
        shared."""
        per_tokenizer = _INDEXES.setdefault(tokenizer, {})
        if vocab_size not in per_tokenizer:
            vocabulary = Vocabulary.for_tokenizer(tokenizer, vocab_size)
            per_tokenizer[vocab_size] = cls.for_vocabulary(vocabulary)
        return per_tokenizer[vocab_size]

    @classmethod
    def for_vocabulary(cls, vocabulary: Vocabulary, *, use_cache: bool = True) -> ProgramTokenIndex:
        """Load the index from the on-disk cache, or build it (and store it there)."""
        if use_cache:
            blob = read_cached(_CACHE_KIND, vocabulary.fingerprint)
            if blob is not None:
                try:
                    native = _native.ProgramIndex.load(vocabulary.native_table, blob)
                except ValueError:
                    pass
                else:
                    return cls(vocabulary, native, loaded_from_cache=True)
        native = _native.ProgramIndex.build(vocabulary.native_trie)
        if use_cache:
            write_cached(_CACHE_KIND, vocabulary.fingerprint, native.serialize())
        return cls(vocabulary, native, loaded_from_cache=False)


class ProgramMatcher(NativeMaskFill, _native.ProgramMatcher):
    """The program FSM as a :class:`cad.grammar.Matcher` for one document.

    ``line_widths[k]`` is the number of characters of line k+1, terminator included (each at
    least 1); with ``subline=True`` the ``<copy span="L:C-L:C"/>`` form is allowed too.
    ``accept_token``, ``accept_bytes``, ``is_accepting``, ``forced_bytes`` (the structural
    literals every continuation starts with, up to the end of the op: the decoder feeds them
    without asking the model), ``completion_bytes`` (the shortest valid ending) and ``text``
    run natively."""

    def __init__(
        self, index: ProgramTokenIndex, line_widths: Sequence[int], *, subline: bool = False
    ) -> None:
        if any(width < 1 for width in line_widths):
            raise ValueError("every line has at least one character")
        super().__init__(index.native, list(line_widths), subline)
        self.index = index
        self._ops: list[Op] = []

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` ``accept_token``/``accept_bytes`` calls that succeeded."""
        if k < 0:
            raise ValueError(f"cannot roll back {k} steps")
        super().rollback(k)
        del self._ops[self.op_count :]

    @property
    def ops(self) -> tuple[Op, ...]:
        """The ops completed so far (an op completes with its separating newline). Ops the
        native side rolled back on its own (a native tape walking ahead) are dropped."""
        del self._ops[self.op_count :]
        for position in range(len(self._ops), self.op_count):
            self._ops.append(op_from_record(self.op_record(position)))
        return tuple(self._ops)


def op_from_record(record: tuple[Any, ...]) -> Op:
    """The op of a native matcher's ``op_record``."""
    kind, *fields = record
    if kind == "gen":
        return Gen(unescape_gen_text(fields[0].decode("utf-8")))
    return CopyLines(*fields) if kind == "lines" else CopySpan(*fields)


_INDEXES: weakref.WeakKeyDictionary[Any, dict[int | None, ProgramTokenIndex]] = (
    weakref.WeakKeyDictionary()
)
