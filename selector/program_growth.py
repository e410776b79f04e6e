"""Growing program drafts into a draft tree: the Python reference of the native program
drafter (``grammar/native/program_growth.cpp``), which the decoders use; tests hold the two
equal, tree for tree and forward for forward.

Proposals (:mod:`cad.selector.program_proposals`), tokenized as the decoder would append
them (:mod:`cad.selector.program_tokens`), merge into one prefix tree below the tokens the
next forward must feed anyway. A node's reach is the probability that verification gets
there: the proposal's probability (summed over the proposals through it: they are
alternatives), decaying by the calibrated acceptance rate over a gen body's drafted tokens.
The likeliest ops that complete (``prior.follow_ops`` per level, at least
``prior.follow_reach`` likely) are followed by what the tape appends after them (the copied
text of a copy, ``<``; a copy only when its text fits the budget, which the document's own
tokens rule out for long copies without tokenizing them, and as its stretch of the
document's tokens where that stretch lies on line boundaries) and by the proposals for the
op after that, so a whole copy and the next op can be accepted in one forward; nodes of later ops are discounted by
``prior.follow_discount`` per op ahead, so that finishing the op in progress comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cad.grammar import ProgramTokenIndex
from cad.resolver import Document, Gen, Op
from cad.selector.draft_config import ProgramPrior
from cad.selector.draft_graph import DraftGraph
from cad.selector.program_proposals import ProgramProposals, Proposal
from cad.selector.program_tokens import DocumentTokens, OpTokens, ProgramTokenizer

GROWN_PER_BUDGET, GROWN_SLACK = 2, 32
"""At most ``GROWN_PER_BUDGET * budget + GROWN_SLACK`` nodes are grown below a forward's
chain before pruning to the budget (as the native drafter's ``growth_limit``): proposals
come likeliest first, so the budget's best nodes are nearly always among them."""


class ReferenceProgramDrafter:
    """Proposes the next ops of a program over ``document`` and grows them into draft trees
    (a :class:`DraftGraph`); ``index`` and ``encode`` are the decoder's, so drafted tokens
    are exactly the tokens the decoder would append for the same program text.
    ``document_ids`` (the document's own tokens, tokenized when not given) estimate how long
    a copy is."""

    def __init__(
        self,
        index: ProgramTokenIndex,
        encode: Callable[[str], list[int]],
        document: Document,
        *,
        subline: bool = False,
        prior: ProgramPrior | None = None,
        document_ids: Sequence[int] | None = None,
    ) -> None:
        self.prior = prior or ProgramPrior()
        self.guesses = ProgramProposals(document, self.prior)
        self.tokens = ProgramTokenizer(index, encode, document, subline=subline)
        ids = encode(document.text) if document_ids is None else document_ids
        self.document_tokens = DocumentTokens.of(index, document, ids)

    def proposals(self, ops: tuple[Op, ...], prefix: bytes) -> list[Proposal]:
        """Guesses at the op in progress (:meth:`ProgramProposals.proposals`)."""
        return self.guesses.proposals(ops, prefix)

    def op_tokens(self, prefix: bytes, text: bytes, limit: int) -> OpTokens:
        """The tokens of an op's text (:meth:`ProgramTokenizer.op_tokens`)."""
        return self.tokens.op_tokens(prefix, text, limit)

    def grow(
        self,
        graph: DraftGraph,
        node: int,
        ops: tuple[Op, ...],
        prefix: bytes,
        budget: int,
    ) -> None:
        """Add drafts below ``node`` (where the op in progress reads ``prefix`` after the
        completed ``ops``), each node with the probability that verification reaches it;
        a likely op is followed by its copied text and the ops after it while they fit."""
        if budget <= 0:
            return
        limit = len(graph) + GROWN_PER_BUDGET * budget + GROWN_SLACK
        reach = {node: graph.reach[node]}
        levels = {node: 0}
        self._grow(graph, reach, levels, node, ops, prefix, budget, limit)
        for index, value in reach.items():
            graph.reach[index] = value * self.prior.follow_discount ** levels[index]

    def _grow(
        self,
        graph: DraftGraph,
        reach: dict[int, float],
        levels: dict[int, int],
        node: int,
        ops: tuple[Op, ...],
        prefix: bytes,
        budget: int,
        limit: int,
    ) -> None:
        """Add every proposal likely enough below ``node``, then follow the likely ones that
        complete an op: the copied text, ``<``, and the proposals for the op after it."""
        base = reach[node]
        ends: list[tuple[float, int, Op]] = []
        for proposal in sorted(self.proposals(ops, prefix), key=lambda p: -p.mass):
            if len(graph) >= limit:
                break
            if base * proposal.mass < self.prior.min_reach:
                continue
            drafted = self.op_tokens(prefix, proposal.text, budget + 1)
            if not drafted.tokens:
                continue
            leaf, leaf_reach = self._add_path(
                graph, reach, node, base * proposal.mass, drafted, proposal.rate
            )
            self._level(graph, levels, node, leaf)
            if drafted.complete and proposal.op is not None:
                ends.append((leaf_reach, leaf, proposal.op))
        ends.sort(key=lambda item: -item[0])
        for leaf_reach, leaf, op in ends[: self.prior.follow_ops]:
            if leaf_reach < self.prior.follow_reach or len(graph) >= limit:
                break
            if self.document_tokens.far_longer(op, budget):
                continue
            tail = [] if isinstance(op, Gen) else self.document_tokens.stretch(op)
            if tail is None:
                tail = self.tokens.echo(op)
            if len(tail) > budget:
                continue
            start = leaf
            for token in [*tail, *self.tokens.literal(b"<")]:
                leaf = self._add_node(graph, reach, leaf, token, leaf_reach)
            self._level(graph, levels, start, leaf, 1)
            self._grow(graph, reach, levels, leaf, (*ops, op), b"<", budget, limit)

    @staticmethod
    def _level(
        graph: DraftGraph, levels: dict[int, int], top: int, leaf: int, deeper: int = 0
    ) -> None:
        """Give the nodes from below ``top`` down to ``leaf`` the level of ``top`` (plus
        ``deeper``): how many ops ahead of the one in progress they lie."""
        level = levels[top] + deeper
        node = leaf
        while node != top:
            levels[node] = min(levels.get(node, level), level)
            node = graph.parents[node]

    def _add_path(
        self,
        graph: DraftGraph,
        reach: dict[int, float],
        node: int,
        mass: float,
        drafted: OpTokens,
        rate: float,
    ) -> tuple[int, float]:
        """Add the proposal's tokens below ``node``; returns the last node and its reach."""
        seen_decided = False
        for token, decided in zip(drafted.tokens, drafted.decided, strict=True):
            if decided and seen_decided:
                mass *= rate
            seen_decided = seen_decided or decided
            node = self._add_node(graph, reach, node, token, mass)
        return node, mass

    @staticmethod
    def _add_node(
        graph: DraftGraph, reach: dict[int, float], parent: int, token: int, mass: float
    ) -> int:
        """The child of ``parent`` for ``token`` (added if new), its reach increased by
        ``mass``: proposals are alternatives, so the probabilities of those sharing a node
        add up (never above the parent's)."""
        child = graph.add(parent, token, 0.0)
        reach[child] = min(reach.get(child, 0.0) + mass, reach[parent])
        return child
