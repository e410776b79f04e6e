"""The GPU path's logic, checked on a CPU: buckets and attention windows, graphs captured per
shape and replayed from their static inputs (a host stand-in for ``torch.cuda.graph`` that
re-runs what was recorded), choices along a draft path made together, the tape walked ahead
and put back, and the persistent compile cache.

The stand-in replays a forward by calling its recorded body again on the static input the
runtime refreshed, into the output tensor of the first replay: a forward that depended on
anything but its packed integers, or a caller that kept a graph's output without copying
it, gives wrong tokens here as it would on a GPU."""

from __future__ import annotations

import copy
import logging
from collections.abc import Hashable
from dataclasses import replace
from typing import Any

import pytest
import torch

from cad.grammar import ProgramTokenIndex
from cad.grammar.index_cache import cache_path, write_cached
from cad.resolver import Document, format_program, oracle, parse, resolve
from cad.selector import Decoder, Sampling, compile_cache, decoder, kv, tree_verify
from cad.selector.cpu_packing import PACKING_ENV
from cad.selector.graphs import Body
from cad.selector.loading import LoadedModel, use_runtime
from cad.selector.rewrite import speculate
from cad.selector.runtime import (
    BUCKETS,
    MIN_CAPACITY,
    StaticRuntime,
    bucket,
    chunks,
    installed,
    window_size,
)
from cad.selector.sampling import greedy_path
from cad.selector.tape import ProgramTape
from tests.conftest import SMALL_DRAFTS as CONFIG
from tests.selector.test_runtime import MODES, running

INSTRUCTION = "Fix the bug."


class HostGraphs:
    """Stands in for :class:`cad.selector.graphs.CudaGraphs` on a CPU: the first call of a
    key runs the body and records it with a static copy of its input; a replay copies the
    new integers into that input, calls the recorded body on it and writes the result into
    one output tensor per graph, as a replayed CUDA graph does."""

    def __init__(self) -> None:
        self.captured: list[Hashable] = []
        self.replays = 0

    def run(
        self, store: dict[Hashable, Any], key: Hashable, host: torch.Tensor, body: Body
    ) -> tuple[Any, float]:
        entry = store.get(key)
        if entry is None:
            store[key] = [host.clone(), body, None]
            self.captured.append(key)
            return body(host.clone()), 1e-3
        inputs, recorded, output = entry
        inputs.copy_(host)
        fresh = recorded(inputs)
        self.replays += 1
        if fresh is None:
            return None, 0.0
        if output is None:
            output = entry[2] = torch.empty_like(fresh)
        output.copy_(fresh)
        return output, 0.0


def _own_copy(loaded: LoadedModel) -> LoadedModel:
    return replace(loaded, model=copy.deepcopy(loaded.model))


@pytest.fixture(scope="module")
def qwen(tiny_qwen) -> LoadedModel:
    return _own_copy(tiny_qwen)


def _tokens(seed: int, count: int, high: int = 5000) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, (count,), generator=generator).tolist()


@pytest.fixture(autouse=True)
def _padded_forwards(monkeypatch) -> None:
    """Replayed graphs are compared with the eager runtime at the same (padded) widths."""
    monkeypatch.setattr(StaticRuntime, "padded", property(lambda _: True))


def _graph_runtime(loaded: LoadedModel) -> tuple[StaticRuntime, HostGraphs]:
    runtime = StaticRuntime(loaded.model, loaded.device, compile=False)
    stand_in = HostGraphs()
    runtime.graphs = stand_in
    return runtime, stand_in


# -- which path a loaded model decodes through --------------------------------------------------


def test_on_a_cpu_the_default_is_the_packed_runtime_and_compile_installs_the_compiled_one(
    qwen, monkeypatch
) -> None:
    loaded = use_runtime(qwen)
    runtime = installed(loaded.model)
    assert runtime is not None and runtime.parts.packed
    assert loaded.packed and not loaded.graphs and not loaded.compiled
    assert loaded.forward_path == "static runtime, packed weights"
    use_runtime(loaded, graphs=False)
    assert installed(loaded.model) is None and not loaded.packed
    assert loaded.forward_path == "eager forwards"
    use_runtime(loaded, compile=True)
    runtime = installed(loaded.model)
    assert runtime is not None and runtime.compiled and runtime.graphs is None
    assert loaded.compiled and not loaded.graphs and not loaded.packed
    assert loaded.forward_path == "compiled static runtime"
    monkeypatch.setenv(PACKING_ENV, "0")
    use_runtime(loaded)
    assert installed(loaded.model) is None


