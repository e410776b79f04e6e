"""One forward over a whole draft tree, and keeping only the accepted path in the KV cache.

``verify_graph`` feeds every node of the tree after the cached prefix, each node seeing the
prefix and its own ancestors at position ``cache_length + depth``. Native code lays the tree
out on the host (tokens, parents and positions into reused buffers, :class:`TreeLayout`);
for transformers' dynamic cache it also writes the 4-D attention mask, while a static cache
(``cad.selector.runtime``) gets the parents and builds mask and positions on the device
inside the compiled forward (``static_forward.tree_layout``). It runs the decoder body only
and returns the last hidden states: the vocabulary projection is done on demand
(``NodeLogits``), because verification reads the logits of the accepted path only, not one
row per node.

A tree is the native :class:`cad.grammar._native.DraftTree` the drafters build; the Python
reference graph (:class:`cad.selector.draft_graph.DraftGraph`) is accepted too and copied
into one.

``keep_path`` then moves the accepted nodes' keys and values so the cache is exactly
``prefix + path``, as if those tokens had been fed one by one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cad.grammar._native import DraftTree
from cad.selector import kv
from cad.selector.cpu_packing import PackedHead
from cad.selector.runtime import StaticCache, in_place, output_head
from cad.selector.sampling import Sampling, batched_reads, greedy_path, speculative_choices

if TYPE_CHECKING:
    from cad.selector.timing import PhaseClock


CPU_CHUNK = 48
"""Chain nodes a CPU projects to logits together. Measured with Qwen2.5-0.5B's output layer
(896 × 151,936, float32, packed) on a 2-core x86-64 CPU: 7 ms for one row, 0.72 ms a row
for 32, 0.65 for 48, 0.78 for 64 or more; a larger chunk also projects more rows that a
rejected draft never needs."""
CHAIN_TAIL = 8
"""The most rows past a chunk projected with it when they end the chain, rather than alone."""


def native_tree(graph: Any) -> DraftTree:
    """``graph`` as a native tree (a Python reference graph is copied node by node)."""
    if isinstance(graph, DraftTree):
        return graph
    tree = DraftTree()
    for token, parent in zip(graph.tokens, graph.parents, strict=True):
        tree.add(parent, token, 1.0)
    return tree


class TreeLayout:
    """Buffers a decode reuses for every tree it feeds: tokens, parents and positions
    (int64) and the additive attention mask (float32), grown by doubling; native code fills
    them (:meth:`DraftTree.layout`, :meth:`DraftTree.fill_mask`)."""

    def __init__(self) -> None:
        self._ints = np.empty((3, 0), dtype=np.int64)
        self._mask = np.empty(0, dtype=np.float32)

    def arrays(
        self, tree: DraftTree, past: int, first: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views of the tokens, parents (numbered from ``first``) and positions (``past`` +
        depth below ``first``) of the tree's nodes from ``first`` on. Cost: linear in the
        nodes, 6 to 15 µs for 97 nodes (2-core x86-64 CPU)."""
        size = len(tree) - first
        if self._ints.shape[1] < size:
            self._ints = np.empty((3, max(size, 2 * self._ints.shape[1], 256)), dtype=np.int64)
        tokens, parents, positions = self._ints[0], self._ints[1], self._ints[2]
        tree.layout(past, tokens, parents, positions, first)
        return tokens[:size], parents[:size], positions[:size]

    def mask(self, tree: DraftTree, past: int, dtype: torch.dtype, first: int = 0) -> torch.Tensor:
        """The ``(n, past + n)`` additive mask of the ``n`` nodes from ``first`` on: 0 where a
        node sees the cache, its ancestors and itself, the dtype's lowest value elsewhere.
        Cost: linear in the mask's ``n * (past + n)`` entries, 20 to 90 µs for 97 nodes after
        500 to 4,000 cached tokens (2-core x86-64 CPU); a static cache needs no mask."""
        size = len(tree) - first
        need = size * (past + size)
        if self._mask.shape[0] < need:
            self._mask = np.empty(max(need, 2 * self._mask.shape[0]), dtype=np.float32)
        tree.fill_mask(self._mask, past, float(torch.finfo(dtype).min), first)
        mask = torch.from_numpy(self._mask[:need]).view(size, past + size)
        return mask if dtype == torch.float32 else mask.to(dtype)


