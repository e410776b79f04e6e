"""Exact tokens of whole-line copies, read off the document's own tokens.

A decode appends the tokenizer's tokens of every completed copy's text. Tokenizing costs
about 1.5 µs a token on a CPU, most of it the pre-tokenizer's regular expression, so a copy
of 400 tokens costs 0.6 ms of host time in the forward that completes it. The document was
tokenized once already, and for the pre-tokenizer Qwen2 and Llama-3 share (a split on
:data:`LINE_SPLIT_PATTERNS`, then byte-level mapping) its tokens answer exactly.

Why. The tokenizer runs its model on each piece the pattern cuts, alone, so two texts cut
alike tokenize alike. Call a line *solid* when it holds a character that is not white space
(or it is the last line and has no terminator). At the start of a solid line the pattern
always cuts: the piece holding the previous line's terminator ends at the last line break of
its white-space run (or, after punctuation, at the last of its line breaks), because no
alternative of the pattern carries a line break on into spaces followed by a visible
character. A match never looks further ahead than the character after its run, and the one
look-ahead that could tell a following character from the text's end (``\\s+(?!\\S)``) is
never reached for a run holding a line break, which ``\\s*[\\r\\n]+`` takes first. So a stretch
of lines between two solid line starts is cut, and tokenized, as it is inside the document,
and a copy of lines is the document's tokens between its first and last solid line start,
with the lines before and after them (blank ones) tokenized on their own.
``tests/selector/test_line_tokens.py`` checks this against the tokenizer on real files and on
hypothesis-made documents full of blank lines, white space and line-break kinds.

Tokenizers with another pre-tokenizer (DeepSeek-Coder's byte-level pattern joins a line
break to the next line's indentation), a normalizer other than NFC, added tokens that strip
white space or hold line breaks, or documents whose tokens do not spell their bytes, are
tokenized as before.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cad.grammar import ProgramTokenIndex
from cad.resolver import Document
from cad.selector.program_tokens import DocumentTokens

LINE_SPLIT_PATTERNS = frozenset(
    {
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
        "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
        "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }
)
"""The pre-tokenizing patterns (Qwen2's, Llama-3's) whose cuts at solid line starts are
proven above."""

BLANK = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
    "\u180e\u200b\u2060\ufeff"
)
"""Every character Python calls white space, and the invisible ones some Unicode versions
class as white space: taken as white space, which only ever marks fewer lines solid."""


def _pre_tokenizer_cuts_lines(state: dict[str, Any]) -> bool:
    """Whether a pre-tokenizer (its JSON) is a split on a known pattern, then byte-level
    mapping without a pattern of its own."""
    if state.get("type") != "Sequence" or len(state.get("pretokenizers", [])) != 2:
        return False
    split, byte_level = state["pretokenizers"]
    return (
        split.get("type") == "Split"
        and split.get("pattern", {}).get("Regex") in LINE_SPLIT_PATTERNS
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and byte_level.get("type") == "ByteLevel"
        and not byte_level.get("use_regex")
        and not byte_level.get("add_prefix_space")
    )


@lru_cache(maxsize=16)
def splits_at_line_starts(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` (a fast tokenizer of transformers) provably cuts its text at the
    start of every solid line (see the module's docstring), so that copies of lines can be
    read off the document's tokens. ``False`` for anything not recognised."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.pre_tokenizer is None:
        return False
    try:
        pre = json.loads(backend.pre_tokenizer.__getstate__())
        normalizer = backend.normalizer and json.loads(backend.normalizer.__getstate__())
    except (AttributeError, TypeError, ValueError):
        return False
    if normalizer and normalizer.get("type") != "NFC":
        return False
    added = getattr(tokenizer, "added_tokens_decoder", {}).values()
    if any(
        token.lstrip or token.rstrip or token.single_word or any(c in token.content for c in "\r\n")
        for token in added
    ):
        return False
    return _pre_tokenizer_cuts_lines(pre)


def is_solid(line: str) -> bool:
    """Whether ``line`` (with its terminator) holds a character that is not white space, or
    is a document's unterminated last line."""
    return bool(line.strip(BLANK)) or not line.endswith(("\n", "\r"))


@dataclass(frozen=True)
class LineTokens:
    """A document's own tokens by line (``tokens``, see
    :class:`cad.selector.program_tokens.DocumentTokens`) and where the tokenizer cuts: at
    line start ``k`` (the start of line ``k + 1``, ``k = 0 .. n``) where a token starts there
    and the line is solid (always at the document's two ends). ``first_cut[k]`` is the first
    cut ``j >= k``, ``last_cut[k]`` the last ``j <= k``."""

    document: Document
    tokens: DocumentTokens
    first_cut: tuple[int, ...]
    last_cut: tuple[int, ...]

    @classmethod
    def of(
        cls, tokenizer: Any, index: ProgramTokenIndex, document: Document, tokens: DocumentTokens
    ) -> LineTokens | None:
        """The document's ``tokens`` (its whole text tokenized by ``tokenizer``, placed on its
        lines) with the tokenizer's cuts, or ``None`` where copies cannot be read off them:
        the tokenizer is not one that cuts at line starts, or the tokens do not spell the
        document (normalized text, added tokens without bytes)."""
        if not splits_at_line_starts(tokenizer):
            return None
        text = document.text
        normalizer = tokenizer.backend_tokenizer.normalizer
        if normalizer is not None and not unicodedata.is_normalized("NFC", text):
            return None
        token_bytes = index.vocabulary.token_bytes
        try:
            pieces = [token_bytes[t] for t in tokens.ids]
        except IndexError:
            return None
        if None in pieces or b"".join(pieces) != text.encode("utf-8"):
            return None
        lines = document.lines
        if not lines:
            return None
        solid = [True, *map(is_solid, lines[1:]), True]
        cut = [aligned and firm for aligned, firm in zip(tokens.aligned, solid, strict=True)]
        first_cut = list(range(len(cut)))
        for k in range(len(cut) - 2, -1, -1):
            first_cut[k] = k if cut[k] else first_cut[k + 1]
        last_cut = list(range(len(cut)))
        for k in range(1, len(cut)):
            last_cut[k] = k if cut[k] else last_cut[k - 1]
        return cls(document, tokens, tuple(first_cut), tuple(last_cut))

    def copy_tokens(self, first: int, last: int, encode: Callable[[str], list[int]]) -> list[int]:
        """The tokenizer's tokens of lines ``first`` to ``last`` (1-based, inclusive), equal
        to ``encode`` of their text: the document's own tokens between the first and the last
        cut inside the copy, ``encode`` for the (blank) lines outside them."""
        lines = self.document.lines
        head, tail = self.first_cut[first - 1], self.last_cut[last]
        if head >= tail:
            return encode("".join(lines[first - 1 : last]))
        out = encode("".join(lines[first - 1 : head])) if head > first - 1 else []
        counts = self.tokens.line_tokens
        out.extend(self.tokens.ids[counts[head] : counts[tail]])
        if tail < last:
            out.extend(encode("".join(lines[tail:last])))
        return out
