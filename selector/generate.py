"""Rewrite-mode generation under any :class:`cad.grammar.Matcher` (a CFG, a JSON schema, ...)."""

from __future__ import annotations

import threading
import time

import torch

from cad.grammar import Matcher, Vocabulary
from cad.resolver import Document
from cad.selector import kv
from cad.selector.errors import Cancelled
from cad.selector.loading import LoadedModel
from cad.selector.prompt import rewrite_prompt
from cad.selector.sampling import Sampling, choose_token
from cad.selector.stats import DecodeResult, DecodeStats


def generate_constrained(
    loaded: LoadedModel,
    document: str,
    instruction: str,
    matcher: Matcher,
    *,
    max_new_tokens: int = 2048,
    sampling: Sampling | None = None,
    cancel: threading.Event | None = None,
) -> DecodeResult:
    """Let the model write the whole new document, every token inside ``matcher``'s language.

    Generation stops when the model picks end-of-sequence (offered only once the matcher
    accepts) or when nothing but end-of-sequence is left; a spent budget marks the result
    ``truncated``."""
    start = time.perf_counter()
    sampling = sampling or Sampling()
    vocabulary = Vocabulary.from_tokenizer(loaded.tokenizer, loaded.vocab_size)
    eos = vocabulary.eos_token_id
    prompt = rewrite_prompt(loaded.tokenizer, Document(document), instruction)
    stats = DecodeStats(mode="grammar", prefill_tokens=len(prompt))
    cache = kv.new_cache(loaded.model)
    generator = torch.Generator().manual_seed(sampling.seed)
    logits = kv.prefill(loaded.model, cache, prompt, loaded.device)
    stats.prefill_s = time.perf_counter() - start
    output = bytearray()
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation cancelled")
        allowed = matcher.allowed_tokens().clone()
        if eos is not None and matcher.is_accepting():
            allowed[eos] = True
        elif eos is not None:
            allowed[eos] = False
        if not bool(allowed.any()):
            break
        if stats.generated_tokens >= max_new_tokens:
            stats.truncated = True
            break
        token = choose_token(logits, allowed, sampling, generator)
        if token == eos:
            break
        if not matcher.accept_token(token):
            raise RuntimeError(f"token {token} was in the mask but the matcher rejected it")
        output.extend(vocabulary.token_bytes[token] or b"")
        stats.generated_tokens += 1
        if matcher.is_accepting() and not bool(matcher.allowed_tokens().any()):
            break
        began = time.perf_counter()
        logits = kv.decode_one(loaded.model, cache, token, loaded.device)
        stats.forwards += 1
        stats.decode_s += time.perf_counter() - began
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(None, output.decode("utf-8", errors="replace"), stats)
