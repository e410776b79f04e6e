"""The masking core: the program FSM and the one ``Matcher`` interface all engines share.

Everything here runs on the compiled core, ``cad.grammar._native``; it is loaded first
(:mod:`cad.grammar._loader`), so a missing or stale build stops the first import of the
package with one line that names the fix instead of running anything without it."""

from cad.grammar._loader import NATIVE_ABI, NativeCoreError, load_native
from cad.grammar.bitmask import (
    allocate_token_bitmask,
    allowed_argmax,
    allowed_ids,
    apply_token_bitmask_inplace,
    bit_values,
    bitmask_width,
    fill_next_token_bitmasks,
    masked_argmax,
    unpack_bitmask,
)
from cad.grammar.cfg import CfgMatcher, CompiledGrammar, GrammarError, compile, fill_masks
from cad.grammar.matcher import Matcher
from cad.grammar.multi_matcher import MultiProgramMatcher
from cad.grammar.program_matcher import ProgramMatcher, ProgramTokenIndex
from cad.grammar.vocab import Vocabulary

__all__ = [
    "NATIVE_ABI",
    "CfgMatcher",
    "CompiledGrammar",
    "GrammarError",
    "Matcher",
    "MultiProgramMatcher",
    "NativeCoreError",
    "ProgramMatcher",
    "ProgramTokenIndex",
    "Vocabulary",
    "allocate_token_bitmask",
    "allowed_argmax",
    "allowed_ids",
    "apply_token_bitmask_inplace",
    "bit_values",
    "bitmask_width",
    "compile",
    "fill_masks",
    "fill_next_token_bitmasks",
    "load_native",
    "masked_argmax",
    "unpack_bitmask",
]
