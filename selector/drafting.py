"""Drafting from the original document: an alignment between the output written so far and the
document's tokens, and the candidate continuations it suggests.

When the model rewrites a file, most of its output is the document again. The drafter keeps
``position``, the document index the next output token is expected to equal, and proposes:

* ``aligned:o`` — the document from ``position + o`` on (``o = 0``: the model keeps copying;
  ``o > 0``: it replaced or dropped ``o`` tokens);
* ``ngram:r`` — the document after the ``r``-th other occurrence of the output's last n-gram
  (longest n first, then nearest to ``position``): re-anchoring after an edit;
* ``output:r`` — the output itself after the ``r``-th most recent earlier occurrence of its
  last n-gram: new text that repeats what was just written;
* ``topk:j`` — the model's ``j``-th choice at the last branching point, followed by the
  document from wherever that choice re-anchors.

Each candidate is tens to hundreds of tokens long (as calibrated per source) and remembers
the document index of every token it took from the document, so accepting it moves the
alignment exactly.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from cad.selector.draft_config import DraftConfig, source_key


@dataclass(frozen=True)
class Candidate:
    """A drafted continuation: its source key, its tokens, and for each token the document
    index it was copied from (``None`` for a token that is not from the document)."""

    key: str
    tokens: tuple[int, ...]
    positions: tuple[int | None, ...]


class Drafter:
    """The alignment between the output and ``document_ids``, and the drafts it suggests.

    ``stop`` (end-of-sequence) is appended after the document, so the end of the file and the
    model's stop token are drafted together. ``copying`` says whether the last token advanced
    the alignment (the model is copying the document) or not (it is writing something new):
    the two states accept drafts at very different rates."""

    def __init__(self, document_ids: list[int], config: DraftConfig, stop: int | None = None):
        self.document = list(document_ids)
        self.source = self.document + ([stop] if stop is not None else [])
        self.config = config
        self.position = 0
        self.copying = True
        self.starts: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for n in range(config.min_ngram, config.max_ngram + 1):
            for start in range(len(self.document) - n + 1):
                self.starts[tuple(self.document[start : start + n])].append(start)
        self.written: dict[tuple[int, ...], list[int]] = defaultdict(list)
        self.indexed = 0

    def advance(self, tokens: list[int], positions: list[int | None]) -> None:
        """Move the alignment past accepted ``tokens``. A token copied from the document puts
        the alignment right after its index; any other token advances it only when it equals
        the expected document token (otherwise it counts as inserted text)."""
        for token, position in zip(tokens, positions, strict=True):
            expected = self.position < len(self.source) and self.source[self.position] == token
            self.copying = position is not None or expected
            if position is not None:
                self.position = position + 1
            elif expected:
                self.position += 1

    def candidates(self, output: list[int], branch: list[int] | None = None) -> list[Candidate]:
        """Drafts to follow ``output`` (which ends with the token about to be verified), best
        source first; ``branch`` holds the model's top choices at the last branching point."""
        found: list[Candidate] = []
        used: set[int] = set()
        for offset in range(self.config.aligned):
            start = self.position + offset
            if start < len(self.source) and start not in used:
                used.add(start)
                found.append(self._copy(source_key("aligned", offset), start))
        for rank, start in enumerate(self._anchors(output, used, self.config.ngram)):
            used.add(start)
            found.append(self._copy(source_key("ngram", rank), start))
        for rank, start in enumerate(self._repeats(output, self.config.output)):
            key = source_key("output", rank)
            tokens = tuple(output[start : start + self.config.length(key)])
            found.append(Candidate(key, tokens, (None,) * len(tokens)))
        for rank, token in enumerate((branch or [])[: self.config.top_k]):
            key = source_key("topk", rank)
            anchors = self._anchors([*output, token], set(), 1)
            start = anchors[0] if anchors else self.position + 1
            copied = self._copy(key, start, self.config.length(key) - 1)
            found.append(Candidate(key, (token, *copied.tokens), (None, *copied.positions)))
        return found

    def _copy(self, key: str, start: int, length: int | None = None) -> Candidate:
        size = self.config.length(key) if length is None else length
        end = min(start + size, len(self.source))
        return Candidate(key, tuple(self.source[start:end]), tuple(range(start, end)))

    def _repeats(self, output: list[int], limit: int) -> list[int]:
        """Up to ``limit`` output indices that follow an earlier occurrence of the output's
        last n-gram: longest n-gram first, then most recent. ``output`` only ever grows, so
        its n-grams are indexed incrementally."""
        if limit <= 0:
            return []
        for end in range(self.indexed + 1, len(output) + 1):
            for n in range(self.config.min_ngram, min(self.config.max_ngram, end) + 1):
                self.written[tuple(output[end - n : end])].append(end - n)
        self.indexed = len(output)
        follows: list[int] = []
        for n in range(self.config.max_ngram, self.config.min_ngram - 1, -1):
            if len(output) < n:
                continue
            for start in reversed(self.written.get(tuple(output[-n:]), [])):
                follow = start + n
                if follow < len(output) and follow not in follows:
                    follows.append(follow)
                    if len(follows) == limit:
                        return follows
        return follows

    def _anchors(self, output: list[int], exclude: set[int], limit: int) -> list[int]:
        """Up to ``limit`` document indices that follow an occurrence of ``output``'s last
        n-gram: longest n-gram first, then nearest to the alignment; ``exclude`` and
        duplicates left out."""
        anchors: list[int] = []
        seen = set(exclude)
        for n in range(self.config.max_ngram, self.config.min_ngram - 1, -1):
            if len(output) < n or len(anchors) >= limit:
                continue
            starts = self.starts.get(tuple(output[-n:]), [])
            for start in _nearest_first(starts, self.position - n):
                follow = start + n
                if follow not in seen and follow < len(self.source):
                    seen.add(follow)
                    anchors.append(follow)
                    if len(anchors) >= limit:
                        break
        return anchors


def _nearest_first(values: list[int], target: int) -> Iterator[int]:
    """The items of the sorted list ``values`` in order of distance to ``target`` (ties: the
    smaller first), found from the middle outwards without sorting."""
    right = bisect.bisect_left(values, target)
    left = right - 1
    while left >= 0 or right < len(values):
        if right >= len(values) or (left >= 0 and target - values[left] <= values[right] - target):
            yield values[left]
            left -= 1
        else:
            yield values[right]
            right += 1
