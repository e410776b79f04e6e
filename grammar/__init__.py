"""The masking core: the program FSM and the one ``Matcher`` interface all engines share."""

from grammar.matcher import Matcher
from grammar.program_fsm import ProgramMatcher, ProgramTokenIndex
from grammar.vocab import Vocabulary

__all__ = ["Matcher", "ProgramMatcher", "ProgramTokenIndex", "Vocabulary"]
