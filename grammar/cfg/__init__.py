"""Context-free masking: grammar text or JSON Schema -> an LR(1)-derived DPDA or an Earley
recogniser, both byte-level, behind the project's ``Matcher`` interface."""

from cad.grammar.cfg.compiled import CompiledGrammar, compile, fill_masks
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.matcher import CfgMatcher

__all__ = ["CfgMatcher", "CompiledGrammar", "GrammarError", "compile", "fill_masks"]
