"""One forward over a whole draft graph, and keeping only the accepted path in the KV cache.

``verify_graph`` feeds every node of the graph after the cached prefix, each node seeing the
prefix and its own ancestors at position ``cache_length + depth``; the mask and the positions
are built on the device from the parent indices alone (``static_forward.tree_layout``), for
transformers' dynamic cache as a 4-D mask, for a static cache (``cad.selector.runtime``)
inside the compiled forward. It runs the decoder body only and returns the last hidden
states: the vocabulary projection is done on demand (``NodeLogits``), because verification
reads the logits of the accepted path only, not one row per node.

``keep_path`` then moves the accepted nodes' keys and values so the cache is exactly
``prefix + path``, as if those tokens had been fed one by one.
"""

from __future__ import annotations

from typing import Any

import torch

from cad.selector import kv
from cad.selector.draft_graph import DraftGraph
from cad.selector.runtime import StaticCache
from cad.selector.sampling import Sampling, batched_reads, greedy_path, speculative_choices
from cad.selector.static_forward import tree_layout


@torch.inference_mode()
def verify_graph(model: Any, cache: Any, graph: DraftGraph, device: torch.device) -> torch.Tensor:
    """Feed ``graph`` after the cache in ONE forward; returns hidden states ``(n, hidden)``."""
    if isinstance(cache, StaticCache):
        return cache.runtime.verify_tree(cache, graph.tokens, graph.parents)
    past = kv.cache_length(cache)
    parents = torch.tensor(graph.parents, dtype=torch.long, device=device)
    start = torch.tensor(past, dtype=torch.long, device=device)
    positions, visible = tree_layout(parents, start, past + len(graph))
    dtype = model.get_input_embeddings().weight.dtype
    mask = torch.zeros(visible.shape, dtype=dtype, device=device)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    out = model.get_decoder()(
        input_ids=torch.tensor([graph.tokens], dtype=torch.long, device=device),
        attention_mask=mask[None, None],
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
    )
    return out.last_hidden_state[0]


class NodeLogits:
    """Next-token logits (float32, ``(vocab,)``) of graph nodes, projected when first asked.

    Asking for a node projects it together with the chain of first children below it (the
    best-scored continuation, which acceptance usually walks) in one matrix product. The
    model's choices (``argmax``, ``sampled``) are made on the logits' device; on a GPU
    (:func:`batched_reads`) those of the whole chain are made together, with acceptance
    decided there too, and read back at once, so walking an accepted path costs one read,
    while on a CPU, where a read costs nothing, each node is decided only when acceptance
    reaches it (and a chain is projected 32 nodes at a time)."""

    def __init__(
        self, model: Any, hidden: torch.Tensor, graph: DraftGraph, chunk: int | None = None
    ):
        self.head = None if model is None else model.get_output_embeddings()
        self.hidden = hidden
        self.graph = graph
        self.batched = batched_reads(hidden.device)
        self.chunk = chunk or (max(len(graph), 1) if self.batched else 32)
        self.cached: dict[int, torch.Tensor] = {}
        self.choices: dict[int, int] = {}

    @classmethod
    def of_node(cls, graph: DraftGraph, node: int, logits: torch.Tensor) -> NodeLogits:
        """The logits of a graph fed as a plain sequence, known only after its last ``node``
        (which has no children): the one node a choice is made at."""
        nodes = cls(None, logits[None], graph, chunk=1)
        nodes.cached[node] = logits
        return nodes

    def chain(self, node: int) -> list[int]:
        """``node`` and the first children below it, at most ``chunk`` nodes."""
        chain = [node]
        while len(chain) < self.chunk and self.graph.children[chain[-1]]:
            chain.append(next(iter(self.graph.children[chain[-1]].values())))
        return chain

    @torch.inference_mode()
    def rows(self, nodes: list[int]) -> torch.Tensor:
        """Logits ``(len(nodes), vocab)`` of ``nodes``, projecting those not projected yet
        in one product."""
        missing = [n for n in nodes if n not in self.cached]
        if missing:
            projected = self.head(self.hidden[missing]).float()
            self.cached.update(zip(missing, projected, strict=True))
            if missing == nodes:
                return projected
        return torch.stack([self.cached[n] for n in nodes])

    def __getitem__(self, node: int) -> torch.Tensor:
        if node not in self.cached:
            self.rows(self.chain(node))
        return self.cached[node]

    def _decided_with(self, node: int) -> tuple[list[int], torch.Tensor]:
        """The nodes whose choices are made together with ``node``'s, and their logits."""
        if self.batched:
            nodes = self.chain(node)
            return nodes, self.rows(nodes)
        return [node], self[node][None]

    def argmax(self, node: int) -> int:
        """The model's greedy choice after ``node``: on a GPU decided with the chain below
        it, up to the first node where the choice leaves the chain."""
        if node not in self.choices:
            if not self.batched:
                return int(self[node].argmax())
            nodes = self.chain(node)
            drafted = [self.graph.tokens[n] for n in nodes[1:]] + [-1]
            picks = greedy_path(self.rows(nodes), None, drafted)
            self.choices.update(zip(nodes, picks, strict=False))
        return self.choices[node]

    def sampled(self, node: int, sampling: Sampling, generator: torch.Generator) -> int:
        """The model's sampled choice after ``node`` by the speculative rule over the tokens
        drafted below it (lossless: distributed as plain sampling)."""
        if node not in self.choices:
            nodes, rows = self._decided_with(node)
            drafted = [list(self.graph.children[n]) for n in nodes]
            picks = speculative_choices(rows, drafted, sampling, generator)
            self.choices.update(zip(nodes, picks, strict=True))
        return self.choices[node]


def _plain_layers(cache: Any) -> bool:
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


@torch.inference_mode()
def keep_path(
    model: Any, cache: Any, past: int, graph: DraftGraph, nodes: list[int], device: torch.device
) -> None:
    """Leave the cache holding the ``past`` prefix followed by ``nodes`` (a root-to-node path)
    in order. A static cache moves the path's slots down in place; plain dynamic layers are
    re-gathered; any other cache layout is cut back to the prefix and the accepted tokens
    are fed again."""
    if isinstance(cache, StaticCache):
        cache.runtime.keep(cache, past, nodes)
        return
    if nodes == list(range(len(nodes))):
        kv.truncate(cache, past + len(nodes))
        return
    if _plain_layers(cache):
        for layer in cache.layers:
            index = torch.tensor([past + n for n in nodes], device=layer.keys.device)
            layer.keys = torch.cat([layer.keys[..., :past, :], layer.keys[..., index, :]], dim=-2)
            layer.values = torch.cat(
                [layer.values[..., :past, :], layer.values[..., index, :]], dim=-2
            )
        return
    kv.truncate(cache, past)
    kv.append(model, cache, [graph.tokens[n] for n in nodes], device)
