"""The hot-loop cost bench: each walk is a first visit that steps most of the trie."""

from __future__ import annotations

from bench.walk_cost import main, walk_costs
from cad.grammar import Vocabulary


def test_every_walk_steps_most_of_the_trie_and_costs_time(qwen2_tokenizer) -> None:
    vocabulary = Vocabulary.from_tokenizer(qwen2_tokenizer)
    costs = walk_costs(vocabulary, 2)
    nodes = vocabulary.native_trie.node_count
    assert [stepped for _, stepped in costs] == [costs[0][1]] * 2
    assert nodes // 2 < costs[0][1] <= nodes
    assert all(elapsed > 0 for elapsed, _ in costs)


def test_main_prints_nodes_and_cycles(capsys) -> None:
    assert main(["--walks", "2", "--ghz", "2.0"]) == 0
    out = capsys.readouterr().out
    assert "trie nodes per walk" in out and "cycles per node at 2.00 GHz" in out
