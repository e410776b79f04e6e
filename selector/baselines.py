"""Baselines in the same harness, same model, same forced target: whole-file regeneration,
one token per forward (AR), and prompt-lookup decoding (PLD), whose drafts are n-grams from
the prompt verified in one forward. With the target forced all three produce the same bytes,
so their costs compare fairly even with random weights."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from cad.grammar import _native
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
    the phase clock (its forwards timed from here; tokenizing is setup)."""
    tokenizer = loaded.tokenizer
    stats = DecodeStats(mode=mode)
    clock = PhaseClock(loaded, stats)
    prompt = rewrite_prompt(tokenizer, Document(document), instruction)
    target_ids = tokenizer.encode(target, add_special_tokens=False)
    stats.prefill_tokens = len(prompt)
    cache = kv.new_cache(loaded.model)
    clock.setup()
    kv.prefill(loaded.model, cache, prompt, loaded.device)
    clock.forward(prefill=True)
    return prompt, target_ids, stats, cache, clock


def regenerate(loaded: LoadedModel, document: str, instruction: str, target: str) -> DecodeResult:
    """AR regeneration of the whole ``target`` file: one forward per output token (its
    logits projected with the forward, the greedy choice timed as the choices)."""
    start = time.perf_counter()
    _, target_ids, stats, cache, clock = _start(loaded, document, instruction, target, "ar")
    clock.next_forward()
    for token in target_ids:
        logits = kv.decode_one(loaded.model, cache, token, loaded.device)
        clock.forward()
        int(logits.argmax())
        clock.choose()
        stats.forwards += 1
        clock.host("bookkeeping")
        clock.next_forward()
    stats.generated_tokens = len(target_ids)
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(None, _text(loaded, target_ids), stats)


class NgramIndex:
    """Earliest start of every 1..``max_ngram``-gram in a growing token sequence, in native
    code (:class:`cad.grammar._native.PromptLookup`): appending a token indexes the n-grams
    ending at it, a draft is one lookup per n."""

    def __init__(self, max_ngram: int) -> None:
        self.max_ngram = max_ngram
        self.native = _native.PromptLookup(max_ngram)

    def extend(self, tokens: list[int]) -> None:
        """Append tokens and index the n-grams that now end inside the sequence."""
        if tokens:
            self.native.extend(tokens)

    def draft(self, num_tokens: int) -> list[int]:
        """Tokens that followed the earliest earlier occurrence of the longest matching
        suffix n-gram, as transformers' prompt lookup proposes them. Cost: one hash lookup
        per n and the copy of the draft; about 10 µs a step with :meth:`extend` (2-core
        x86-64 CPU)."""
        return self.native.draft(num_tokens)


def prompt_lookup_steps(
    prompt: list[int], target_ids: list[int], num_draft: int, max_ngram: int
) -> Iterator[tuple[int, list[int], int]]:
    """Prompt-lookup decoding of ``target_ids`` after ``prompt``, one forward per step:
    ``(the next target token, the draft verified after it, how many drafted tokens equal the
    target)``, computed from the target alone."""
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
    token plus a draft; the accepted draft prefix is exactly the part equal to the target.
    The drafting runs in native code, so its host cost per forward compares fairly with
    rewrite mode's (``host_per_forward_s``). Each forward projects the logits of every
    position it feeds (timed with the forward) and makes the greedy choices up to the first
    refused draft token (timed as the choices), as prompt lookup does unforced, before the
    target replaces them."""
    start = time.perf_counter()
    prompt, target_ids, stats, cache, clock = _start(loaded, document, instruction, target, "pld")
    steps = prompt_lookup_steps(prompt, target_ids, num_draft, max_ngram)
    clock.host("draft")
    clock.next_forward()
    for token, draft, accepted in steps:
        clock.host("draft")
        kept = kv.cache_length(cache) + 1
        logits = kv.verify(loaded.model, cache, [token, *draft], loaded.device)
        clock.forward()
        logits[: accepted + 1].argmax(dim=-1).tolist()
        clock.choose()
        kv.truncate(cache, kept + accepted)
        stats.forwards += 1
        stats.drafted_tokens += len(draft)
        stats.copied_tokens += accepted
        clock.host("bookkeeping")
        clock.next_forward()
    stats.generated_tokens = len(target_ids) - stats.copied_tokens
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(None, _text(loaded, target_ids), stats)


def _text(loaded: LoadedModel, token_ids: list[int]) -> str:
    return loaded.tokenizer.decode(token_ids, clean_up_tokenization_spaces=False)
