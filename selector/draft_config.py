"""The draft-graph configuration: which candidate sources to draft, how long each may be, how
many nodes to verify per forward, and the calibrated acceptance rate of each source at each
depth.

A configuration is plain JSON (``cad calibrate`` writes one); the package ships two defaults,
calibrated on HumanEvalPack-Fix and release-diff edits with the target forced:
``selector/draft_config.json`` for accelerators, where a forward of 96 tokens costs about
what a forward of one does, so every forward drafts its whole budget; and
``selector/draft_config_cpu.json`` for CPUs, where a forward's cost grows with the tokens it
verifies, so unlikely drafted nodes (reach below 0.1) are left out.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import torch

DEFAULT_CONFIG = "draft_config.json"
CPU_CONFIG = "draft_config_cpu.json"
SOURCE_KINDS = ("aligned", "ngram", "output", "topk")
STATES = ("copying", "editing")
OP_KINDS = ("copy", "gen", "end")
PREVIOUS = ("start", "copy", "gen", "past_end")
START_REACH = 3
"""Start-line offsets from the reached line that the program prior prices one by one."""


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


def octave_share(table: list[float], value: int) -> float:
    """The probability of ``value`` (>= 1) under a histogram over doubling buckets
    (1, 2, 3-4, 5-8, ...), spread evenly inside its bucket; 0 beyond the table."""
    bucket = depth_bucket(value)
    if bucket >= len(table):
        return 0.0
    width = 1 if bucket == 0 else 2 ** (bucket - 1)
    return table[bucket] / width


@dataclass(frozen=True)
class ProgramPrior:
    """Probabilities that price program drafts (what ``cad calibrate`` measures on oracle
    programs).

    ``next_op[previous][kind]``: the next op's kind (``copy``, ``gen``, ``end``) after the
    program start, a copy, a gen, or once the output has reached the document's end.
    ``start_offsets``: where a copy after the start or a gen begins, relative to the line the
    output has reached (offsets -3 to 3); further on, and after a copy (which never goes on
    where it ended), ``skip_lengths`` over doubling buckets of the lines skipped. ``to_end``:
    a copy runs to the document's last line; otherwise ``copy_lengths`` over doubling buckets
    of its line count. ``gen_close``: a gen ends after the line being written rather than
    going on to the next. ``body_rate``: a drafted token of a gen body is accepted, given its
    predecessor was. ``min_reach``: drafted nodes less likely than this are not verified.
    ``follow_reach``: the ops after a drafted op (and the copied text they need) are drafted
    only when that op is at least this likely; ``follow_ops``: at most this many completed
    ops per level are followed so; ``follow_discount``: what a node one op further ahead is
    worth per unit of probability when pruning (finishing the op in progress, say every digit
    of its end line, comes before guessing the ops after it).

    How a gen body's line goes on (the shares of the guesses, before they are normalised):
    ``line_shares`` for rewriting the line the output has reached and the one after it;
    ``resume_shares`` for rejoining that line after the change, by a tail of at least 6
    bytes and by a shorter one; ``skip_shares`` for going on in it after replacing as many
    bytes as were written, 0, 1, 2 or 3 bytes, one fewer and one more; ``anchor_share`` for
    going on after the written tail's nearest other occurrence in the document;
    ``repeat_share`` for repeating what followed it in the program's own gens."""

    next_op: dict[str, dict[str, float]] = field(
        default_factory=lambda: {
            "start": {"copy": 0.97, "gen": 0.03, "end": 0.0},
            "copy": {"copy": 0.18, "gen": 0.82, "end": 0.0},
            "gen": {"copy": 0.98, "gen": 0.0, "end": 0.02},
            "past_end": {"copy": 0.04, "gen": 0.0, "end": 0.96},
        }
    )
    start_offsets: list[float] = field(
        default_factory=lambda: [0.01, 0.02, 0.14, 0.5, 0.07, 0.02, 0.02]
    )
    skip_lengths: list[float] = field(
        default_factory=lambda: [0.29, 0.07, 0.08, 0.07, 0.07, 0.07, 0.08, 0.09, 0.09, 0.08]
    )
    to_end: float = 0.18
    copy_lengths: list[float] = field(
        default_factory=lambda: [0.35, 0.12, 0.11, 0.11, 0.09, 0.06, 0.05, 0.04, 0.04, 0.03]
    )
    gen_close: float = 0.47
    body_rate: float = 0.9
    min_reach: float = 0.001
    follow_reach: float = 0.01
    follow_ops: int = 3
    follow_discount: float = 0.3
    line_shares: list[float] = field(default_factory=lambda: [0.8, 0.2])
    resume_shares: list[float] = field(default_factory=lambda: [0.7, 0.35])
    skip_shares: list[float] = field(
        default_factory=lambda: [0.2, 0.05, 0.05, 0.03, 0.03, 0.05, 0.05]
    )
    anchor_share: float = 0.15
    repeat_share: float = 0.15

    def __post_init__(self) -> None:
        for previous, kinds in self.next_op.items():
            if previous not in PREVIOUS or set(kinds) - set(OP_KINDS):
                raise DraftConfigError(
                    f"program.next_op: use {', '.join(PREVIOUS)} with {', '.join(OP_KINDS)}"
                )
            if any(not 0.0 <= p <= 1.0 for p in kinds.values()):
                raise DraftConfigError("program.next_op: probabilities must be in [0, 1]")
        if len(self.start_offsets) != 2 * START_REACH + 1:
            raise DraftConfigError(f"program.start_offsets: need {2 * START_REACH + 1} values")
        tables = (*self.start_offsets, *self.skip_lengths, *self.copy_lengths)
        guesses = (*self.line_shares, *self.resume_shares, *self.skip_shares)
        shares = (self.to_end, self.gen_close, self.body_rate, self.follow_discount, *tables)
        shares += (*guesses, self.anchor_share, self.repeat_share)
        if not all(0.0 <= p <= 1.0 for p in shares) or sum(self.start_offsets) > 1.0:
            raise DraftConfigError("program: probabilities must be in [0, 1]")
        if not 0.0 <= self.min_reach <= self.follow_reach <= 1.0:
            raise DraftConfigError("program: need 0 <= min_reach <= follow_reach <= 1")
        if self.follow_ops < 0:
            raise DraftConfigError("program.follow_ops: must not be negative")
        sizes = {"line_shares": 2, "resume_shares": 2, "skip_shares": 7}
        for name, size in sizes.items():
            if len(getattr(self, name)) != size:
                raise DraftConfigError(f"program.{name}: need {size} values")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramPrior:
        """Parse the ``program`` part of a configuration; unknown keys or ill-typed values
        are a ``DraftConfigError``."""
        if not isinstance(data, dict):
            raise DraftConfigError("program: expected a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise DraftConfigError(f"unknown program keys: {', '.join(sorted(unknown))}")
        try:
            values: dict[str, Any] = {}
            for key, value in data.items():
                if key == "next_op":
                    values[key] = {
                        str(previous): {str(kind): float(p) for kind, p in kinds.items()}
                        for previous, kinds in value.items()
                    }
                elif isinstance(value, list):
                    values[key] = [float(x) for x in value]
                elif key == "follow_ops":
                    if isinstance(value, float) and not value.is_integer():
                        raise ValueError("follow_ops must be a whole number")
                    values[key] = int(value)
                else:
                    values[key] = float(value)
            return cls(**values)
        except DraftConfigError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise DraftConfigError(f"program: ill-typed value ({exc})") from None

    def start_line_mass(self, cursor: int, start: int, after_copy: bool) -> float:
        """The probability that a copy starts at line ``start`` when the output has reached
        line ``cursor``."""
        offset = start - cursor
        if after_copy:
            return octave_share(self.skip_lengths, offset) if offset >= 1 else 0.0
        if abs(offset) <= START_REACH:
            return self.start_offsets[offset + START_REACH]
        if offset < 0:
            return 0.0
        beyond = 1.0 - sum(self.start_offsets)
        return beyond * octave_share(self.skip_lengths, offset - START_REACH)

    def end_line_mass(self, start: int, end: int, n_lines: int) -> float:
        """The probability that a copy starting at line ``start`` ends at line ``end``."""
        if end == n_lines:
            return self.to_end
        return (1.0 - self.to_end) * octave_share(self.copy_lengths, end - start + 1)


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
    a forward is small when the drafts are doubtful. ``program_budget`` is the budget of
    program mode's draft trees (``None``: ``budget``): on a CPU, where a forward costs in
    proportion to its tokens, program mode's trees pay for copied text they guess wrong, and
    a smaller budget decodes faster."""

    draft_length: int = 128
    budget: int = 64
    program_budget: int | None = None
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
    program: ProgramPrior = field(default_factory=lambda: ProgramPrior())
    calibrated_on: str = ""

    def __post_init__(self) -> None:
        counts = (self.draft_length, self.budget, self.aligned, self.ngram, self.output, self.top_k)
        if min(counts) < 0 or self.draft_length < 1:
            raise DraftConfigError("draft_length must be positive and the counts non-negative")
        if self.program_budget is not None and (
            isinstance(self.program_budget, bool)
            or not isinstance(self.program_budget, int)
            or self.program_budget < 0
        ):
            raise DraftConfigError("program_budget must be a non-negative integer or null")
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

    @property
    def program_draft_budget(self) -> int:
        """Drafted nodes one forward of program mode verifies at most."""
        return self.budget if self.program_budget is None else self.program_budget

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
            program = ProgramPrior.from_dict(data.pop("program", {}))
            return cls(**data, rates=rates, lengths=lengths, program=program)
        except DraftConfigError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise DraftConfigError(f"ill-typed value ({exc})") from None


def load_draft_config(
    path: str | Path | None = None, *, device: torch.device | str | None = None
) -> DraftConfig:
    """Read a configuration from ``path``, or the calibrated default shipped in the package
    for ``device`` (the CPU one on a CPU, else the accelerator one); a file that cannot be
    read or parsed raises ``DraftConfigError`` naming it."""
    if path is None:
        on_cpu = device is not None and torch.device(device).type == "cpu"
        name = CPU_CONFIG if on_cpu else DEFAULT_CONFIG
        text = resources.files("cad.selector").joinpath(name).read_text(encoding="utf-8")
        return DraftConfig.from_json(text)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DraftConfigError(f"{path}: cannot read ({exc})") from None
    try:
        return DraftConfig.from_json(text)
    except DraftConfigError as exc:
        raise DraftConfigError(f"{path}: {exc}") from None
