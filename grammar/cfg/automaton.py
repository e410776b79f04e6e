"""What the token-mask kernel needs from an engine: a deterministic step over bytes on
interned configuration ids.

Both engines intern their parser configurations (an Earley state after pruning, a DPDA
stack) as dense ints, so the kernel can memoise ``(config, byte) -> config`` in one table
and run every token of the vocabulary through it with numpy."""

from __future__ import annotations

from typing import Protocol

DEAD = -1
"""The byte is rejected: no sentence of the language has this prefix."""
UNKNOWN = -2
"""Table entry not computed yet."""
DEPENDENT = -3
"""A local configuration cannot decide: the answer needs the context it was cut from."""


class ByteAutomaton(Protocol):
    """A parser seen as a lazily built deterministic automaton over bytes."""

    def initial(self) -> int:
        """The configuration before any input."""
        ...

    def step(self, config: int, byte: int) -> int:
        """The configuration after ``byte``, or DEAD, or DEPENDENT (local configs only)."""
        ...

    def is_accepting(self, config: int) -> bool:
        """Whether the input so far is a complete sentence."""
        ...

    def local(self, config: int) -> int:
        """The configuration cut down to its context-independent part (the DPDA's top state,
        Earley's last few sets), shared by every config that agrees on that part."""
        ...

    def size(self) -> int:
        """How many configurations have been interned (ids are ``0 .. size-1``)."""
        ...
