"""The static-cache runtime against transformers' eager forward.

Padded static forwards give the logits and the cache of the dynamic cache; a draft tree
verified in one forward gives each branch's logits; kept paths, truncations and growth leave
exactly the cache of the kept tokens. Then every decoding mode (program, forced program,
rewrite greedy and sampled, the baselines, grammar-constrained generation) produces the same
tokens, programs and forward counts eagerly and compiled.

Compiling with inductor (C++ through g++ on a CPU) costs tens of seconds per graph, so the
broad compiled checks use ``aot_eager`` (dynamo capture and functionalisation, the part that
decides what the graphs compute) and one slow test runs inductor itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
import torch

from cad.grammar import allocate_token_bitmask
from cad.grammar import compile as compile_grammar
from cad.grammar.bitmask import fill_from_allowed
from cad.grammar.index_cache import cache_path
from cad.resolver import format, oracle
from cad.selector import (
    Decoder,
    Sampling,
    compile_cache,
    generate_constrained,
    kv,
    prompt_lookup,
    regenerate,
)
from cad.selector.draft_graph import build_graph, prune
from cad.selector.drafting import Candidate
from cad.selector.loading import LoadedModel
from cad.selector.rewrite import speculate
from cad.selector.runtime import BUCKETS, StaticCache, StaticRuntime, install, uninstall
from cad.selector.sampling import TokenChooser, _kernel, masked_greedy
from cad.selector.static_forward import (
    GROUPED_MATMUL_MAX,
    FusedLayer,
    ModelParts,
    Visibility,
    attend,
    chain_layout,
    tree_layout,
)
from cad.selector.tree_verify import NodeLogits, keep_path, verify_graph
from tests.conftest import SMALL_DRAFTS as CONFIG
from tests.tiny_model import tiny_qwen3

INSTRUCTION = "Fix the bug."


def _own_copy(loaded: LoadedModel) -> LoadedModel:
    """The same weights in a model object of its own, so installing a runtime on it leaves
    the session's shared fixture alone."""
    return replace(loaded, model=copy.deepcopy(loaded.model))


@pytest.fixture(scope="module")
def qwen(tiny_qwen) -> LoadedModel:
    return _own_copy(tiny_qwen)


@pytest.fixture(scope="module")
def llama(tiny_llama) -> LoadedModel:
    return _own_copy(tiny_llama)


@contextmanager
def running(runtime: StaticRuntime | None, loaded: LoadedModel) -> Iterator[None]:
    """Decode ``loaded`` through ``runtime`` (``None``: transformers' eager path)."""
    if runtime is not None:
        runtime.install()
    try:
        yield
    finally:
        uninstall(loaded.model)


def _tokens(seed: int, count: int, low: int = 0, high: int = 5000) -> list[int]:
    return torch.randint(
        low, high, (count,), generator=torch.Generator().manual_seed(seed)
    ).tolist()


def _assert_same_cache(static: StaticCache, dynamic: Any) -> None:
    assert kv.cache_length(static) == kv.cache_length(dynamic)
    length = kv.cache_length(static)
    for layer, keys, values in zip(dynamic.layers, static.keys, static.values, strict=True):
        torch.testing.assert_close(keys[:, :, :length], layer.keys, atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(values[:, :, :length], layer.values, atol=2e-6, rtol=1e-5)


# -- the static forward itself (eager) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        # sizes on and around every bucket, then more than the largest, which grows the cache
        ("qwen", (60, 1, 3, 9, 33, 130, 520, 2)),
        ("llama", (40, 1, 9)),
    ],
)
def test_padded_static_appends_equal_the_dynamic_cache(
    request, name: str, sizes: tuple[int, ...]
) -> None:
    loaded = request.getfixturevalue(name)
    model, device = loaded.model, loaded.device
    runtime = StaticRuntime(model, device, compile=False)
    static, dynamic = runtime.new_cache(), kv.new_cache(model)
    capacities = []
    for step, size in enumerate(sizes):
        tokens = _tokens(step, size)
        expected = kv.append(model, dynamic, tokens, device)
        got = kv.append(model, static, tokens, device)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
        assert int(got.argmax()) == int(expected.argmax())
        capacities.append(static.capacity)
    assert capacities[-1] >= sum(sizes)
    assert (capacities[0] < capacities[-1]) == (sum(sizes) > capacities[0])
    _assert_same_cache(static, dynamic)
    kv.truncate(static, 45)
    kv.truncate(dynamic, 45)
    tokens = _tokens(99, 20)
    torch.testing.assert_close(
        kv.verify(model, static, tokens, device),
        kv.verify(model, dynamic, tokens, device),
        atol=1e-4,
        rtol=1e-4,
    )
    _assert_same_cache(static, dynamic)


