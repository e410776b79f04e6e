"""Baselines in the same harness, same model, same forced target: whole-file regeneration,
one token per forward (AR), and prompt-lookup decoding (PLD), whose drafts are n-grams from
the prompt verified in one forward. With the target forced all three produce the same bytes,
so their costs compare fairly even with random weights."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from cad.resolver import Document
from cad.selector import kv
from cad.selector.loading import LoadedModel
from cad.selector.prompt import rewrite_prompt
from cad.selector.stats import DecodeResult, DecodeStats
from cad.selector.timing import PhaseClock


def _start(
    loaded: LoadedModel, document: str, instruction: str, target: str, mode: str
) -> tuple[list[int], list[int], DecodeStats, Any, PhaseClock]:
    """The prompt, the target's tokens, the stats, the cache after the prompt's forward and
    the phase clock (its forwards timed from here)."""
    tokenizer = loaded.tokenizer
    prompt = rewrite_prompt(tokenizer, Document(document), instruction)
    target_ids = tokenizer.encode(target, add_special_tokens=False)
    stats = DecodeStats(mode=mode, prefill_tokens=len(prompt))
    cache = kv.new_cache(loaded.model)
    clock = PhaseClock(loaded, stats)
    kv.prefill(loaded.model, cache, prompt, loaded.device)
    clock.forward(prefill=True)
    return prompt, target_ids, stats, cache, clock


def regenerate(loaded: LoadedModel, document: str, instruction: str, target: str) -> DecodeResult:
    """AR regeneration of the whole ``target`` file: one forward per output token."""
    start = time.perf_counter()
    _, target_ids, stats, cache, clock = _start(loaded, document, instruction, target, "ar")
    for token in target_ids:
        kv.decode_one(loaded.model, cache, token, loaded.device)
        stats.forwards += 1
    stats.generated_tokens = len(target_ids)
    clock.forward()
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(None, _text(loaded, target_ids), stats)


class NgramIndex:
    """Earliest start of every 1..``max_ngram``-gram in a growing token sequence."""

    def __init__(self, max_ngram: int) -> None:
        self.max_ngram = max_ngram
        self.sequence: list[int] = []
        self.starts: dict[tuple[int, ...], list[int]] = defaultdict(list)

    def extend(self, tokens: list[int]) -> None:
        """Append tokens and index the n-grams that now end inside the sequence."""
        for token in tokens:
            self.sequence.append(token)
            end = len(self.sequence)
            for n in range(1, self.max_ngram + 1):
                if end - n >= 0:
                    self.starts[tuple(self.sequence[end - n : end])].append(end - n)

    def draft(self, num_tokens: int) -> list[int]:
        """Tokens that followed the earliest earlier occurrence of the longest matching
        suffix n-gram, as transformers' prompt lookup proposes them."""
        length = len(self.sequence)
        for n in range(min(self.max_ngram, length), 0, -1):
            for start in self.starts.get(tuple(self.sequence[length - n :]), []):
                follow = start + n
                if follow < length:
                    return self.sequence[follow : min(follow + num_tokens, length)]
        return []


def prompt_lookup_steps(
    prompt: list[int], target_ids: list[int], num_draft: int, max_ngram: int
) -> Iterator[tuple[int, list[int], int]]:
    """Prompt-lookup decoding of ``target_ids`` after ``prompt``, one forward per step:
    ``(the next target token, the draft verified after it, how many drafted tokens equal the
    target)``. Acceptance needs no logits when the target is forced."""
    index = NgramIndex(max_ngram)
    index.extend(prompt)
    position = 0
    while position < len(target_ids):
        token = target_ids[position]
        index.extend([token])
        draft = index.draft(num_draft)
        expected = target_ids[position + 1 : position + 1 + len(draft)]
        accepted = 0
        while accepted < len(expected) and draft[accepted] == expected[accepted]:
            accepted += 1
        index.extend(draft[:accepted])
        yield token, draft, accepted
        position += 1 + accepted


def prompt_lookup(
    loaded: LoadedModel,
    document: str,
    instruction: str,
    target: str,
    *,
    num_draft: int = 10,
    max_ngram: int = 3,
) -> DecodeResult:
    """Prompt-lookup decoding with an oracle target: each forward verifies the next target
    token plus a draft; the accepted draft prefix is exactly the part equal to the target."""
    start = time.perf_counter()
    prompt, target_ids, stats, cache, clock = _start(loaded, document, instruction, target, "pld")
    for token, draft, accepted in prompt_lookup_steps(prompt, target_ids, num_draft, max_ngram):
        kept = kv.cache_length(cache) + 1
        kv.verify(loaded.model, cache, [token, *draft], loaded.device)
        kv.truncate(cache, kept + accepted)
        stats.forwards += 1
        stats.drafted_tokens += len(draft)
        stats.copied_tokens += accepted
    stats.generated_tokens = len(target_ids) - stats.copied_tokens
    clock.forward()
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(None, _text(loaded, target_ids), stats)


def _text(loaded: LoadedModel, token_ids: list[int]) -> str:
    return loaded.tokenizer.decode(token_ids, clean_up_tokenization_spaces=False)
