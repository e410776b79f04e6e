"""What a decode reports: progress while it runs, stats and the result when it ends."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from cad.resolver import Program


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
    path), ``decode_s`` every forward after it (and keeping accepted paths), ``host_s``
    the host's share (drafting, masks and acceptance, with the token choices they wait for),
    ``capture_s`` capturing CUDA graphs and compiling, at the first use of a shape (taken
    out of the forward it happened in), ``wall_s`` the whole decode. On a GPU each phase
    ends with a synchronisation, so forwards are timed as GPU work, not kernel launches."""

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

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class DecodeResult:
    """The program decided (``None`` for the regeneration baselines), the new text, the costs."""

    program: Program | None
    text: str
    stats: DecodeStats
