"""Candidates merged into one draft graph, pruned to a budget, verified in ONE forward: the
Python reference of the native draft tree (``cad.grammar._native.DraftTree``, which the
decoders build). Calibration's offline replays (``cad.training.calibrate``) and the tests
that hold the native tree and drafters equal to it use this module.

The graph is a prefix tree rooted at the token about to be fed (the model's last choice):
candidates that share a prefix share its nodes, so a common prefix is stored and verified
once. It is deliberately a tree, not a graph with several parents per node: in a causal
model a token's keys and values depend on its whole prefix, so two different prefixes ending
in the same token are two different states and cannot share a node.

Each node carries the probability that verification reaches it, from the calibrated rates of
the sources passing through it (the product of per-depth conditional rates along the path,
the best source when several share the node). Pruning keeps ``budget`` nodes by a
geometric-mean score in the manner of Spiffy: a node's own score combined with the mean of
its children's, so a likely node that also leads somewhere likely is kept first, and nodes
are only taken once their parent is (the kept set stays a tree).

For verification every node attends to the whole cached prefix and to its own ancestors,
at position ``cache_length + depth`` (``tree_verify`` builds that mask from ``parents``).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from cad.selector.draft_config import DraftConfig
from cad.selector.drafting import Candidate
from cad.selector.speculation import MAX_CHAIN_WITH_DRAFTS


@dataclass
class DraftGraph:
    """A token tree in topological order (a parent before its children); node 0 is the root.

    ``origins[i]`` lists the ``(source key, document index)`` pairs of the candidates that
    drafted node ``i``, best source first; ``reach[i]`` is the calibrated probability that
    verification accepts the path down to node ``i``."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    reach: list[float] = field(default_factory=list)
    origins: list[list[tuple[str, int | None]]] = field(default_factory=list)
    children: list[dict[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, parent: int, token: int, reach: float) -> int:
        """Append a node (or return the existing child of ``parent`` with ``token``)."""
        if parent >= 0 and token in self.children[parent]:
            node = self.children[parent][token]
            self.reach[node] = max(self.reach[node], reach)
            return node
        node = len(self.tokens)
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(0 if parent < 0 else self.depths[parent] + 1)
        self.reach.append(reach)
        self.origins.append([])
        self.children.append({})
        if parent >= 0:
            self.children[parent][token] = node
        return node

    def child(self, node: int, token: int) -> int | None:
        """The child of ``node`` drafting ``token``, if any."""
        return self.children[node].get(token)

    def token(self, node: int) -> int:
        """The token of ``node``."""
        return self.tokens[node]

    def child_tokens(self, node: int) -> list[int]:
        """The tokens drafted below ``node``, first drafted first."""
        return list(self.children[node])

    def first_children(self, node: int, limit: int) -> list[int]:
        """``node`` and the chain of first children below it, at most ``limit`` nodes."""
        chain = [node]
        while len(chain) < limit and self.children[chain[-1]]:
            chain.append(next(iter(self.children[chain[-1]].values())))
        return chain

    def document_index(self, node: int) -> int | None:
        """The document index the node's token was drafted from (its best source that took
        it from the document), or ``None`` for a token not copied from the document."""
        return next((p for _, p in self.origins[node] if p is not None), None)

    def path(self, node: int) -> list[int]:
        """Nodes from the root down to ``node``, inclusive."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]


def chain(tokens: list[int]) -> DraftGraph:
    """A graph that is only a chain of known tokens (reach 1): what a forward must feed
    whatever the drafts, with drafts to be added below its last node."""
    graph = DraftGraph()
    for token in tokens:
        graph.add(len(graph) - 1, token, 1.0)
    return graph


def build_graph(
    root: int,
    candidates: list[Candidate],
    config: DraftConfig,
    *,
    copying: bool = False,
    max_depth: int | None = None,
) -> DraftGraph:
    """The prefix tree of ``candidates`` below ``root`` (each cut to its source's calibrated
    length, and to ``max_depth`` when given), with the reach probabilities calibrated for the
    drafting state (``copying`` the document or editing it).

    ``prune(build_graph(..., max_depth=budget + 1), budget)`` equals pruning the full tree:
    a kept tree of ``budget`` nodes is at most ``budget`` deep, and the scores down to that
    depth read only the next level."""
    graph = chain([root])
    extend_graph(graph, candidates, config, copying=copying, max_depth=max_depth)
    return graph


def extend_graph(
    graph: DraftGraph,
    candidates: list[Candidate],
    config: DraftConfig,
    *,
    copying: bool = False,
    max_depth: int | None = None,
) -> None:
    """Merge ``candidates`` into ``graph`` below its last node (a root or the end of a known
    chain), as :func:`build_graph` does."""
    below = len(graph) - 1
    for candidate in candidates:
        node, reach = below, 1.0
        pairs = zip(candidate.tokens, candidate.positions, strict=True)
        limit = config.length(candidate.key)
        if max_depth is not None:
            limit = min(limit, max_depth)
        for depth, (token, position) in enumerate(pairs, 1):
            if depth > limit:
                break
            reach *= config.rate(candidate.key, depth, copying)
            node = graph.add(node, token, reach)
            graph.origins[node].append((candidate.key, position))


def geometric_mean(values: list[float]) -> float:
    """Geometric mean of positive numbers (0 if any is 0)."""
    if not values or min(values) <= 0.0:
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def node_score(graph: DraftGraph, node: int) -> float:
    """Spiffy-style score of one node: GM(own reach, GM of the children's reach); a leaf
    scores its own reach."""
    own = graph.reach[node]
    kids = [graph.reach[c] for c in graph.children[node].values()]
    return geometric_mean([own, geometric_mean(kids)]) if kids else own


def node_scores(graph: DraftGraph) -> list[float]:
    """``node_score`` of every node."""
    return [node_score(graph, node) for node in range(len(graph))]


def prune(graph: DraftGraph, budget: int, min_reach: float = 0.0, required: int = 1) -> DraftGraph:
    """Keep the first ``required`` nodes (the root, or a chain of known tokens from
    :func:`chain`) and at most ``budget`` drafted nodes below them, best score first among
    nodes whose parent is already kept, leaving out nodes less likely than ``min_reach`` to be
    accepted (their descendants are less likely still); the result is renumbered in the order
    nodes were kept. Scores are computed only for nodes that reach the frontier."""
    if not 1 <= required <= len(graph) or any(
        graph.parents[node] != node - 1 for node in range(required)
    ):
        raise ValueError("the required nodes must be a chain from the root")
    kept = DraftGraph()
    for node in range(required):
        kept.add(node - 1, graph.tokens[node], graph.reach[node])
        kept.origins[node] = list(graph.origins[node])
    frontier: list[tuple[float, int, int]] = []

    def offer(children: dict[int, int], parent: int) -> None:
        for child in children.values():
            if graph.reach[child] >= min_reach:
                heapq.heappush(frontier, (-node_score(graph, child), child, parent))

    offer(graph.children[required - 1], required - 1)
    while frontier and len(kept) < required + budget:
        _, node, new_parent = heapq.heappop(frontier)
        new = kept.add(new_parent, graph.tokens[node], graph.reach[node])
        kept.origins[new] = list(graph.origins[node])
        offer(graph.children[node], new)
    return kept


def draft_tree(
    known: list[int], candidates: list[Candidate], config: DraftConfig, copying: bool
) -> DraftGraph:
    """The ``known`` tokens (the prompt, or the model's last choice) as a chain, the
    candidates merged below it, pruned to the budget: one forward's tree in rewrite mode."""
    graph = chain(known)
    if len(known) <= MAX_CHAIN_WITH_DRAFTS:
        extend_graph(graph, candidates, config, copying=copying, max_depth=config.budget + 1)
    return prune(graph, config.budget, config.min_reach, required=len(known))
