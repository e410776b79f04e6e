"""Draft graphs: prefix merging, pruning, the tree mask, and one-forward verification that
equals verifying each branch on its own."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from cad.grammar._native import DraftTree
from cad.selector import kv
from cad.selector.draft_config import DraftConfig, depth_bucket
from cad.selector.draft_graph import build_graph, node_scores, prune
from cad.selector.drafting import Candidate, Drafter
from cad.selector.static_forward import tree_layout
from cad.selector.tree_verify import CHAIN_TAIL, CPU_CHUNK, NodeLogits, keep_path, verify_graph

CONFIG = DraftConfig(
    draft_length=16,
    budget=64,
    rates={
        "editing": {"aligned:0": [0.9, 0.95, 0.97], "aligned:1": [0.3, 0.6], "ngram:0": [0.5, 0.8]},
        "copying": {"aligned:0": [0.99], "aligned:1": [0.01]},
    },
)


def _candidate(key: str, tokens: list[int]) -> Candidate:
    return Candidate(key, tuple(tokens), tuple(range(len(tokens))))


def test_shared_prefixes_are_stored_once() -> None:
    graph = build_graph(
        7, [_candidate("aligned:0", [1, 2, 3, 4]), _candidate("ngram:0", [1, 2, 5])], CONFIG
    )
    assert graph.tokens == [7, 1, 2, 3, 4, 5]
    assert graph.parents == [-1, 0, 1, 2, 3, 2]
    assert graph.depths == [0, 1, 2, 3, 4, 3]
    assert [k for k, _ in graph.origins[2]] == ["aligned:0", "ngram:0"]
    assert graph.reach[1] == pytest.approx(0.9)
    assert graph.reach[5] == pytest.approx(0.5 * 0.8 * 0.8)


def test_mask_and_positions_follow_ancestry() -> None:
    graph = build_graph(
        7, [_candidate("aligned:0", [1, 2]), _candidate("aligned:1", [3, 4])], CONFIG
    )
    positions, visible = tree_layout(torch.tensor(graph.parents), torch.tensor(3), 3 + len(graph))
    assert visible.int().tolist() == [
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 0, 1, 0],
        [1, 1, 1, 1, 0, 0, 1, 1],
    ]
    assert positions.tolist() == [[3, 4, 5, 4, 5]]


def test_pruning_keeps_a_tree_within_budget_best_first() -> None:
    candidates = [
        _candidate("aligned:0", list(range(100, 116))),
        _candidate("aligned:1", list(range(200, 216))),
        _candidate("ngram:0", list(range(300, 316))),
    ]
    full = build_graph(1, candidates, CONFIG)
    assert len(full) == 1 + 3 * 16
    for budget in (0, 1, 5, 20, 100):
        kept = prune(full, budget)
        assert len(kept) == 1 + min(budget, 48)
        assert all(kept.parents[n] < n for n in range(1, len(kept)))
    kept = prune(full, 5)
    assert kept.tokens == [1, 100, 101, 102, 103, 104]
    scores = node_scores(full)
    assert scores[1] > scores[17] > 0


def test_depth_buckets_double() -> None:
    assert [depth_bucket(d) for d in (1, 2, 3, 4, 5, 8, 9, 16, 17, 200)] == [
        0, 1, 2, 2, 3, 3, 4, 4, 5, 8,
    ]  # fmt: skip
    assert CONFIG.rate("aligned:0", 300) == 0.97
    assert CONFIG.rate("unknown:0", 1) == CONFIG.default_rate


def test_drafter_aligns_and_reanchors() -> None:
    document = [10, 11, 12, 13, 14, 15, 16, 17, 11, 12, 18]
    drafter = Drafter(document, DraftConfig(draft_length=4, aligned=2, ngram=2), stop=0)
    drafter.advance([10, 11, 12], [None, None, None])
    assert drafter.position == 3
    first = drafter.candidates([10, 11, 12])
    assert [c.key for c in first] == ["aligned:0", "aligned:1", "ngram:0"]
    assert first[0].tokens == (13, 14, 15, 16)
    assert first[0].positions == (3, 4, 5, 6)
    assert first[2].tokens == (18, 0)
    drafter.advance([99], [None])
    assert drafter.position == 3
    drafter.advance([16], [6])
    assert drafter.position == 7


def _branches(graph) -> list[list[int]]:
    leaves = [n for n in range(len(graph)) if not graph.children[n]]
    return [graph.path(leaf) for leaf in leaves]


@pytest.mark.parametrize("seed", range(3))
def test_tree_verification_equals_each_branch_alone(tiny_qwen, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    prefix = torch.randint(0, 5000, (40,), generator=generator).tolist()
    trunk = torch.randint(0, 5000, (12,), generator=generator).tolist()
    candidates = [_candidate("aligned:0", trunk)]
    for key, cut in (("aligned:1", 3), ("ngram:0", 7), ("ngram:1", 0)):
        tail = torch.randint(0, 5000, (6,), generator=generator).tolist()
        candidates.append(_candidate(key, trunk[:cut] + tail))
    graph = prune(build_graph(prefix[-1], candidates, CONFIG), 64)
    model, device = tiny_qwen.model, tiny_qwen.device

    cache = kv.new_cache(model)
    kv.prefill(model, cache, prefix[:-1], device)
    logits = NodeLogits(model, verify_graph(model, cache, graph, device), graph)
    assert kv.cache_length(cache) == len(prefix) - 1 + len(graph)

    for branch in _branches(graph):
        alone = kv.new_cache(model)
        kv.prefill(model, alone, prefix[:-1], device)
        expected = kv.verify(model, alone, [graph.tokens[n] for n in branch], device)
        got = torch.stack([logits[n] for n in branch])
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_keep_path_leaves_the_cache_of_the_path(tiny_qwen) -> None:
    model, device = tiny_qwen.model, tiny_qwen.device
    prefix = list(range(300, 330))
    candidates = [
        _candidate("aligned:0", [1000, 1001, 1002, 1003]),
        _candidate("aligned:1", [1000, 2001, 2002]),
    ]
    graph = build_graph(prefix[-1], candidates, CONFIG)
    branch = graph.path(len(graph) - 1)
    assert branch != list(range(len(branch)))

    cache = kv.new_cache(model)
    kv.prefill(model, cache, prefix[:-1], device)
    verify_graph(model, cache, graph, device)
    keep_path(model, cache, len(prefix) - 1, graph, branch, device)
    after = kv.append(model, cache, [77], device)

    fresh = kv.new_cache(model)
    kv.prefill(model, fresh, prefix[:-1] + [graph.tokens[n] for n in branch], device)
    expected = kv.append(model, fresh, [77], device)
    assert kv.cache_length(cache) == kv.cache_length(fresh)
    for a, b in zip(cache.layers, fresh.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(after, expected, atol=1e-4, rtol=1e-4)


def test_reach_follows_the_drafting_state_and_source_lengths() -> None:
    candidates = [_candidate("aligned:0", [1, 2, 3]), _candidate("aligned:1", [4, 5, 6])]
    editing = build_graph(7, candidates, CONFIG)
    copying = build_graph(7, candidates, CONFIG, copying=True)
    assert editing.reach[1] == pytest.approx(0.9) and copying.reach[1] == pytest.approx(0.99)
    assert editing.reach[4] == pytest.approx(0.3) and copying.reach[4] == pytest.approx(0.01)
    short = build_graph(7, candidates, replace(CONFIG, lengths={"aligned:1": 1}))
    assert short.tokens == [7, 1, 2, 3, 4]


def test_pruning_a_depth_capped_graph_equals_pruning_the_full_one() -> None:
    generator = torch.Generator().manual_seed(5)
    candidates = [
        _candidate(key, torch.randint(0, 9, (16,), generator=generator).tolist())
        for key in ("aligned:0", "aligned:1", "ngram:0", "ngram:1")
    ]
    for budget in (1, 3, 8, 30):
        for reach in (0.0, 0.2):
            full = prune(build_graph(1, candidates, CONFIG), budget, reach)
            capped = prune(build_graph(1, candidates, CONFIG, max_depth=budget + 1), budget, reach)
            assert (full.tokens, full.parents) == (capped.tokens, capped.parents)


def test_min_reach_leaves_doubtful_nodes_out() -> None:
    candidates = [_candidate("aligned:0", list(range(10, 20))), _candidate("ngram:0", [30, 31])]
    graph = build_graph(1, candidates, CONFIG)
    kept = prune(graph, 64, min_reach=0.45)
    assert all(r >= 0.45 for r in kept.reach)
    assert 30 in kept.tokens and 31 not in kept.tokens
    assert len(prune(graph, 64, min_reach=0.95)) == 1


def test_drafter_knows_when_it_is_copying_and_repeats_the_output() -> None:
    document = [10, 11, 12, 13, 14]
    drafter = Drafter(document, DraftConfig(draft_length=4, aligned=1, ngram=0, output=1), stop=0)
    drafter.advance([10, 11], [None, None])
    assert drafter.copying
    drafter.advance([50], [None])
    assert not drafter.copying
    output = [10, 11, 50, 51, 52, 10, 11]
    drafter.advance([51, 52, 10, 11], [None] * 4)
    repeats = [c for c in drafter.candidates(output) if c.key == "output:0"]
    assert repeats[0].tokens == (50, 51, 52, 10)
    assert repeats[0].positions == (None,) * 4


def test_one_token_anchors_prefer_the_nearest_occurrence() -> None:
    document = [5, 1, 2, 5, 3, 4, 5, 6, 7]
    config = DraftConfig(draft_length=2, aligned=0, ngram=3, min_ngram=1, max_ngram=2)
    drafter = Drafter(document, config)
    drafter.advance([5, 3], [3, 4])
    anchors = [c.positions[0] for c in drafter.candidates([9, 5])]
    assert anchors == [4, 7, 1]


@pytest.mark.parametrize(
    ("length", "chunks"),
    [(40, [40]), (48, [48]), (56, [56]), (57, [48, 9]), (97, [48, 49]), (150, [48, 48, 54])],
)
def test_a_cpu_projects_a_chain_in_chunks_without_a_short_tail(
    tiny_qwen, length: int, chunks: list[int]
) -> None:
    """Walking a chain projects it CPU_CHUNK rows at a time, the last few rows joined to the
    chunk before them (a lone row costs nearly what a chunk does), each row once."""
    assert (CPU_CHUNK, CHAIN_TAIL) == (48, 8)
    tree = DraftTree()
    parent = -1
    for token in range(length):
        parent = tree.add(parent, 100 + token, 1.0)
    projected: list[int] = []
    logits = NodeLogits(tiny_qwen.model, torch.randn(length, 64), tree)
    real_head = logits.head

    def counting(hidden: torch.Tensor) -> torch.Tensor:
        projected.append(hidden.shape[0])
        return real_head(hidden)

    logits.head = counting
    logits.charge(list(range(length)))
    assert projected == chunks
