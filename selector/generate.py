"""Rewrite-mode generation under any :class:`cad.grammar.Matcher` (a CFG, a JSON schema, ...)."""

from __future__ import annotations

import threading
import time

from cad.grammar import Matcher, Vocabulary
from cad.resolver import Document
from cad.selector import kv
from cad.selector.errors import Cancelled
from cad.selector.loading import LoadedModel
from cad.selector.prompt import rewrite_prompt
from cad.selector.sampling import Sampling, TokenChooser
from cad.selector.stats import DecodeResult, DecodeStats
from cad.selector.timing import PhaseClock


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
    chooser = TokenChooser.for_model(loaded, sampling)
    clock = PhaseClock(loaded, stats)
    clock.setup()
    logits = kv.prefill(loaded.model, cache, prompt, loaded.device)
    clock.forward(prefill=True)
    output = bytearray()
    token: int | None = None
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation cancelled")
        chooser.fill(matcher)
        accepting = matcher.is_accepting()
        if token is not None and accepting and not chooser.any_allowed():
            break
        if eos is not None:
            chooser.set_allowed(eos, accepting)
        if not chooser.any_allowed():
            break
        if stats.generated_tokens >= max_new_tokens:
            stats.truncated = True
            break
        if token is not None:
            clock.host("mask")
            clock.next_forward()
            logits = kv.decode_one(loaded.model, cache, token, loaded.device)
            clock.forward()
            stats.forwards += 1
        clock.host("mask")
        token = chooser.choose(logits)
        clock.choose()
        if token == eos:
            break
        if not matcher.accept_token(token):
            raise RuntimeError(f"token {token} was in the mask but the matcher rejected it")
        output.extend(vocabulary.token_bytes[token] or b"")
        stats.generated_tokens += 1
    clock.host("accept")
    clock.next_forward()
    stats.wall_s = time.perf_counter() - start
    return DecodeResult(None, output.decode("utf-8", errors="replace"), stats)
