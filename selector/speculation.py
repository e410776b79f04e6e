"""What program mode (``decoder.py``) and rewrite mode (``rewrite.py``) share: the verify
step, the model's choice at a draft-tree node, the longest chain a forward carries with a
draft tree, and the progress callback.

Each forward of either loop feeds a *chain* of known tokens (the prompt, or the model's
last choice and what is forced after it) with a draft tree below its end, built by the
native drafters (``cad.grammar._native``) into a :class:`DraftTree`. :func:`verify_draft`
lays the tree out for the forward (native code writes the tokens, parents, positions and
attention mask into buffers this module keeps) and runs the ONE forward; :class:`Choice`
then makes the model's choices where acceptance needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cad.grammar import allocate_token_bitmask, allowed_ids, apply_token_bitmask_inplace
from cad.grammar._native import DraftTree
from cad.selector import kv
from cad.selector.loading import LoadedModel
from cad.selector.sampling import TokenChooser, greedy_path, speculative_choices, to_device
from cad.selector.static_forward import MAX_TREE
from cad.selector.stats import Progress
from cad.selector.timing import PhaseClock
from cad.selector.tree_verify import NodeLogits, TreeLayout, verify_graph

ProgressCallback = Callable[[Progress], None]
Logits = NodeLogits | dict[int, torch.Tensor]
NARROW_MAX = 4096
"""The most allowed tokens a choice on a CPU scores alone (:meth:`Choice.narrow`) instead of
projecting the node's whole row of logits."""
MAX_CHAIN_WITH_DRAFTS = 4096
"""Known tokens a forward may carry together with a draft tree; a longer chain (a long
prompt or copy) is fed on its own, and the next forward drafts."""
CAUSAL_CHAIN = 64
"""A chain longer than this is fed causally (no attention mask to build, the runtime's
chunked appends) up to its last token, which roots the draft tree fed with its mask right
after: the same keys, values and logits as one forward over chain and tree, without a
mask as wide as the chain."""


def verify_draft(
    loaded: LoadedModel,
    cache: Any,
    tree: DraftTree,
    known: int,
    layout: TreeLayout,
    clock: PhaseClock | None = None,
    *,
    prefill: bool = False,
) -> Logits:
    """The verify step: ONE forward over ``tree`` (its first ``known`` nodes the chain of
    known tokens); the next-token logits of its nodes. A tree that is only its chain is fed
    as a plain sequence, and a chain longer than :data:`CAUSAL_CHAIN` causally before the
    tree below its end. With a ``clock`` the layout is timed as host work and the forward
    as the prompt's (``prefill``) or a later one. Host cost: the tree's layout
    (:class:`TreeLayout`, tens of µs), nothing per node in Python."""
    model, device = loaded.model, loaded.device
    if len(tree) == known:
        tokens = tree.tokens.tolist()
        if clock is not None:
            clock.host("layout")
        logits: Logits = NodeLogits.of_node(
            tree, known - 1, kv.append(model, cache, tokens, device)
        )
    else:
        first = known - 1 if known > CAUSAL_CHAIN or len(tree) > MAX_TREE else 0
        if first:
            chain = tree.tokens[:first].tolist()
            if clock is not None:
                clock.host("layout")
            kv.feed(model, cache, chain, device)
            if clock is not None:
                clock.forward(prefill=prefill)
        hidden = verify_graph(model, cache, tree, device, layout, clock, first)
        logits = NodeLogits(model, hidden, tree, offset=first)
    if clock is not None:
        clock.forward(prefill=prefill)
    return logits


