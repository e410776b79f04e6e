"""The masking core: the program FSM and the one ``Matcher`` interface all engines share."""

from cad.grammar.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_width,
    fill_next_token_bitmasks,
    unpack_bitmask,
)
from cad.grammar.cfg import CfgMatcher, CompiledGrammar, GrammarError, compile, fill_masks
from cad.grammar.matcher import Matcher
from cad.grammar.multi_matcher import MultiProgramMatcher
from cad.grammar.program_matcher import ProgramMatcher, ProgramTokenIndex
from cad.grammar.vocab import Vocabulary

__all__ = [
    "CfgMatcher",
    "CompiledGrammar",
    "GrammarError",
    "Matcher",
    "MultiProgramMatcher",
    "ProgramMatcher",
    "ProgramTokenIndex",
    "Vocabulary",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_width",
    "compile",
    "fill_masks",
    "fill_next_token_bitmasks",
    "unpack_bitmask",
]
