"""The precompute worker: masks it builds equal masks built on demand, while requests from
several threads run beside it; it stops when its grammar is dropped; its memory is bounded."""

from __future__ import annotations

import gc
import json
import os
import random
import threading
import time

import torch

from cad import grammar
from cad.grammar.cfg import CompiledGrammar, compile
from cad.grammar.cfg.builtin_grammars import AMBIGUOUS_ARITHMETIC
from cad.grammar.cfg.compiled import PRECOMPUTE_MAX_BYTES
from tests.grammar.cfg.oracles import sample_sentence
from tests.grammar.cfg.schema_instances import compact, fixture_schemas, in_schema_order

SCHEMAS = ("BFCL_simple_122", "BFCL_simple_136", "BFCL_simple_267", "JME_18")


def wait_for_worker(compiled: CompiledGrammar) -> None:
    """Return once the grammar's worker has stopped (it always does: it has a bounded set of
    states and a memory budget)."""
    while compiled.mask_stats()["worker_running"]:
        time.sleep(0.001)


def streams(name: str, tokenizer, compiled: CompiledGrammar, count: int) -> list[list[int]]:
    """Token streams of the schema's valid instances (compact and pretty-printed) and of
    sentences sampled from its grammar: their prefixes are the states the masks are asked at."""
    record = dict(fixture_schemas())[name]
    schema = record["schema"]
    texts = []
    for test in record["tests"]:
        if test["valid"]:
            value = in_schema_order(test["data"], schema, schema)
            texts += [compact(value).decode(), json.dumps(value, indent=2)]
    rng = random.Random(name)
    texts += [
        sample_sentence(compiled.grammar, rng, depth_budget=rng.randint(3, 7)).decode()
        for _ in range(count)
    ]
    return [tokenizer.encode(text, add_special_tokens=False) for text in texts]


def masks_along(compiled: CompiledGrammar, ids: list[int]) -> list[torch.Tensor]:
    """The packed mask before each token of ``ids`` and after the last."""
    matcher = compiled.matcher()
    bitmask = grammar.allocate_token_bitmask(1, compiled.vocab_size)
    masks = []
    for token in [*ids, None]:
        matcher.fill_next_token_bitmask(bitmask)
        masks.append(bitmask[0].clone())
        if token is not None and not matcher.accept_token(token):
            break
    return masks