@torch.inference_mode()
def verify_graph(
    model: Any,
    cache: Any,
    graph: Any,
    device: torch.device,
    layout: TreeLayout | None = None,
    clock: PhaseClock | None = None,
    first: int = 0,
) -> torch.Tensor:
    """Feed ``graph`` after the cache in ONE forward; returns hidden states ``(n, hidden)``.
    With ``first`` the nodes before it (a chain) are already in the cache and the nodes from
    it on are fed. ``layout`` holds the buffers to reuse; with a ``clock`` laying the tree
    out is timed as host work."""
    tree = native_tree(graph)
    layout = layout or TreeLayout()
    past = kv.cache_length(cache)
    tokens, parents, positions = layout.arrays(tree, past, first)
    if isinstance(cache, StaticCache):
        if clock is not None:
            clock.host("layout")
        return cache.runtime.verify_tree(cache, tokens, parents)
    dtype = model.get_input_embeddings().weight.dtype
    mask = layout.mask(tree, past, dtype, first)
    inputs = (torch.from_numpy(tokens)[None], torch.from_numpy(positions)[None], mask[None, None])
    input_ids, position_ids, attention_mask = (t.to(device) for t in inputs)
    if clock is not None:
        clock.host("layout")
    out = model.get_decoder()(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
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
    reaches it (and a chain is projected :data:`CPU_CHUNK` nodes at a time). ``hidden`` holds
    the nodes from ``offset`` on (the chain before them was fed on its own)."""

    def __init__(
        self,
        model: Any,
        hidden: torch.Tensor,
        graph: Any,
        chunk: int | None = None,
        offset: int = 0,
    ):
        self.head = None if model is None else output_head(model)
        module = self.head.module if isinstance(self.head, PackedHead) else self.head
        self.plain_head = type(module) is torch.nn.Linear and module.weight.is_floating_point()
        self.hidden = hidden
        self.offset = offset
        self.graph = graph
        self.batched = batched_reads(hidden.device)
        self.chunk = chunk or (max(len(graph), 1) if self.batched else CPU_CHUNK)
        self.cached: dict[int, torch.Tensor] = {}
        self.choices: dict[int, int] = {}

    @classmethod
    def of_node(cls, graph: Any, node: int, logits: torch.Tensor) -> NodeLogits:
        """The logits of a graph fed as a plain sequence, known only after its last ``node``
        (which has no children): the one node a choice is made at."""
        nodes = cls(None, logits[None], graph, chunk=1)
        nodes.cached[node] = logits
        return nodes

    def chain(self, node: int) -> list[int]:
        """``node`` and the first children below it: at most ``chunk`` nodes, or up to
        :data:`CHAIN_TAIL` more where that reaches the chain's end (a few rows projected on
        their own cost nearly what a whole chunk does)."""
        nodes = list(self.graph.first_children(node, self.chunk + CHAIN_TAIL + 1))
        return nodes if len(nodes) <= self.chunk + CHAIN_TAIL else nodes[: self.chunk]

    @torch.inference_mode()
    def rows(self, nodes: list[int]) -> torch.Tensor:
        """Logits ``(len(nodes), vocab)`` of ``nodes``, projecting those not projected yet
        in one product."""
        missing = [n for n in nodes if n not in self.cached]
        if missing:
            projected = self.head(self.hidden[[n - self.offset for n in missing]]).float()
            self.cached.update(zip(missing, projected, strict=True))
            if missing == nodes:
                return projected
        return torch.stack([self.cached[n] for n in nodes])

    def narrowable(self, node: int) -> bool:
        """Whether :meth:`among` can score ``node``: the output layer is a plain linear layer
        (not quantized, no adapter of its own) and the node's whole row is not projected
        already (reading it would cost nothing more)."""
        return self.plain_head and node not in self.cached

    @property
    def width(self) -> int:
        """How many logits a row holds: the output layer's rows (only with an output layer)."""
        assert self.head is not None
        return int(self.head.weight.shape[0])

    @torch.inference_mode()
    def among(self, node: int, ids: torch.Tensor) -> torch.Tensor:
        """The logits of just ``ids`` after ``node`` (float32, ``(len(ids),)``): those rows of
        the output layer times the node's hidden state. Where a mask allows a few tokens (a
        line number's digits), this reads a few rows of the output layer instead of all of
        them, and leaves the host's caches alone."""
        assert self.head is not None
        weight, bias = self.head.weight, self.head.bias
        rows = weight.index_select(0, ids.to(weight.device))
        shift = None if bias is None else bias.index_select(0, ids.to(bias.device))
        hidden = self.hidden[node - self.offset]
        return torch.nn.functional.linear(hidden, rows, shift).float()

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
        it, up to the first node where the choice leaves the chain; on a CPU those of every
        row projected with it, in one pass (row by row costs about twice as much)."""
        if node not in self.choices:
            if not self.batched:
                if node in self.cached:
                    return int(self.cached[node].argmax())
                nodes = self.chain(node)
                picks = self.rows(nodes).argmax(dim=-1).tolist()
                self.choices.update(zip(nodes, picks, strict=True))
                return self.choices[node]
            nodes, picks = self._greedy_chain(node)
            self.choices.update(zip(nodes, picks, strict=False))
        return self.choices[node]

    def _greedy_chain(self, node: int) -> tuple[list[int], list[int]]:
        """The chain from ``node`` and the greedy choices along it, up to the first that
        leaves it, decided together (a GPU's way)."""
        nodes = self.chain(node)
        drafted = [self.graph.token(n) for n in nodes[1:]] + [-1]
        return nodes, greedy_path(self.rows(nodes), None, drafted)

    def charge(self, path: list[int]) -> None:
        """Make the greedy choices after the nodes of ``path`` (a walk down the tree) and drop
        them: the projections and choices an unforced decode makes when the model's choices
        follow ``path``, so that a decode forced to a target costs what it would cost if the
        model wrote the target itself. On a GPU a chain of first children is decided at once,
        up to where ``path`` leaves it."""
        index = 0
        while index < len(path):
            if not self.batched:
                self.argmax(path[index])
                index += 1
                continue
            nodes, _ = self._greedy_chain(path[index])
            shared = 1
            while shared < len(nodes) and index + shared < len(path):
                if nodes[shared] != path[index + shared]:
                    break
                shared += 1
            index += shared

    def sampled(self, node: int, sampling: Sampling, generator: torch.Generator) -> int:
        """The model's sampled choice after ``node`` by the speculative rule over the tokens
        drafted below it (lossless: distributed as plain sampling)."""
        if node not in self.choices:
            nodes, rows = self._decided_with(node)
            drafted = [list(self.graph.child_tokens(n)) for n in nodes]
            picks = speculative_choices(rows, drafted, sampling, generator)
            self.choices.update(zip(nodes, picks, strict=True))
        return self.choices[node]


def _plain_layers(cache: Any) -> bool:
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


@torch.inference_mode()
def keep_path(
    model: Any, cache: Any, past: int, graph: Any, nodes: list[int], device: torch.device
) -> None:
    """Leave the cache holding the ``past`` prefix followed by ``nodes`` (a root-to-node path)
    in order. A static cache moves the path's slots down in place; plain dynamic layers are
    re-gathered; any other cache layout is cut back to the prefix and the accepted tokens
    are fed again."""
    if isinstance(cache, StaticCache):
        cache.runtime.keep(cache, past, nodes)
        return
    start = in_place(nodes)
    if start == len(nodes):
        kv.truncate(cache, past + len(nodes))
        return
    if _plain_layers(cache):
        base = past + start
        for layer in cache.layers:
            index = torch.tensor([past + n for n in nodes[start:]], device=layer.keys.device)
            layer.keys = torch.cat([layer.keys[..., :base, :], layer.keys[..., index, :]], dim=-2)
            layer.values = torch.cat(
                [layer.values[..., :base, :], layer.values[..., index, :]], dim=-2
            )
        return
    kv.truncate(cache, past)
    kv.append(model, cache, [int(graph.tokens[n]) for n in nodes], device)