# -- buckets and windows -----------------------------------------------------------------------


def test_buckets_suit_draft_trees_of_8_to_128_nodes() -> None:
    assert [bucket(n) for n in (1, 2, 8, 9, 16, 17, 33, 64, 65, 97, 128, 129, 512)] == [
        1, 8, 8, 16, 16, 32, 64, 64, 128, 128, 128, 512, 512,
    ]  # fmt: skip
    for size in range(8, 129):
        assert bucket(size) < 2 * size
    for size in range(1, 513):
        assert bucket(size) == min(b for b in BUCKETS if b >= size)
    with pytest.raises(ValueError, match="1 to 512"):
        bucket(513)


@pytest.mark.parametrize("pad_freely", [False, True])
def test_chunks_cover_an_append_with_bounded_padding(pad_freely: bool) -> None:
    for size in [*range(1, 300), 511, 512, 513, 1000, 1500]:
        pieces = chunks(size, pad_freely=pad_freely)
        assert sum(pieces) == size
        assert pieces == sorted(pieces, reverse=True)
        assert all(piece == bucket(piece) for piece in pieces[:-1])
        if pad_freely:
            assert len(pieces) == -(-size // 512)
        else:
            assert all(bucket(p) <= 2 * p or bucket(p) - p <= BUCKETS[1] for p in pieces)


def test_window_is_the_smallest_power_of_two_holding_the_forward() -> None:
    assert window_size(1, 4096) == MIN_CAPACITY
    assert window_size(256, 4096) == 256
    assert window_size(257, 4096) == 512
    assert window_size(1500, 4096) == 2048
    assert window_size(3000, 4096) == 4096
    assert window_size(300, 256 + 256) == 512
    for end in range(1, 5000, 37):
        size = window_size(end, 8192)
        assert end <= size < max(2 * end, MIN_CAPACITY + 1)
    with pytest.raises(ValueError, match="within the cache"):
        window_size(5000, 4096)


def test_windowed_attention_gives_the_logits_of_full_attention(qwen, monkeypatch) -> None:
    """Chains and draft trees after a long prompt in a large cache: attention over the
    window gives the logits (and tokens) of attention over the whole capacity, while it
    reads only the window."""
    windowed = StaticRuntime(qwen.model, qwen.device, compile=False)
    full = StaticRuntime(qwen.model, qwen.device, compile=False)
    seen: dict[str, set[int]] = {"windowed": set(), "full": set()}

    def recording(name: str, forward: Any) -> Any:
        def run(parts, keys, values, *rest):
            seen[name].add(keys[0].shape[2])
            return forward(parts, keys, values, *rest)

        return run

    windowed._forward_last = recording("windowed", windowed._forward_last)
    windowed._forward = recording("windowed", windowed._forward)
    caches = {"windowed": windowed.new_cache(), "full": full.new_cache()}
    prompt = _tokens(1, 300)
    for cache in caches.values():
        cache.runtime.reserve(cache, 2000)
    parents = [-1, 0, 1, 1, 3, 0, 5, 6, 2, 8]
    tree = _tokens(2, len(parents))
    outputs: dict[str, list[torch.Tensor]] = {}
    for name, cache in caches.items():
        if name == "full":
            monkeypatch.setattr("cad.selector.runtime.window_size", lambda end, capacity: capacity)
        logits = [kv.prefill(qwen.model, cache, prompt, qwen.device)]
        logits.append(kv.append(qwen.model, cache, _tokens(3, 9), qwen.device))
        hidden = cache.runtime.verify_tree(cache, tree, parents)
        with torch.inference_mode():
            logits.append(qwen.model.get_output_embeddings()(hidden).float())
        cache.runtime.keep(cache, 309, [0, 1, 3, 4])
        logits.append(kv.append(qwen.model, cache, [77], qwen.device))
        outputs[name] = logits
    assert caches["full"].capacity == caches["windowed"].capacity >= 4096
    assert max(seen["windowed"]) <= 512
    for got, expected in zip(outputs["windowed"], outputs["full"], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        assert got.argmax(dim=-1).tolist() == expected.argmax(dim=-1).tolist()


def test_unpadded_forwards_attend_over_exactly_the_filled_slots(qwen, monkeypatch) -> None:
    """Without graphs or compiling a forward runs at its own width over exactly the slots
    up to its end, and gives the logits of the padded, windowed forwards."""
    outputs: dict[bool, list[torch.Tensor]] = {}
    ends: list[int] = []
    for padded in (True, False):
        monkeypatch.setattr(StaticRuntime, "padded", property(lambda _, p=padded: p))
        runtime = StaticRuntime(qwen.model, qwen.device, compile=False)
        if not padded:

            def recording(forward: Any) -> Any:
                def run(parts, keys, values, tokens, start, *rest):
                    ends.append((keys[0].shape[2], int(start) + tokens.shape[1]))
                    return forward(parts, keys, values, tokens, start, *rest)

                return run

            runtime._forward = recording(runtime._forward)
            runtime._forward_last = recording(runtime._forward_last)
        cache = runtime.new_cache()
        parents = [-1, 0, 1, 1, 3, 0, 5, 6, 2, 8]
        logits = [kv.prefill(qwen.model, cache, _tokens(1, 300), qwen.device)]
        hidden = runtime.verify_tree(cache, _tokens(2, len(parents)), parents)
        with torch.inference_mode():
            logits.append(qwen.model.get_output_embeddings()(hidden).float())
        runtime.keep(cache, 300, [0, 1, 3, 4])
        logits.append(kv.append(qwen.model, cache, _tokens(3, 9), qwen.device))
        outputs[padded] = logits
    assert ends == [(300, 300), (310, 310), (313, 313)]
    for got, expected in zip(outputs[False], outputs[True], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


# -- graphs captured per shape, replayed from their inputs ------------------------------------


@pytest.fixture(scope="module")
def eager_outcomes(qwen) -> dict[str, list[Any]]:
    return {name: run(qwen) for name, run in MODES.items()}


@pytest.mark.parametrize("mode", list(MODES))
def test_replayed_graphs_decode_exactly_as_eager(qwen, eager_outcomes, mode: str) -> None:
    runtime, stand_in = _graph_runtime(qwen)
    with running(runtime, qwen):
        assert MODES[mode](qwen) == eager_outcomes[mode]
    assert stand_in.replays > len(stand_in.captured) > 0
    assert len(set(stand_in.captured)) == len(stand_in.captured)
    assert runtime.capture_s == pytest.approx(1e-3 * len(stand_in.captured))


def _same_cache(a: Any, b: Any) -> None:
    assert a.length == b.length
    for x, y in zip((*a.keys, *a.values), (*b.keys, *b.values), strict=True):
        assert torch.equal(x[:, :, : a.length], y[:, :, : b.length])


def test_graph_caches_equal_eager_after_keep_and_rollback_and_growth(qwen) -> None:
    """Appends, trees, kept paths and truncations replayed from graphs leave the caches the
    eager runtime leaves; growing the cache moves it to new tensors, whose graphs are
    captured afresh, while the old tensors keep theirs in the pool."""
    eager = StaticRuntime(qwen.model, qwen.device, compile=False)
    runtime, stand_in = _graph_runtime(qwen)
    caches = [eager.new_cache(), runtime.new_cache()]
    parents = [-1, 0, 1, 2, 1, 4, 0, 6]
    first_tensors = None
    for step in range(40):
        past = caches[0].length + 1 + step % 9
        tree = _tokens(100 + step, len(parents))
        path = [[0, 1, 2, 3], [0, 1, 4, 5], [0, 6, 7], [0]][step % 4]
        logits = []
        for cache in caches:
            if step == 0:
                kv.prefill(qwen.model, cache, _tokens(0, 90), qwen.device)
            logits.append(kv.append(qwen.model, cache, _tokens(step, 1 + step % 9), qwen.device))
            cache.runtime.verify_tree(cache, tree, parents)
            cache.runtime.keep(cache, past, path)
            if step % 5 == 4:
                kv.truncate(cache, cache.length - 2)
        _same_cache(*caches)
        assert torch.equal(*logits)
        if first_tensors is None:
            first_tensors = caches[1].tensors
    grown = caches[1].tensors
    assert grown is not first_tensors
    assert first_tensors.graphs and grown.graphs
    assert {key[0] for key in grown.graphs} == {"append", "tree", "keep"}
    assert runtime._free[first_tensors.capacity] is first_tensors
    replays = stand_in.replays
    again = runtime.new_cache()
    kv.prefill(qwen.model, again, _tokens(0, 90), qwen.device)
    assert again.tensors is first_tensors
    assert stand_in.replays > replays


def test_graph_outputs_are_copied_before_the_next_replay(qwen) -> None:
    runtime, _ = _graph_runtime(qwen)
    eager = StaticRuntime(qwen.model, qwen.device, compile=False)
    kept, expected = [], []
    for runtime_, out in ((runtime, kept), (eager, expected)):
        cache = runtime_.new_cache()
        for step in range(6):
            out.append(kv.append(qwen.model, cache, _tokens(step, 3), qwen.device))
    for got, want in zip(kept, expected, strict=True):
        torch.testing.assert_close(got, want)


# -- choices along a draft path --------------------------------------------------------------


def test_greedy_path_stops_at_the_first_choice_off_the_draft() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 70, generator=generator)
    best = logits.argmax(dim=-1).tolist()
    assert greedy_path(logits.clone(), None, [*best[:4], -1]) == best
    drafted = [best[0], best[1], (best[2] + 1) % 70, best[3], best[4]]
    assert greedy_path(logits.clone(), None, drafted) == best[:3]
    allowed = torch.zeros(5, 3, dtype=torch.int32)
    allowed[:, 0] = 0b1011
    masked = logits.clone()
    masked[:, 4:] = float("-inf")
    masked[:, 2] = float("-inf")
    choices = masked.argmax(dim=-1).tolist()
    assert greedy_path(logits.clone(), allowed, [*choices[:4], -1]) == choices
    assert all(c in (0, 1, 3) for c in choices)


def _batched(monkeypatch, on: bool) -> None:
    monkeypatch.setattr(decoder, "batched_reads", lambda device: on)
    monkeypatch.setattr(tree_verify, "batched_reads", lambda device: on)


def _program_outcomes(loaded: LoadedModel) -> list[Any]:
    document = "".join(f"x = {i}\n" if i % 3 else f"y{i}\n" for i in range(1, 25))
    before = "def f(a):\n    return a + 1\n\n\nprint(f(2))\n"
    after = "def f(a):\n    return a - 1\n\n\nprint(f(2))\n"
    outcomes: list[Any] = []
    for budget in (40, 6):
        decoder_ = Decoder(loaded, max_new_tokens=40, draft_budget=budget)
        for text in (document, before):
            result = decoder_.edit(text, INSTRUCTION)
            outcomes.append((result.program, result.text, result.stats.forwards))
    forced = Decoder(loaded).edit(before, INSTRUCTION, program=oracle(before, after))
    outcomes.append((forced.text, forced.stats.forwards))
    output, stats = speculate(
        loaded, _tokens(3, 20), _tokens(4, 40), config=CONFIG, max_new_tokens=16
    )
    outcomes.append((output, stats.forwards, stats.copied_tokens))
    return outcomes


def test_choices_along_a_path_equal_choices_node_by_node(qwen, monkeypatch) -> None:
    """Greedy program mode and rewrite mode decide the same tokens, programs and forward
    counts when the choices along each draft path are made together (a GPU's way) as when
    each node is decided as acceptance reaches it (a CPU's)."""
    _batched(monkeypatch, False)
    one_by_one = _program_outcomes(qwen)
    _batched(monkeypatch, True)
    reads: list[int] = []
    walk = decoder.walk_ahead

    def counting(*args: Any) -> Any:
        nodes, expected = walk(*args)
        reads.append(len(nodes))
        return nodes, expected

    monkeypatch.setattr(decoder, "walk_ahead", counting)
    assert _program_outcomes(qwen) == one_by_one
    assert reads and max(reads) > 1


def test_sampled_choices_along_a_path_give_valid_programs(qwen, monkeypatch) -> None:
    _batched(monkeypatch, True)
    document = "".join(f"x = {i}\n" if i % 3 else f"y{i}\n" for i in range(1, 25))
    runs = [
        Decoder(qwen, max_new_tokens=30, sampling=Sampling(0.8, 0.9, seed=seed)).edit(
            document, INSTRUCTION
        )
        for seed in (1, 1, 2)
    ]
    assert runs[0].program == runs[1].program
    for result in runs:
        assert resolve(parse(format_program(result.program)), document) == result.text


def test_the_tape_walked_ahead_is_put_back_exactly(qwen2_tokenizer) -> None:
    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))

    def encode(text: str) -> list[int]:
        return qwen2_tokenizer.encode(text, add_special_tokens=False)

    text = "".join(f"line {i}\n" for i in range(1, 9))
    target = format_program(oracle(text, text.replace("line 4", "row 4"))).encode()
    tape = ProgramTape(index, encode, Document(text))
    tape.take_forced()
    before = (list(tape.tokens), tape.matcher.text, tape.stats.to_dict(), tape.resolver.text)
    allowed = tape.allowed_tokens()
    mark = tape.mark()
    for _ in range(12):
        if tape.finished:
            break
        tape.decide(tape.target_token(target))
        tape.take_forced()
    assert tape.resolver.ops and tape.stats.generated_tokens
    tape.undo(mark)
    after = (list(tape.tokens), tape.matcher.text, tape.stats.to_dict(), tape.resolver.text)
    assert after == before
    assert torch.equal(tape.allowed_tokens(), allowed)
    assert not tape.resolver.ops