def mismatches_on_threads(
    compiled: CompiledGrammar,
    token_streams: list[list[int]],
    expected: list[list[torch.Tensor]],
    threads: int = 4,
) -> list[tuple[int, int]]:
    """(stream, position) of every mask that differs from ``expected`` when ``threads``
    threads fill masks along the streams at once (a stream that ends early differs at its
    end)."""
    found: list[tuple[int, int]] = []

    def fill(part: int) -> None:
        for index in range(part, len(token_streams), threads):
            masks = masks_along(compiled, token_streams[index])
            if len(masks) != len(expected[index]):
                found.append((index, len(masks)))
            for position, (mask, want) in enumerate(zip(masks, expected[index], strict=False)):
                if not torch.equal(mask, want):
                    found.append((index, position))

    workers = [threading.Thread(target=fill, args=(part,)) for part in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return found


def test_masks_with_the_worker_equal_masks_without_it(qwen2_tokenizer, qwen2_vocab) -> None:
    """Four threads fill masks along many token streams of a grammar whose worker starts at
    compile time, so that requests and the worker build and publish states concurrently; a
    second pass reads what the finished worker built. Every mask equals the one a grammar
    without a worker builds on demand."""
    checked = 0
    for name in SCHEMAS:
        schema = dict(fixture_schemas())[name]["schema"]
        lazy = compile(schema, qwen2_vocab, format="json-schema", precompute=False)
        assert lazy.engine == "dpda"
        token_streams = streams(name, qwen2_tokenizer, lazy, 24)
        expected = [masks_along(lazy, ids) for ids in token_streams]
        eager = compile(schema, qwen2_vocab, format="json-schema")
        for _ in range(2):
            mismatches = mismatches_on_threads(eager, token_streams, expected)
            assert not mismatches, (name, mismatches[:5])
            wait_for_worker(eager)
        checked += sum(len(masks) for masks in expected)
        assert eager.mask_stats()["worker_states"] > 0
        assert lazy.mask_stats()["worker_states"] == 0
        assert lazy.mask_stats()["demand_states"] > 0
    assert checked > 2000


def thread_count() -> int:
    """This process's threads, as the kernel sees them (the worker is not a Python thread)."""
    return len(os.listdir("/proc/self/task"))


def thread_count_once_exited(expected: int) -> int:
    """``thread_count()`` once joined threads have also left the kernel's list: a Python
    thread's ``join`` returns when it has finished running Python, and a native one's when
    the kernel has woken the joiner, each a moment before the thread leaves
    ``/proc/self/task`` (at most five seconds' wait, for a loaded machine)."""
    deadline = time.monotonic() + 5.0
    while (count := thread_count()) != expected and time.monotonic() < deadline:
        time.sleep(0.001)
    return count


def test_dropping_a_grammar_stops_and_joins_its_worker(qwen2_vocab) -> None:
    """A grammar dropped right after compiling (its worker most likely mid-walk), or while a
    matcher of it is filling on another thread, goes away cleanly and leaves no thread: at
    its last reference, without the cycle collector (which stays off here)."""
    schema = dict(fixture_schemas())["BFCL_simple_122"]["schema"]
    compile(schema, qwen2_vocab, format="json-schema")
    gc.collect()
    before = thread_count()
    gc.disable()
    try:
        for round in range(20):
            compiled = compile(schema, qwen2_vocab, format="json-schema")
            if round % 2:
                matcher = compiled.matcher()
                filler = threading.Thread(
                    target=matcher.fill_next_token_bitmask,
                    args=(grammar.allocate_token_bitmask(1, qwen2_vocab.size),),
                )
                filler.start()
                del compiled, matcher
                filler.join()
                assert thread_count_once_exited(before) == before
            else:
                del compiled
                assert thread_count_once_exited(before) == before
    finally:
        gc.enable()


def test_the_worker_stops_at_its_memory_budget(qwen2_tokenizer, qwen2_vocab) -> None:
    """A worker given a small budget holds no more than it and leaves the rest to requests,
    whose masks are still right; the default budget holds a whole schema's masks."""
    schema = dict(fixture_schemas())["BFCL_simple_267"]["schema"]
    whole = compile(schema, qwen2_vocab, format="json-schema")
    wait_for_worker(whole)
    full = whole.mask_stats()
    assert 0 < full["worker_bytes"] <= PRECOMPUTE_MAX_BYTES
    budget = full["worker_bytes"] // 8
    bounded = compile(schema, qwen2_vocab, format="json-schema", precompute=False)
    assert bounded.native.start_precompute(budget)
    assert not bounded.native.start_precompute(budget)
    wait_for_worker(bounded)
    stats = bounded.mask_stats()
    assert 0 < stats["worker_bytes"] <= budget
    assert stats["worker_states"] < full["worker_states"]
    lazy = compile(schema, qwen2_vocab, format="json-schema", precompute=False)
    for ids in streams("BFCL_simple_267", qwen2_tokenizer, lazy, 4):
        for mask, want in zip(masks_along(bounded, ids), masks_along(lazy, ids), strict=True):
            assert torch.equal(mask, want)
    assert bounded.mask_stats()["demand_states"] > 0


def test_the_worker_spends_its_budget_on_masks_not_scratch(qwen2_tokenizer, qwen2_vocab) -> None:
    """On a schema whose masks outgrow the budget, the worker's scratch view (the memo of
    every configuration its walks create) would reach the budget first; it is cleared
    instead, so the worker stops with most of the budget in masks (more nodes than the
    grammar has states), and the masks are still right."""
    name = "JME_40"
    schema = dict(fixture_schemas())[name]["schema"]
    compiled = compile(schema, qwen2_vocab, format="json-schema")
    wait_for_worker(compiled)
    stats = compiled.mask_stats()
    assert PRECOMPUTE_MAX_BYTES // 2 < stats["worker_bytes"] <= PRECOMPUTE_MAX_BYTES
    assert stats["worker_states"] > compiled.lr_states
    reference = compile(schema, qwen2_vocab, format="json-schema", precompute=False)
    for ids in streams(name, qwen2_tokenizer, reference, 4):
        for mask, want in zip(masks_along(compiled, ids), masks_along(reference, ids), strict=True):
            assert torch.equal(mask, want)


def test_earley_grammars_build_on_demand_only(qwen2_vocab) -> None:
    """The Earley engine has no worker: its masks are all built by requests, and counted."""
    compiled = compile(AMBIGUOUS_ARITHMETIC, qwen2_vocab)
    assert compiled.engine == "earley"
    assert not compiled.native.start_precompute(PRECOMPUTE_MAX_BYTES)
    masks_along(compiled, [])
    stats = compiled.mask_stats()
    assert stats["worker_states"] == 0 and not stats["worker_running"]
    assert stats["demand_states"] == 1 and stats["demand_bytes"] > 0
