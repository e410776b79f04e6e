"""The masking core: the program FSM and the one ``Matcher`` interface all engines share."""

from grammar.cfg import CfgMatcher, CompiledGrammar, GrammarError, compile, fill_masks
from grammar.matcher import Matcher
from grammar.program_fsm import ProgramMatcher
from grammar.program_index import ProgramTokenIndex
from grammar.vocab import Vocabulary

__all__ = [
    "CfgMatcher",
    "CompiledGrammar",
    "GrammarError",
    "Matcher",
    "ProgramMatcher",
    "ProgramTokenIndex",
    "Vocabulary",
    "compile",
    "fill_masks",
]
