"""One forward over a whole draft graph, and keeping only the accepted path in the KV cache.

``verify_graph`` feeds every node of the graph after the cached prefix with the graph's 4-D
attention mask and depth-based position ids; transformers uses a 4-D mask as given. It runs
the decoder body only and returns the last hidden states: the vocabulary projection is done
on demand (``NodeLogits``), because verification reads the logits of the accepted path
only, not one row per node.

``keep_path`` then moves the accepted nodes' keys and values so the cache is exactly
``prefix + path``, as if those tokens had been fed one by one.
"""

from __future__ import annotations

from typing import Any

import torch

from cad.selector import kv
from cad.selector.draft_graph import DraftGraph


@torch.inference_mode()
def verify_graph(model: Any, cache: Any, graph: DraftGraph, device: torch.device) -> torch.Tensor:
    """Feed ``graph`` after the cache in ONE forward; returns hidden states ``(n, hidden)``."""
    past = kv.cache_length(cache)
    dtype = model.get_input_embeddings().weight.dtype
    out = model.get_decoder()(
        input_ids=torch.tensor([graph.tokens], dtype=torch.long, device=device),
        attention_mask=graph.attention_mask(past, dtype, device),
        position_ids=graph.position_ids(past, device),
        past_key_values=cache,
        use_cache=True,
    )
    return out.last_hidden_state[0]


class NodeLogits:
    """Next-token logits (float32, ``(vocab,)``) of graph nodes, projected when first asked.

    Asking for a node projects it together with the chain of first children below it (the
    best-scored continuation, which acceptance usually walks) in one matrix product."""

    def __init__(self, model: Any, hidden: torch.Tensor, graph: DraftGraph, chunk: int = 32):
        self.head = model.get_output_embeddings()
        self.hidden = hidden
        self.graph = graph
        self.chunk = chunk
        self.cached: dict[int, torch.Tensor] = {}

    @torch.inference_mode()
    def __getitem__(self, node: int) -> torch.Tensor:
        if node not in self.cached:
            chain = [node]
            while len(chain) < self.chunk and self.graph.children[chain[-1]]:
                chain.append(next(iter(self.graph.children[chain[-1]].values())))
            rows = self.head(self.hidden[chain]).float()
            self.cached.update(zip(chain, rows, strict=True))
        return self.cached[node]


def _plain_layers(cache: Any) -> bool:
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


@torch.inference_mode()
def keep_path(
    model: Any, cache: Any, past: int, graph: DraftGraph, nodes: list[int], device: torch.device
) -> None:
    """Leave the cache holding the ``past`` prefix followed by ``nodes`` (a root-to-node path)
    in order. Plain dynamic layers are re-gathered in place; any other cache layout is cut
    back to the prefix and the accepted tokens are fed again."""
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
