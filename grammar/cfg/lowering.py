"""Lowering as the front ends run it: rules -> a byte-level grammar, cleaned up, in one
native call.

The native core follows :func:`~cad.grammar.cfg.grammar_ir.lower` and
:func:`~cad.grammar.cfg.transforms.simplify` step by step and numbers nonterminals and
terminals alike, so both give equal grammars; the Python pair stays as the reference of the
differential tests."""

from __future__ import annotations

from cad.grammar import _native
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.grammar_ir import MAX_SYMBOLS, Grammar
from cad.grammar.cfg.syntax_tree import RuleSet


def lower_and_simplify(rule_set: RuleSet, max_symbols: int | None = None) -> Grammar:
    """``simplify(lower(rule_set, max_symbols))``, computed natively and kept in native
    form (see :meth:`Grammar.from_native`). GrammarError past ``max_symbols`` symbols (None:
    ``MAX_SYMBOLS``) or when the start rule derives no string; KeyError for a reference to
    an undefined rule, as the Python lowering raises."""
    budget = MAX_SYMBOLS if max_symbols is None else max_symbols
    try:
        native = _native.lower_rules(rule_set.rules, rule_set.start, budget)
    except _native.LoweringError as error:
        raise GrammarError(str(error)) from None
    return Grammar.from_native(native)
