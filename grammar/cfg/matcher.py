"""The ``Matcher`` over a compiled context-free grammar, run by the native core (either engine).

Everything per step is native: ``accept_token``, ``accept_bytes``, ``rollback``,
``is_accepting``, ``is_finished``, ``forced_bytes`` and the bitmask fill. ``allowed_tokens``
is derived from the bitmask for convenience."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cad.grammar import _native
from cad.grammar.bitmask import NativeMaskFill

if TYPE_CHECKING:
    from cad.grammar.cfg.compiled import CompiledGrammar


class CfgMatcher(NativeMaskFill, _native.CfgMatcher):
    """Incremental acceptor for one output over a :class:`CompiledGrammar`.

    The parse state is a persistent stack (DPDA) or an interned Earley state, with one history
    entry per accepted token or byte run, so ``rollback`` moves a pointer back. After the
    end-of-sequence token nothing more is allowed (``is_finished``). ``forced_bytes()`` gives
    the bytes the grammar forces from here (jump-forward): a decoder may append them without
    asking the model, tokenising them itself and feeding the tokens to ``accept_token``."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        super().__init__(compiled.native)
        self.compiled = compiled

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (or byte runs)."""
        if k < 0:
            raise ValueError(f"cannot roll back {k} accepted tokens")
        super().rollback(k)
