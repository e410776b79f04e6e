"""Timing a decode by phase, honestly on a GPU: each phase ends with a synchronisation, so
a forward is timed as the GPU work it queued, not as its kernel launches, and the next
phase does not pay for it."""

from __future__ import annotations

import time

import torch

from cad.selector.loading import LoadedModel
from cad.selector.runtime import installed
from cad.selector.stats import DecodeStats


class PhaseClock:
    """Adds the time since the last phase ended to one of ``stats``' phase fields
    (``prefill_s``, ``decode_s``, ``host_s``); time the model's runtime spent capturing
    graphs or compiling meanwhile goes to ``capture_s`` instead. Started when made."""

    def __init__(self, loaded: LoadedModel, stats: DecodeStats) -> None:
        self.device = loaded.device
        self.stats = stats
        self.runtime = installed(loaded.model)
        self._captured = self._capture_total()
        self._last = self._now()

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _capture_total(self) -> float:
        return self.runtime.capture_s if self.runtime is not None else 0.0

    def _lap(self) -> float:
        """Seconds since the last phase ended, less the capture time within them."""
        now = self._now()
        elapsed, self._last = now - self._last, now
        total = self._capture_total()
        captured, self._captured = total - self._captured, total
        self.stats.capture_s += captured
        return max(elapsed - captured, 0.0)

    def host(self) -> None:
        """End a host phase (drafting, masks, acceptance)."""
        self.stats.host_s += self._lap()

    def forward(self, *, prefill: bool = False) -> None:
        """End a forward phase: the prompt's (``prefill``) or a later one."""
        if prefill:
            self.stats.prefill_s += self._lap()
        else:
            self.stats.decode_s += self._lap()
