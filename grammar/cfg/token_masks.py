"""Allowed-token masks for any ``ByteAutomaton``, computed over the whole vocabulary at once.

* Transition table: ``(config, byte) -> config`` memoised in one numpy array
  (``rows[config, byte]``); entries that are DEAD are the rejection-prefix cache: once a
  prefix is known to be rejected from a configuration, every token (and every extension)
  through it is dropped by a table lookup, with no parsing.
* Lockstep simulation: all candidate tokens advance one byte position at a time through
  that table (numpy gathers); only (config, byte) pairs never seen before call the engine.
* Context-independent mask cache: per *local* configuration (DPDA: top LR state; Earley:
  the newest sets), the tokens accepted without looking further down are stored as a
  bitset, and the tokens that need the rest of the context as a row list. At run time only
  those context-dependent rows are simulated from the full configuration.
* State cache: the final packed mask per full configuration (LRU), so a repeated parse
  situation costs one dictionary lookup.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from cad.grammar.cfg.automaton import DEAD, DEPENDENT, UNKNOWN, ByteAutomaton
from cad.grammar.cfg.token_table import TokenTable


class TransitionTable:
    """Memoised byte transitions of one automaton."""

    def __init__(self, automaton: ByteAutomaton) -> None:
        self.automaton = automaton
        self.rows = np.full((1024, 256), UNKNOWN, dtype=np.int32)

    def _grow(self) -> None:
        needed = self.automaton.size()
        if needed > len(self.rows):
            capacity = max(needed, 2 * len(self.rows))
            grown = np.full((capacity, 256), UNKNOWN, dtype=np.int32)
            grown[: len(self.rows)] = self.rows
            self.rows = grown

    def next(self, config: int, byte: int) -> int:
        """One transition, computed by the engine on first use."""
        self._grow()
        found = int(self.rows[config, byte])
        if found == UNKNOWN:
            found = self.automaton.step(config, byte)
            self._grow()
            self.rows[config, byte] = found
        return found

    def walk(self, config: int, data: bytes) -> int:
        """Run ``data`` from ``config``: the final config, DEAD or DEPENDENT."""
        for byte in data:
            config = self.next(config, byte)
            if config < 0:
                return config
        return config

    def gather(self, configs: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Vectorised transitions; missing pairs are computed once each."""
        self._grow()
        result = self.rows[configs, values]
        missing = result == UNKNOWN
        if missing.any():
            pairs = np.unique(configs[missing].astype(np.int64) * 256 + values[missing])
            for pair in pairs.tolist():
                self.next(pair >> 8, pair & 255)
            result = self.rows[configs, values]
        return result


@dataclass(frozen=True)
class LocalMask:
    """Context-independent part of a mask: accepted bits and rows still to decide."""

    accepted: np.ndarray
    dependent: np.ndarray


class MaskComputer:
    """Masks for one automaton over one vocabulary, with all caches of the module docstring."""

    def __init__(
        self, automaton: ByteAutomaton, tokens: TokenTable, *, state_cache_size: int = 4096
    ) -> None:
        self.automaton = automaton
        self.tokens = tokens
        self.transitions = TransitionTable(automaton)
        self.local_masks: dict[int, LocalMask] = {}
        self.state_masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self.state_cache_size = state_cache_size
        self.stats = {"state_hits": 0, "local_hits": 0, "computed": 0}

    def packed(self, config: int) -> np.ndarray:
        """Packed little-endian bitset of allowed token ids at ``config`` (EOS included
        when the input is a sentence). Do not modify: it is cached."""
        cached = self.state_masks.get(config)
        if cached is not None:
            self.state_masks.move_to_end(config)
            self.stats["state_hits"] += 1
            return cached
        local = self.automaton.local(config)
        part = self.local_masks.get(local)
        if part is None:
            part = self.local_masks[local] = self._local_mask(local)
        else:
            self.stats["local_hits"] += 1
        self.stats["computed"] += 1
        packed = part.accepted
        if part.dependent.size:
            accepted, _ = self.simulate(config, part.dependent)
            if accepted.size:
                packed = packed | self.tokens.pack(accepted)
        eos = self.tokens.eos_token_id
        if eos is not None and self.automaton.is_accepting(config):
            packed = packed.copy()
            packed[eos >> 3] |= 1 << (eos & 7)
        self.state_masks[config] = packed
        if len(self.state_masks) > self.state_cache_size:
            self.state_masks.popitem(last=False)
        return packed

    def mask(self, config: int) -> torch.Tensor:
        """The allowed-token mask as a fresh ``torch.bool`` tensor of shape (vocab_size,)."""
        bits = np.unpackbits(self.packed(config), count=self.tokens.vocab_size, bitorder="little")
        return torch.from_numpy(bits.view(np.bool_))

    def _local_mask(self, local: int) -> LocalMask:
        first_bytes = [b for b in range(256) if self.transitions.next(local, b) != DEAD]
        if first_bytes:
            candidates = np.concatenate([self.tokens.by_first_byte[b] for b in first_bytes])
        else:
            candidates = np.zeros(0, dtype=np.int64)
        accepted, dependent = self.simulate(local, candidates)
        return LocalMask(self.tokens.pack(accepted), dependent)

    def simulate(self, config: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Advance the token rows from ``config`` in lockstep: (accepted rows, rows whose
        fate depends on context the configuration does not have)."""
        tokens = self.tokens
        states = np.full(rows.shape, config, dtype=np.int32)
        accepted: list[np.ndarray] = []
        dependent: list[np.ndarray] = []
        position = 0
        while rows.size:
            values = tokens.data[tokens.offsets[rows] + position]
            states = self.transitions.gather(states, values)
            undecided = states == DEPENDENT
            if undecided.any():
                dependent.append(rows[undecided])
            alive = states >= 0
            rows, states = rows[alive], states[alive]
            position += 1
            finished = tokens.lengths[rows] == position
            accepted.append(rows[finished])
            rows, states = rows[~finished], states[~finished]
        empty = np.zeros(0, dtype=np.int64)
        return (
            np.concatenate(accepted) if accepted else empty,
            np.concatenate(dependent) if dependent else empty,
        )
