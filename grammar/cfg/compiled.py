"""``compile``: grammar text or JSON Schema plus a tokenizer -> a ``CompiledGrammar``.

The engine is chosen automatically: the DPDA when the grammar is LR(1) (no conflicts,
bounded automaton size), Earley otherwise."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from cad.grammar.cfg.automaton import ByteAutomaton
from cad.grammar.cfg.dpda import DpdaAutomaton
from cad.grammar.cfg.earley import EarleyAutomaton
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.grammar_ir import Grammar, lower
from cad.grammar.cfg.json_schema import DEFAULT_MAX_WHITESPACE, SchemaOptions, translate_schema
from cad.grammar.cfg.lr1 import NotLr1, build_lr1
from cad.grammar.cfg.matcher import CfgMatcher
from cad.grammar.cfg.token_masks import MaskComputer
from cad.grammar.cfg.token_table import TokenTable
from cad.grammar.cfg.transforms import simplify
from cad.grammar.vocab import Vocabulary

EngineName = Literal["earley", "dpda"]


@dataclass
class CompiledGrammar:
    """A grammar bound to a vocabulary, with its engine and shared caches.

    Every matcher made from it shares the interned configurations, the transition table
    and the mask caches, so a second request with the same grammar starts warm."""

    grammar: Grammar
    engine: EngineName
    automaton: ByteAutomaton
    tokens: TokenTable
    masks: MaskComputer
    compile_seconds: float
    lr_note: str = ""
    lr_states: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def matcher(self) -> CfgMatcher:
        """A fresh matcher at the start of the language (implements ``cad.grammar.Matcher``)."""
        return CfgMatcher(self)

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a complete sentence of the grammar (token-free check)."""
        config = self.masks.transitions.walk(self.automaton.initial(), data)
        return config >= 0 and self.automaton.is_accepting(config)


def compile(
    source: str | dict[str, Any],
    tokenizer: Any,
    *,
    format: Literal["ebnf", "json-schema"] = "ebnf",
    engine: Literal["auto", "earley", "dpda"] = "auto",
    vocab_size: int | None = None,
    compact: bool = False,
    max_whitespace: int = DEFAULT_MAX_WHITESPACE,
    ignore_unsupported: bool = False,
) -> CompiledGrammar:
    """Compile grammar text (``format="ebnf"``) or a JSON Schema (dict or JSON text,
    ``format="json-schema"``) for a Hugging Face tokenizer or a ``Vocabulary``.

    ``engine="auto"`` builds canonical LR(1) tables and uses the DPDA when there is no
    conflict, Earley otherwise; ``"dpda"`` raises GrammarError if the grammar is not LR(1).
    JSON Schema only: at most ``max_whitespace`` white-space characters between two tokens
    (``compact``: none); ``ignore_unsupported`` leaves out keywords that cannot be enforced
    (listed in ``details["ignored_keywords"]``) instead of raising GrammarError."""
    started = time.perf_counter()
    details: dict[str, Any] = {}
    if format == "ebnf":
        if not isinstance(source, str):
            raise GrammarError("an EBNF grammar must be text")
        rules = parse_ebnf(source)
    elif format == "json-schema":
        schema = json.loads(source) if isinstance(source, str) else source
        options = SchemaOptions(0 if compact else max_whitespace, ignore_unsupported)
        translated = translate_schema(schema, options)
        rules = translated.rules
        details["ignored_keywords"] = translated.ignored
    else:
        raise GrammarError(f"unknown grammar format {format!r}")
    try:
        grammar = simplify(lower(rules))
    except GrammarError as error:
        if format == "json-schema" and "derives no string" in str(error):
            raise GrammarError("the JSON Schema accepts no value") from None
        raise
    vocabulary = (
        tokenizer
        if isinstance(tokenizer, Vocabulary)
        else Vocabulary.from_tokenizer(tokenizer, vocab_size)
    )
    tokens = TokenTable.for_vocabulary(vocabulary)
    automaton: ByteAutomaton
    chosen: EngineName = "earley"
    note = ""
    states = 0
    if engine in ("auto", "dpda"):
        try:
            tables = build_lr1(grammar)
        except NotLr1 as error:
            if engine == "dpda":
                raise GrammarError(f"grammar is not LR(1): {error}") from error
            note = str(error)
        else:
            chosen, states = "dpda", len(tables.actions)
    automaton = DpdaAutomaton(tables) if chosen == "dpda" else EarleyAutomaton(grammar)
    return CompiledGrammar(
        grammar=grammar,
        engine=chosen,
        automaton=automaton,
        tokens=tokens,
        masks=MaskComputer(automaton, tokens),
        compile_seconds=time.perf_counter() - started,
        lr_note=note,
        lr_states=states,
        details=details,
    )


def fill_masks(matchers: Sequence[CfgMatcher], out: torch.Tensor | None = None) -> torch.Tensor:
    """Allowed-token masks of many matchers as one ``(B, vocab_size)`` bool tensor.

    Matchers in the same configuration of the same compiled grammar share one mask
    computation; cached masks are packed bitsets gathered into one ``(B, V/8)`` array and
    unpacked with a single vectorised call, then copied into ``out`` at once. Per matcher,
    only the lookup of its current configuration runs in Python."""
    if not matchers:
        raise ValueError("fill_masks needs at least one matcher")
    vocab_size = matchers[0].vocab_size
    unique: dict[tuple[int, int], int] = {}
    packed_rows: list[np.ndarray] = []
    order = np.empty(len(matchers), dtype=np.int64)
    for position, matcher in enumerate(matchers):
        key = (id(matcher.compiled), matcher.config)
        slot = unique.get(key)
        if slot is None:
            slot = unique[key] = len(packed_rows)
            if matcher.is_finished():
                packed_rows.append(np.zeros((vocab_size + 7) // 8, dtype=np.uint8))
            else:
                packed_rows.append(matcher.compiled.masks.packed(matcher.config))
        order[position] = slot
    stacked = np.stack(packed_rows)[order]
    bits = np.unpackbits(stacked, axis=1, count=vocab_size, bitorder="little").view(np.bool_)
    result = torch.from_numpy(bits)
    if out is None:
        return result
    out.copy_(result)
    return out
