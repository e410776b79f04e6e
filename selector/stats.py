"""What a decode reports: progress while it runs, stats and the result when it ends."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from cad.resolver import Program

HOST_PARTS = ("draft", "layout", "mask", "accept", "bookkeeping")
"""The host's work per forward, by kind: drafting the tree, laying it out for the forward
(tokens, parents, positions, the attention mask), filling grammar masks, walking the
accepted path, and the rest (the tape's record, progress, the cache's kept path indices)."""


@dataclass(frozen=True)
class Progress:
    """A snapshot sent while decoding: ops decided and lines copied/generated so far."""

    ops: int
    lines_copied: int
    lines_generated: int
    tokens_generated: int


@dataclass
class DecodeStats:
    """Costs of one decode. ``generated_tokens`` are model-decided, ``forced_tokens`` are
    structural literals the grammar determined, ``copied_tokens`` are copied text appended to
    the cache; every forward after the prompt counts in ``forwards``; ``drafted_tokens`` are
    the draft-tree nodes verified beside the known tokens.

    Times are seconds by phase: ``prefill_s`` the prompt's forward (and keeping its accepted
    path), ``decode_s`` every forward after it (and keeping accepted paths), ``choose_s``
    the model's token choices on the logits (projection, mask applied, argmax or sample: the
    device's work acceptance waits for), ``capture_s`` capturing CUDA graphs and compiling,
    at the first use of a shape (taken out of the forward it happened in), ``setup_s`` the
    host's work before the first forward (the prompt, the drafter's indexes), ``wall_s`` the
    whole decode. On a GPU each device phase ends with a synchronisation, so forwards are
    timed as GPU work, not kernel launches.

    ``host_s`` is the host's work around the forwards, the sum of ``draft_s``, ``layout_s``,
    ``mask_s``, ``accept_s`` and ``bookkeeping_s`` (:data:`HOST_PARTS`);
    ``host_per_forward_s`` splits it by forward (the prompt's first), the samples its
    percentiles are read from."""

    mode: str = "program"
    forwards: int = 0
    prefill_tokens: int = 0
    generated_tokens: int = 0
    forced_tokens: int = 0
    copied_tokens: int = 0
    drafted_tokens: int = 0
    ops: int = 0
    lines_copied: int = 0
    lines_generated: int = 0
    truncated: bool = False
    prefill_s: float = 0.0
    decode_s: float = 0.0
    host_s: float = 0.0
    capture_s: float = 0.0
    wall_s: float = 0.0
    setup_s: float = 0.0
    choose_s: float = 0.0
    draft_s: float = 0.0
    layout_s: float = 0.0
    mask_s: float = 0.0
    accept_s: float = 0.0
    bookkeeping_s: float = 0.0
    host_per_forward_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class DecodeResult:
    """The program decided (``None`` for the regeneration baselines), the new text, the costs."""

    program: Program | None
    text: str
    stats: DecodeStats
