"""Timing a decode by phase, honestly on a GPU: each device phase ends with a
synchronisation, so a forward is timed as the GPU work it queued, not as its kernel
launches, and the host phase after it does not pay for it.

Host phases (:data:`cad.selector.stats.HOST_PARTS`) end without a synchronisation: the host
work they time never waits for the device (a token choice that reads the device back is a
device phase of its own, ``choose``), and a synchronisation there would stall the overlap of
host work with a forward still running."""

from __future__ import annotations

import time

import torch

from cad.selector.loading import LoadedModel
from cad.selector.runtime import installed
from cad.selector.stats import HOST_PARTS, DecodeStats


class PhaseClock:
    """Adds the time since the last phase ended to one of ``stats``' phase fields; time the
    model's runtime spent capturing graphs or compiling meanwhile goes to ``capture_s``
    instead. Started when made, or at ``started`` (a ``time.perf_counter()`` reading: the
    decode's own start, so that setting up counts from there); host time accumulates per
    forward until :meth:`next_forward` records it."""

    def __init__(
        self, loaded: LoadedModel, stats: DecodeStats, started: float | None = None
    ) -> None:
        self.device = loaded.device
        self.stats = stats
        self.runtime = installed(loaded.model)
        self._captured = self._capture_total()
        self._last = time.perf_counter() if started is None else started
        self._forward_host = 0.0

    def _capture_total(self) -> float:
        return self.runtime.capture_s if self.runtime is not None else 0.0

    def _lap(self, synchronize: bool) -> float:
        """Seconds since the last phase ended, less the capture time within them."""
        if synchronize and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        total = self._capture_total()
        captured, self._captured = total - self._captured, total
        self.stats.capture_s += captured
        return max(elapsed - captured, 0.0)

    def host(self, part: str = "bookkeeping") -> None:
        """End a host phase of kind ``part`` (one of :data:`HOST_PARTS`)."""
        if part not in HOST_PARTS:
            raise ValueError(f"unknown host phase {part!r}")
        elapsed = self._lap(synchronize=False)
        name = f"{part}_s"
        setattr(self.stats, name, getattr(self.stats, name) + elapsed)
        self.stats.host_s += elapsed
        self._forward_host += elapsed

    def setup(self) -> None:
        """End the host's work before the first forward's drafting."""
        self.stats.setup_s += self._lap(synchronize=False)

    def choose(self) -> None:
        """End a token choice on the logits (device work acceptance waits for)."""
        self.stats.choose_s += self._lap(synchronize=True)

    def forward(self, *, prefill: bool = False) -> None:
        """End a forward phase: the prompt's (``prefill``) or a later one."""
        if prefill:
            self.stats.prefill_s += self._lap(synchronize=True)
        else:
            self.stats.decode_s += self._lap(synchronize=True)

    def next_forward(self) -> None:
        """Record the host time of the forward that ended (its drafting, layout, acceptance
        and bookkeeping) as one sample of ``host_per_forward_s``."""
        self.stats.host_per_forward_s.append(self._forward_host)
        self._forward_host = 0.0
