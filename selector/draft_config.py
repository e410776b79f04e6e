"""The draft-graph configuration: which candidate sources to draft, how long, how many nodes
to verify per forward, and the calibrated acceptance rate of each source at each depth.

A configuration is plain JSON (``training/calibrate.py`` writes one); the package ships a
default, ``selector/draft_config.json``, calibrated on HumanEvalPack-Fix with the target forced.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

DEFAULT_CONFIG = "draft_config.json"
SOURCE_KINDS = ("aligned", "ngram", "topk")


def depth_bucket(depth: int) -> int:
    """Depths share rates in doubling buckets (1, 2, 3–4, 5–8, …): deep positions are rare
    in traces, so one rate per octave keeps each estimate backed by enough samples."""
    return 0 if depth <= 1 else math.ceil(math.log2(depth))


def source_key(kind: str, rank: int) -> str:
    """The key of a candidate source in ``rates``, e.g. ``aligned:0`` or ``ngram:2``."""
    return f"{kind}:{rank}"


@dataclass(frozen=True)
class DraftConfig:
    """How drafts are built and pruned.

    ``aligned`` continuations start at the aligned document position plus 0, 1, … offsets
    (offset 0 is "the model keeps copying", larger offsets hypothesise a replaced or deleted
    token); ``ngram`` continuations start after other occurrences of the output's last
    n-gram; ``top_k`` alternatives come from the model's own logits at the last branching
    point. ``rates[key][b]`` is the probability that a candidate of source ``key`` is accepted
    at a depth in bucket ``b`` given that it was accepted up to the depth before."""

    draft_length: int = 128
    budget: int = 96
    aligned: int = 2
    ngram: int = 2
    top_k: int = 0
    max_ngram: int = 4
    min_ngram: int = 2
    default_rate: float = 0.05
    rates: dict[str, list[float]] = field(default_factory=dict)

    def rate(self, key: str, depth: int) -> float:
        """Calibrated acceptance of ``key`` at ``depth`` (1 = the first drafted token)."""
        table = self.rates.get(key)
        if not table:
            return self.default_rate
        return table[min(depth_bucket(depth), len(table) - 1)]

    def to_json(self) -> str:
        """Stable, human-readable JSON."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DraftConfig:
        """Parse a configuration; unknown keys are an error, so a typo never goes unnoticed."""
        data = json.loads(text)
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown draft-config keys: {', '.join(sorted(unknown))}")
        rates = {str(k): [float(x) for x in v] for k, v in data.pop("rates", {}).items()}
        return cls(**data, rates=rates)


def load_draft_config(path: str | Path | None = None) -> DraftConfig:
    """Read a configuration from ``path``, or the calibrated default shipped in the package."""
    if path is None:
        text = resources.files("selector").joinpath(DEFAULT_CONFIG).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    return DraftConfig.from_json(text)
