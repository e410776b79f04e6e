"""Context-free masking: grammar text or JSON Schema -> an LR(1)-derived DPDA or an Earley
recogniser, both byte-level, behind the project's ``Matcher`` interface."""

from cad.grammar.cfg.compiled import (
    CompiledGrammar,
    compile,
    compile_grammar,
    fill_masks,
    front_end,
)
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.matcher import CfgMatcher
from cad.grammar.cfg.reference import ReferenceCfgMatcher, ReferenceGrammar

__all__ = [
    "CfgMatcher",
    "CompiledGrammar",
    "GrammarError",
    "ReferenceCfgMatcher",
    "ReferenceGrammar",
    "compile",
    "compile_grammar",
    "fill_masks",
    "front_end",
]