def test_fused_layers_hold_the_weights_once_and_leave_the_model_forward_unchanged(qwen) -> None:
    model = copy.deepcopy(qwen.model)
    tokens = torch.tensor([_tokens(3, 30)])
    with torch.inference_mode():
        before = model(tokens).logits
    parameters = sum(p.numel() for p in model.parameters())
    parts = ModelParts.of(model)
    assert parts.fused and all(isinstance(layer, FusedLayer) for layer in parts.layers)
    for module, fused in zip(model.model.layers, parts.layers, strict=True):
        attention = module.self_attn
        storage = fused.qkv.untyped_storage().data_ptr()
        for projection in (attention.q_proj, attention.k_proj, attention.v_proj):
            assert projection.weight.untyped_storage().data_ptr() == storage
        assert module.mlp.up_proj.weight.untyped_storage().data_ptr() == (
            fused.gate_up.untyped_storage().data_ptr()
        )
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert ModelParts.of(model).layers[0] is parts.layers[0]
    with torch.inference_mode():
        torch.testing.assert_close(model(tokens).logits, before, atol=0, rtol=0)


def test_fused_qwen3_layers_with_query_and_key_norms_match_eager() -> None:
    model = tiny_qwen3(vocab_size=512)
    device = torch.device("cpu")
    runtime = StaticRuntime(model, device, compile=False)
    assert runtime.parts.fused and runtime.parts.layers[0].query_norm is not None
    static, dynamic = runtime.new_cache(), kv.new_cache(model)
    for step, size in enumerate((37, 1, 9)):
        tokens = _tokens(step, size, high=512)
        torch.testing.assert_close(
            kv.append(model, static, tokens, device),
            kv.append(model, dynamic, tokens, device),
            atol=1e-4,
            rtol=1e-4,
        )
    _assert_same_cache(static, dynamic)


def test_layers_with_adapters_keep_the_module_path_and_match_eager(qwen) -> None:
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(copy.deepcopy(qwen.model), config).eval()
    runtime = StaticRuntime(model, qwen.device, compile=False)
    assert not runtime.parts.fused
    prompt = _tokens(4, 40)
    expected = kv.prefill(model, kv.new_cache(model), prompt, qwen.device)
    got = kv.prefill(model, runtime.new_cache(), prompt, qwen.device)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("gathered", [False, True], ids=["written", "gathered"])
@pytest.mark.parametrize("seed", range(8))
def test_tree_layout_is_the_ancestry_of_any_tree(seed: int, gathered: bool, monkeypatch) -> None:
    """Both forms of the visibility: written in place (eager on a CPU) and gathered (what a
    graph or compiled code runs, forced here by pretending to compile)."""
    if gathered:
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    generator = torch.Generator().manual_seed(seed)
    size = [1, 2, 9, 40, 200, 512][seed % 6]
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=generator)) for i in range(1, size)]
    if seed % 2:
        parents = [-1 if i % 7 == 0 else p for i, p in enumerate(parents)]
    start, capacity = 5 + seed, 5 + seed + size + 11
    positions, visible = tree_layout(torch.tensor(parents), torch.tensor(start), capacity)
    expected = torch.zeros((size, capacity), dtype=torch.bool)
    expected[:, :start] = True
    depths = []
    for node in range(size):
        chain, depth = node, 0
        while chain >= 0:
            expected[node, start + chain] = True
            chain, depth = parents[chain], depth + (parents[chain] >= 0)
        depths.append(depth)
    assert torch.equal(visible, expected)
    assert positions.tolist() == [[start + d for d in depths]]