class Choice:
    """The model's choice at a draft-tree node, for both decode loops: the argmax, or a
    sample by the speculative rule for the drafted children, unmasked or under a mask (the
    program FSM's, a syntax constraint's), packed and applied on the logits' device. With a
    ``target`` (forced-program mode) the choice is still made, then replaced by the forced
    program's token, so a forced decode costs what the model writing that program would;
    with a ``target`` and no ``chooser`` (a replay without a model) the program's token is
    taken directly.

    Unmasked choices are the logits' own (:meth:`NodeLogits.argmax`, :meth:`NodeLogits.sampled`:
    on a GPU decided for a chain of first children at once). Masked ones are made one node
    at a time (:meth:`one`) or, with ``batched`` (a GPU) and a ``walk`` that fills the masks
    along the drafted first children ahead of the model (``decoder.walk_ahead``), together
    for the path with one read (:meth:`along_path`). Each choice is made from the same
    logits under the same mask either way, so the tokens are the same."""

    def __init__(
        self,
        chooser: TokenChooser | None,
        target: bytes | None = None,
        *,
        batched: bool = False,
        walk: Callable[..., tuple[list[int], list[int]]] | None = None,
        clock: PhaseClock | None = None,
    ) -> None:
        if chooser is None and target is None:
            raise ValueError("a model's choice needs a token chooser")
        self.chooser = chooser
        self.target = target
        self.batched = batched and walk is not None
        self.walk = walk
        self.clock = clock
        self._logits: Logits | None = None
        self._known: dict[int, int] = {}
        self._masks: torch.Tensor | None = None

    def _lap(self, part: str) -> None:
        if self.clock is not None:
            if part == "choose":
                self.clock.choose()
            else:
                self.clock.host(part)

    @torch.inference_mode()
    def __call__(self, tape: Any, tree: Any, logits: Logits, node: int, limit: int) -> int:
        """The choice at decision ``node`` of ``tree`` with ``tape`` (a program tape: its
        matcher gives the mask) standing there."""
        if self.chooser is None:
            return tape.target_token(self.target)
        drafted = list(tree.child_tokens(node))
        if not (self.batched and drafted and isinstance(logits, NodeLogits)):
            choice, filled = None, False
            if isinstance(logits, NodeLogits) and logits.narrowable(node):
                choice, filled = self.narrow(tape, logits, node, drafted), True
            if choice is None:
                choice = self.one(tape, self.row(logits, node), drafted, filled=filled)
            return choice if self.target is None else tape.target_token(self.target)
        if self._logits is not logits:
            self._logits, self._known = logits, {}
        if node not in self._known:
            agree = self.target is not None
            self._known.update(self.along_path(tape, tree, logits, node, limit, agree=agree))
        if self.target is None:
            return self._known[node]
        return tape.target_token(self.target)

    @torch.inference_mode()
    def row(self, logits: Logits, node: int) -> torch.Tensor:
        """The logits after ``node``, their projection timed as the model's choice (device
        work), not the host's."""
        self._lap("accept")
        row = logits[node]
        self._lap("choose")
        return row

    @torch.inference_mode()
    def charge(self, logits: NodeLogits, path: list[int]) -> None:
        """The model's unmasked choices after the nodes of ``path``, made and dropped (see
        :meth:`NodeLogits.charge`): a forced rewrite pays for the choices it replaces."""
        self._lap("accept")
        logits.charge(path)
        self._lap("choose")

    @torch.inference_mode()
    def unmasked(self, logits: NodeLogits, node: int) -> int:
        """The choice after ``node`` with no mask: greedy or by the speculative rule."""
        chooser = self.chooser
        self._lap("accept")
        if chooser.sampling.temperature <= 0:
            choice = logits.argmax(node)
        else:
            choice = logits.sampled(node, chooser.sampling, chooser.generator)
        self._lap("choose")
        return choice

    @torch.inference_mode()
    def one(
        self, source: Any, logits: torch.Tensor, drafted: list[int], *, filled: bool = False
    ) -> int:
        """The choice at one node from its ``logits`` (masked in place) under the mask of
        ``source.matcher`` (anything that fills a bitmask row; ``filled``: the chooser holds
        it already)."""
        chooser = self.chooser
        assert chooser is not None
        self._lap("accept")
        greedy = chooser.sampling.temperature <= 0
        if not filled:
            chooser.fill(source.matcher)
        self._lap("mask")
        if greedy or not drafted:
            choice = chooser.choose(logits)
        else:
            apply_token_bitmask_inplace(logits, to_device(chooser.bitmask[0], logits.device))
            choice = speculative_choices(
                logits[None], [drafted], chooser.sampling, chooser.generator
            )[0]
        self._lap("choose")
        return choice

    @torch.inference_mode()
    def narrow(self, source: Any, logits: NodeLogits, node: int, drafted: list[int]) -> int | None:
        """The choice at ``node`` from the logits of the allowed tokens alone, where the mask
        of ``source.matcher`` allows at most :data:`NARROW_MAX` (``None`` otherwise, or where
        a logit is NaN: the whole row decides then, under the mask this leaves filled). The
        same choice as from the whole row under the mask: greedy, the first of the highest;
        sampled, from the allowed tokens' distribution, by the speculative rule over
        ``drafted``."""
        chooser = self.chooser
        assert chooser is not None
        self._lap("accept")
        chooser.fill(source.matcher)
        width = logits.width
        ids = allowed_ids(chooser.bitmask[0], width, NARROW_MAX)
        self._lap("mask")
        if ids is None or not len(ids):
            return None
        values = logits.among(node, ids)
        if bool(values.isnan().any()):
            return None
        if chooser.sampling.temperature <= 0:
            choice = int(ids[int(values.argmax())])
            self._lap("choose")
            return choice
        row = torch.full((width,), float("-inf"), device=values.device)
        row[ids.to(values.device)] = values
        self._lap("choose")
        return self.one(source, row, drafted, filled=True)

    def along_path(
        self,
        tape: Any,
        tree: Any,
        logits: NodeLogits,
        node: int,
        limit: int,
        *,
        agree: bool = False,
    ) -> dict[int, int]:
        """The choices at the decision nodes of the draft path from ``node``, up to the first
        that leaves it, made together with one read. With ``agree`` (a forced decode paying
        for the choices it replaces) they are made and dropped, and every node of the path is
        returned with its drafted token, as for a model whose choices follow the drafts."""
        chooser = self.chooser
        assert chooser is not None and self.walk is not None
        self._lap("accept")
        nodes, expected = self.walk(tape, tree, node, limit, self._mask_rows)
        masks = self._mask_rows(len(nodes))[: len(nodes)]
        self._lap("mask")
        rows = logits.rows(nodes)
        if chooser.sampling.temperature <= 0:
            chosen = dict(zip(nodes, greedy_path(rows, masks, expected), strict=False))
            self._lap("choose")
            return dict(zip(nodes, expected, strict=True)) if agree else chosen
        apply_token_bitmask_inplace(rows, to_device(masks, rows.device))
        children = [list(tree.child_tokens(n)) for n in nodes]
        picks = speculative_choices(rows, children, chooser.sampling, chooser.generator)
        self._lap("choose")
        if agree:
            return dict(zip(nodes, expected, strict=True))
        chosen = {}
        for decided, pick, draft in zip(nodes, picks, expected, strict=True):
            chosen[decided] = pick
            if pick != draft:
                break
        return chosen

    def _mask_rows(self, count: int) -> torch.Tensor:
        """A host bitmask of at least ``count`` rows the walk fills (pinned on a GPU; grown
        by doubling, the rows filled so far kept)."""
        assert self.chooser is not None
        old = self._masks
        if old is None or old.shape[0] < count:
            rows = max(count, 2 * (0 if old is None else old.shape[0]), 16)
            masks = allocate_token_bitmask(rows, self.chooser.bitmask.shape[1] * 32)
            if self.chooser.device.type == "cuda":
                masks = masks.pin_memory()
            if old is not None:
                masks[: old.shape[0]] = old
            self._masks = masks
        return self._masks