# -- the persistent compile cache --------------------------------------------------------------


class FakeArtifacts:
    """``torch.compiler``'s artifact functions, recorded: saving returns fixed bytes,
    loading accepts only those."""

    def __init__(self) -> None:
        self.loaded: list[bytes] = []

    def save(self) -> tuple[bytes, None]:
        return b"artifacts", None

    def load(self, data: bytes) -> object | None:
        self.loaded.append(data)
        return object() if data == b"artifacts" else None


def test_compile_cache_is_rebuilt_when_it_does_not_load(qwen, monkeypatch, caplog) -> None:
    fake = FakeArtifacts()
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", fake.save)
    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", fake.load)
    monkeypatch.setattr(compile_cache, "_LOADED", set())
    key = compile_cache.cache_key(qwen.model, qwen.device, "aot_eager")
    write_cached(compile_cache.KIND, key, b"truncated")
    caplog.set_level(logging.INFO, logger="cad.selector.compile_cache")
    runtime = StaticRuntime(qwen.model, qwen.device, compile=True, backend="aot_eager")
    assert runtime.cache_key == key
    assert fake.loaded == [b"truncated"]
    assert "did not load" in caplog.text
    kv.prefill(qwen.model, runtime.new_cache(), _tokens(9, 20), qwen.device)
    path = cache_path(compile_cache.KIND, key)
    assert path.read_bytes() == b"artifacts"
    assert not list(path.parent.glob("*.tmp"))
    monkeypatch.setattr(compile_cache, "_LOADED", set())
    StaticRuntime(qwen.model, qwen.device, compile=True, backend="aot_eager")
    assert fake.loaded == [b"truncated", b"artifacts"]


def test_compile_cache_key_follows_torch_device_and_model_shape(qwen, tiny_llama) -> None:
    key = compile_cache.cache_key(qwen.model, qwen.device, "inductor")
    assert key == compile_cache.cache_key(copy.deepcopy(qwen.model), qwen.device, "inductor")
    assert key != compile_cache.cache_key(qwen.model, qwen.device, "aot_eager")
    assert key != compile_cache.cache_key(tiny_llama.model, qwen.device, "inductor")
    shape = compile_cache.model_shape(qwen.model)
    assert shape["hidden"] == 64 and shape["type"] == "qwen2"
    assert "cpu" in compile_cache.device_name(qwen.device)
