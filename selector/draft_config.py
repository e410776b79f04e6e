"""The draft-graph configuration: which candidate sources to draft, how long each may be, how
many nodes to verify per forward, and the calibrated acceptance rate of each source at each
depth.

A configuration is plain JSON (``cad calibrate`` writes one); the package ships a default,
``selector/draft_config.json``, calibrated on HumanEvalPack-Fix and release-diff edits with
the target forced.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

DEFAULT_CONFIG = "draft_config.json"
SOURCE_KINDS = ("aligned", "ngram", "output", "topk")
STATES = ("copying", "editing")


def state_name(copying: bool) -> str:
    """The drafting state's key in ``rates``."""
    return STATES[0] if copying else STATES[1]


class DraftConfigError(ValueError):
    """A configuration that cannot be used; the message is one line."""


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
    n-gram; ``output`` continuations repeat the output after earlier occurrences of its last
    n-gram; ``top_k`` alternatives come from the model's own logits at the last branching
    point. A candidate of source ``key`` is at most ``lengths[key]`` tokens long
    (``draft_length`` when the source has no entry). ``rates[state][key][b]`` is the
    probability that such a candidate is accepted at a depth in bucket ``b`` given that it was
    accepted up to the depth before, while the decoder is ``copying`` the document or
    ``editing`` it (the last token did or did not follow the alignment). ``budget`` is how
    many drafted nodes one forward verifies at most; nodes whose reach (the calibrated
    probability that verification accepts them) is below ``min_reach`` are not verified, so
    a forward is small when the drafts are doubtful."""

    draft_length: int = 128
    budget: int = 64
    min_reach: float = 0.0
    aligned: int = 2
    ngram: int = 2
    output: int = 0
    top_k: int = 0
    max_ngram: int = 4
    min_ngram: int = 2
    default_rate: float = 0.05
    lengths: dict[str, int] = field(default_factory=dict)
    rates: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    calibrated_on: str = ""

    def __post_init__(self) -> None:
        counts = (self.draft_length, self.budget, self.aligned, self.ngram, self.output, self.top_k)
        if min(counts) < 0 or self.draft_length < 1:
            raise DraftConfigError("draft_length must be positive and the counts non-negative")
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise DraftConfigError("need 1 <= min_ngram <= max_ngram")
        if not 0.0 <= self.min_reach < 1.0:
            raise DraftConfigError("min_reach must be in [0, 1)")
        if not 0.0 < self.default_rate <= 1.0:
            raise DraftConfigError("default_rate must be in (0, 1]")
        for state, tables in self.rates.items():
            if state not in STATES:
                raise DraftConfigError(f"rates: unknown state {state!r} (use {', '.join(STATES)})")
            for key, table in tables.items():
                if not table or not all(0.0 < r <= 1.0 for r in table):
                    raise DraftConfigError(
                        f"rates[{state!r}][{key!r}] must be a non-empty list in (0, 1]"
                    )
        if any(n < 1 for n in self.lengths.values()):
            raise DraftConfigError("lengths must be positive")

    def rate(self, key: str, depth: int, copying: bool = False) -> float:
        """Calibrated acceptance of ``key`` at ``depth`` (1 = the first drafted token) in the
        given drafting state."""
        table = self.rates.get(state_name(copying), {}).get(key)
        if not table:
            return self.default_rate
        return table[min(depth_bucket(depth), len(table) - 1)]

    def length(self, key: str) -> int:
        """How many tokens a candidate of source ``key`` may have."""
        return min(self.lengths.get(key, self.draft_length), self.draft_length)

    def to_json(self) -> str:
        """Stable, human-readable JSON."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DraftConfig:
        """Parse a configuration; unknown keys or ill-typed values are a ``DraftConfigError``,
        so a typo never goes unnoticed."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DraftConfigError(f"not JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise DraftConfigError("expected a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise DraftConfigError(f"unknown draft-config keys: {', '.join(sorted(unknown))}")
        try:
            rates = {
                str(state): {str(k): [float(x) for x in v] for k, v in tables.items()}
                for state, tables in data.pop("rates", {}).items()
            }
            lengths = {str(k): int(v) for k, v in data.pop("lengths", {}).items()}
            return cls(**data, rates=rates, lengths=lengths)
        except DraftConfigError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise DraftConfigError(f"ill-typed value ({exc})") from None


def load_draft_config(path: str | Path | None = None) -> DraftConfig:
    """Read a configuration from ``path``, or the calibrated default shipped in the package;
    a file that cannot be read or parsed raises ``DraftConfigError`` naming it."""
    if path is None:
        text = resources.files("cad.selector").joinpath(DEFAULT_CONFIG).read_text(encoding="utf-8")
        return DraftConfig.from_json(text)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DraftConfigError(f"{path}: cannot read ({exc})") from None
    try:
        return DraftConfig.from_json(text)
    except DraftConfigError as exc:
        raise DraftConfigError(f"{path}: {exc}") from None