@pytest.mark.parametrize("first_known", [False, True], ids=["first-unknown", "first-known"])
@pytest.mark.parametrize(
    "size", [2, 37, GROUPED_MATMUL_MAX, GROUPED_MATMUL_MAX + 1, 3 * GROUPED_MATMUL_MAX + 5]
)
@pytest.mark.parametrize("shape", ["tree", "chain"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_equals_the_exact_product_in_every_form(
    size: int, dtype: torch.dtype, shape: str, first_known: bool
) -> None:
    """On a CPU in bfloat16, trees and chains take the grouped products in the weights'
    precision: up to :data:`GROUPED_MATMUL_MAX` tokens at once, wider ones in blocks of
    query rows where the first fed slot is known (eager), masked from that slot on; anything
    else takes PyTorch's fused attention. Every form equals attention in float64 to the
    precision of its dtype."""
    generator = torch.Generator().manual_seed(size + 7 * first_known)
    heads, kv_heads, dim, past = 14, 2, 64, 300
    if shape == "tree":
        parents = [-1] + [
            int(torch.randint(0, i, (1,), generator=generator)) for i in range(1, size)
        ]
        _, allowed = tree_layout(torch.tensor(parents), torch.tensor(past), past + size)
    else:
        _, allowed = chain_layout(torch.tensor(past), size, past + size)
    first = past if first_known else None
    visible = Visibility.of(allowed, dtype, first)
    grouped = dtype == torch.bfloat16 and (first_known or size <= GROUPED_MATMUL_MAX)
    assert (visible.blocked is not None) is grouped
    if grouped:
        assert torch.equal(visible.blocked, ~allowed[:, first or 0 :])
    query = torch.randn(1, heads, size, dim, generator=generator)
    keys, values = (torch.randn(1, kv_heads, past + size, dim, generator=generator) for _ in "kv")
    got = attend(query.to(dtype), keys.to(dtype), values.to(dtype), visible, dim**-0.5)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(t.to(dtype).double() for t in (query, keys, values)),
        attn_mask=allowed[None, None],
        scale=dim**-0.5,
        enable_gqa=True,
    )
    expected = expected.transpose(1, 2).reshape(1, size, heads * dim)
    error = float((got.double() - expected).norm() / expected.norm())
    assert error < (1e-2 if dtype == torch.bfloat16 else 1e-5)


def _tree(root: int, seed: int, budget: int) -> Any:
    """A pruned draft graph with shared prefixes and several branches."""
    reference = _tokens(seed, 60, 100, 3000)
    candidates = [
        Candidate("aligned:0", tuple(reference[:30]), tuple(range(30))),
        Candidate("aligned:1", tuple(reference[:5] + reference[20:40]), tuple(range(25))),
        Candidate("ngram:0", tuple([*reference[:2], 7, 8, 9]), tuple(range(5))),
        Candidate("topk:0", tuple([11, *reference[40:55]]), tuple(range(16))),
    ]
    config = replace(CONFIG, draft_length=40, budget=budget)
    return prune(build_graph(root, candidates, config, max_depth=budget + 1), budget)


def _branches(graph: Any) -> list[list[int]]:
    """Root-to-leaf paths: the first, the last and up to two between."""
    leaves = [n for n in range(len(graph)) if not graph.children[n]]
    picked = sorted({0, len(leaves) // 3, 2 * len(leaves) // 3, len(leaves) - 1})
    return [graph.path(leaves[i]) for i in picked]


@pytest.mark.parametrize("budget", [6, 100])
def test_static_tree_verification_equals_branch_by_branch_eager(qwen, budget: int) -> None:
    model, device = qwen.model, qwen.device
    runtime = StaticRuntime(model, device, compile=False)
    prefix = _tokens(budget, 30)
    graph = _tree(prefix[-1], budget, budget)
    assert len(_branches(graph)) > 1
    cache = runtime.new_cache()
    kv.prefill(model, cache, prefix[:-1], device)
    logits = NodeLogits(model, verify_graph(model, cache, graph, device), graph)
    assert kv.cache_length(cache) == len(prefix) - 1 + len(graph)
    for branch in _branches(graph):
        alone = kv.new_cache(model)
        kv.prefill(model, alone, prefix[:-1], device)
        expected = kv.verify(model, alone, [graph.tokens[n] for n in branch], device)
        for row, node in enumerate(branch):
            torch.testing.assert_close(logits[node], expected[row], atol=1e-4, rtol=1e-4)
            assert logits.argmax(node) == int(expected[row].argmax())


@pytest.mark.parametrize(
    ("which", "past"), [("first", 50), ("last", 50), ("root", 50), ("last", 240)]
)
def test_kept_path_leaves_exactly_the_cache_of_the_path(qwen, which: str, past: int) -> None:
    model, device = qwen.model, qwen.device
    runtime = StaticRuntime(model, device, compile=False)
    prefix = _tokens(7, past + 1)
    graph = _tree(prefix[-1], 7, 30)
    branch = {"first": _branches(graph)[0], "last": _branches(graph)[-1], "root": [0]}[which]
    cache = runtime.new_cache()
    kv.prefill(model, cache, prefix[:-1], device)
    assert kv.cache_length(cache) == past
    verify_graph(model, cache, graph, device)
    keep_path(model, cache, past, graph, branch, device)
    after = kv.append(model, cache, [77], device)
    fresh = kv.new_cache(model)
    kv.prefill(model, fresh, prefix[:-1] + [graph.tokens[n] for n in branch], device)
    expected = kv.append(model, fresh, [77], device)
    torch.testing.assert_close(after, expected, atol=1e-4, rtol=1e-4)
    _assert_same_cache(cache, fresh)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "exact"])
def test_caches_are_reused_and_shapes_stay_in_the_buckets(qwen, monkeypatch, padded: bool) -> None:
    """Padded forwards (compiled or graphed runtimes) take bucket shapes only; uncompiled
    forwards without graphs run at the size they are given (at most the largest bucket)."""
    model, device = qwen.model, qwen.device
    runtime = StaticRuntime(model, device, compile=False)
    assert not runtime.padded
    monkeypatch.setattr(StaticRuntime, "padded", property(lambda _: padded))
    shapes: set[tuple[int, int]] = set()
    forward = runtime._forward_last

    def recording(parts, keys, values, tokens, start, last):
        shapes.add((tokens.shape[1], keys[0].shape[2]))
        return forward(parts, keys, values, tokens, start, last)

    runtime._forward_last = recording
    cache = runtime.new_cache()
    runtime.append(cache, _tokens(1, 300))
    first = cache.keys[0].data_ptr()
    for size in range(1, 40, 3):
        runtime.append(cache, _tokens(size, size))
    runtime.append(cache, _tokens(0, 600))
    sizes = {size for size, _ in shapes}
    if padded:
        assert sizes <= set(BUCKETS)
    else:
        assert sizes == {300, *range(1, 40, 3), BUCKETS[-1], 600 - BUCKETS[-1]}
    del cache
    again = runtime.new_cache()
    runtime.append(again, _tokens(1, 300))
    assert again.keys[0].data_ptr() == first


# -- every mode: eager, static and compiled agree ----------------------------------------------

ModeRun = Callable[[LoadedModel], list[Any]]


SMALL_EDIT = (
    "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n"
    "    return total / len(values) + 1\n",
    "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n"
    "    return total / len(values)\n",
)


def _program_modes(loaded: LoadedModel) -> list[Any]:
    document = "".join(f"x = {i}\n" if i % 3 else f"y{i}\n" for i in range(1, 13))
    before, after = SMALL_EDIT
    outcomes: list[Any] = []
    for sampling in (Sampling(), Sampling(0.8, 0.9, seed=2)):
        decoder = Decoder(loaded, max_new_tokens=24, sampling=sampling)
        result = decoder.edit(document, INSTRUCTION)
        outcomes.append((format(result.program), result.text, result.stats.forwards))
    forced = Decoder(loaded).edit(before, INSTRUCTION, program=oracle(before, after))
    outcomes.append((forced.text, forced.stats.forwards))
    return outcomes


def _rewrite_modes(loaded: LoadedModel) -> list[Any]:
    prompt = _tokens(3, 20, 0, 20000)
    document = _tokens(4, 40, 0, 20000)
    outcomes: list[Any] = []
    for sampling in (Sampling(), Sampling(0.9, 0.95, seed=5)):
        output, stats = speculate(
            loaded, prompt, document, config=CONFIG, max_new_tokens=16, sampling=sampling
        )
        outcomes.append((output, stats.forwards, stats.copied_tokens))
    return outcomes


def _baselines_and_grammar(loaded: LoadedModel) -> list[Any]:
    before, after = SMALL_EDIT
    ar = regenerate(loaded, before, INSTRUCTION, after)
    pld = prompt_lookup(loaded, before, INSTRUCTION, after)
    grammar = compile_grammar(
        'root ::= "def " name "(" name ")" ":\\n"\nname ::= [a-z]+',
        loaded.tokenizer,
        vocab_size=loaded.vocab_size,
    )
    outcomes: list[Any] = [(ar.text, ar.stats.forwards), (pld.text, pld.stats.forwards)]
    for sampling in (Sampling(), Sampling(1.0, seed=7)):
        result = generate_constrained(
            loaded, "a\n", INSTRUCTION, grammar.matcher(), max_new_tokens=8, sampling=sampling
        )
        outcomes.append((result.text, result.stats.generated_tokens, result.stats.truncated))
    return outcomes


MODES: dict[str, ModeRun] = {
    "program": _program_modes,
    "rewrite": _rewrite_modes,
    "baselines and grammar": _baselines_and_grammar,
}


@pytest.fixture(scope="module")
def eager_outcomes(qwen) -> dict[str, list[Any]]:
    return {name: run(qwen) for name, run in MODES.items()}


@pytest.mark.parametrize("mode", list(MODES))
def test_static_runtime_decodes_exactly_as_eager(qwen, eager_outcomes, mode: str) -> None:
    with running(StaticRuntime(qwen.model, qwen.device, compile=False), qwen):
        assert MODES[mode](qwen) == eager_outcomes[mode]


@pytest.mark.parametrize("mode", list(MODES))
def test_compiled_runtime_decodes_exactly_as_eager(qwen, eager_outcomes, mode: str) -> None:
    runtime = _compiled_runtime(qwen, "aot_eager")
    with running(runtime, qwen):
        assert MODES[mode](qwen) == eager_outcomes[mode]
    assert _still_compiled(runtime)


_RUNTIMES: dict[tuple[int, str], StaticRuntime] = {}


def _compiled_runtime(loaded: LoadedModel, backend: str) -> StaticRuntime:
    """One compiled runtime per model and backend for the whole module: graphs compile once."""
    key = (id(loaded.model), backend)
    if key not in _RUNTIMES:
        _RUNTIMES[key] = install(loaded.model, loaded.device, backend=backend)
        uninstall(loaded.model)
    return _RUNTIMES[key]


def test_two_models_never_share_compiled_graphs(qwen, llama) -> None:
    for loaded in (qwen, llama):
        prompt = _tokens(11, 8)
        eager = kv.new_cache(loaded.model)
        expected = kv.prefill(loaded.model, eager, prompt, loaded.device)
        with running(_compiled_runtime(loaded, "aot_eager"), loaded):
            cache = kv.new_cache(loaded.model)
            assert isinstance(cache, StaticCache)
            got = kv.prefill(loaded.model, cache, prompt, loaded.device)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def _still_compiled(runtime: StaticRuntime) -> bool:
    """Whether both compiled parts of a layer still run compiled (none fell back)."""
    return all(part.compiled is not None for part in (runtime.parts.before, runtime.parts.after))


def test_a_layer_part_that_cannot_compile_runs_eagerly(qwen, caplog) -> None:
    runtime = StaticRuntime(qwen.model, qwen.device, compile=True, backend="aot_eager")

    def refuse(*args):
        raise torch._dynamo.exc.Unsupported("no")

    runtime.parts.after.compiled = refuse
    prompt = _tokens(5, 12)
    expected = kv.prefill(qwen.model, kv.new_cache(qwen.model), prompt, qwen.device)
    got = kv.prefill(qwen.model, runtime.new_cache(), prompt, qwen.device)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert runtime.parts.after.compiled is None
    assert runtime.parts.before.compiled is not None
    assert "after_attention failed (Unsupported: no)" in caplog.text


def test_one_compiled_layer_serves_every_layer_and_size(qwen) -> None:
    """Regional compilation: each part of a layer is compiled for a one-token forward and
    once for every wider one, whatever the number of layers and buckets."""
    graphs: list[int] = []

    def counting(graph: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        graphs.append(len(inputs))
        return graph.forward

    runtime = StaticRuntime(qwen.model, qwen.device, compile=True, backend=counting)
    expected_cache, cache = kv.new_cache(qwen.model), runtime.new_cache()
    for size in (40, 1, 8, 1, 20, 100):
        tokens = _tokens(size, size)
        expected = kv.append(qwen.model, expected_cache, tokens, qwen.device)
        torch.testing.assert_close(
            kv.append(qwen.model, cache, tokens, qwen.device), expected, atol=1e-4, rtol=1e-4
        )
    assert len(qwen.model.model.layers) > 1
    assert len(graphs) == 4
    assert runtime.capture_s > 0


def test_a_compiled_bfloat16_runtime_on_a_cpu_equals_the_float32_eager_forward(qwen) -> None:
    """Regionally compiled on a CPU, forwards are padded to buckets over power-of-two
    windows while attention runs eagerly between the compiled parts: in bfloat16 it takes
    the grouped products (blocks of query rows for the 300-token append), the padded
    window's tail blocked, and the logits equal the float32 eager forward's within bfloat16
    rounding."""
    model = copy.deepcopy(qwen.model).to(torch.bfloat16)
    runtime = StaticRuntime(model, qwen.device, compile=True, backend="aot_eager")
    assert runtime.padded
    expected_cache, cache = kv.new_cache(qwen.model), runtime.new_cache()
    for size in (40, 1, 7, 300, 20):
        tokens = _tokens(size, size)
        expected = kv.append(qwen.model, expected_cache, tokens, qwen.device)
        got = kv.append(model, cache, tokens, qwen.device)
        torch.testing.assert_close(got, expected, atol=2e-2, rtol=0)


@pytest.mark.slow
def test_inductor_compiled_step_and_token_choice_match_eager(qwen) -> None:
    """The real thing, on the graphs every decoding step runs (the one-token forward, the
    masked greedy choice): inductor's kernels give eager's logits and tokens. Trees, kept
    paths and wider appends go through the same capture, checked above with ``aot_eager``."""
    model, device = qwen.model, qwen.device
    runtime = _compiled_runtime(qwen, "inductor")
    allowed = torch.zeros(qwen.vocab_size, dtype=torch.bool)
    allowed[torch.randperm(qwen.vocab_size, generator=torch.Generator().manual_seed(0))[:5000]] = 1
    bitmask = allocate_token_bitmask(1, qwen.vocab_size)
    fill_from_allowed(bitmask, 0, allowed)
    results = []
    for chosen, backend in ((None, None), (runtime, "inductor")):
        chooser = TokenChooser(qwen.vocab_size, device, Sampling(), backend=backend)
        with running(chosen, qwen):
            cache = kv.new_cache(model)
            logits, tokens = [], []
            for token in _tokens(21, 6):
                logits.append(kv.decode_one(model, cache, token, device))
                chooser.bitmask.copy_(bitmask)
                tokens.append(chooser.choose(logits[-1].clone()))
        results.append((torch.stack(logits), tokens))
    (eager, eager_tokens), (compiled, compiled_tokens) = results
    torch.testing.assert_close(compiled, eager, atol=1e-4, rtol=1e-4)
    assert compiled.argmax(dim=-1).tolist() == eager.argmax(dim=-1).tolist()
    assert compiled_tokens == eager_tokens
    assert all(allowed[t] for t in compiled_tokens)
    assert _still_compiled(runtime)
    assert _kernel(masked_greedy, "inductor").compiled is not None
    stored = cache_path(compile_cache.KIND, runtime.cache_key)
    assert stored.is_file() and stored.stat().st_size > 0
