"""``compile``: grammar text or JSON Schema plus a tokenizer -> a ``CompiledGrammar``.

The front end turns EBNF or a JSON Schema into rules in Python, then lowers them into a
byte-level grammar and simplifies it in native code; the engines are native. The engine is
chosen automatically: the DPDA when the grammar is LR(1), Earley otherwise.
``backend="python"`` runs the pure-Python reference engines instead
(:mod:`cad.grammar.cfg.reference`), for tests and comparisons."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from cad.grammar import _native
from cad.grammar.bitmask import allocate_token_bitmask, fill_next_token_bitmasks, unpack_bitmask
from cad.grammar.cfg.ebnf_parser import parse_ebnf
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.grammar_ir import CLASS_BYTES, Grammar, symbol_budget
from cad.grammar.cfg.json_schema import (
    DEFAULT_MAX_WHITESPACE,
    SchemaOptions,
    load_schema_text,
    translate_schema,
)
from cad.grammar.cfg.lowering import lower_and_simplify
from cad.grammar.cfg.lr1 import NotLr1, build_lr1
from cad.grammar.cfg.matcher import CfgMatcher
from cad.grammar.cfg.reference import ReferenceCfgMatcher, ReferenceGrammar
from cad.grammar.cfg.token_table import TokenTable
from cad.grammar.vocab import Vocabulary

EngineName = Literal["earley", "dpda"]

MAX_LR_RULES = 4_000
"""Grammars with more rules (nonterminals, after lowering) go straight to Earley. The native
LR(1) tables keep a goto row of every rule for each state that has gotos (about one in
eleven in a schema's grammar, but up to all of 20,000 states), four bytes a cell, so their
memory can grow with rules times states: 4,000 rules may take 320 MB, 10,000 a gigabyte.
Earley's memory grows with the grammar alone. The largest LR(1) grammar among the
JSONSchemaBench schemas has about 1,600 rules."""

PRECOMPUTE_MAX_BYTES = 16 * 2**20
"""What one grammar's precompute worker may hold, 16 MiB (about 850 masks kept as rows of
Qwen2's 151,936 bits; most masks are short id lists): it never publishes a mask that would
take its masks past it, and stops once they and its scratch tables together reach it
(checked after each mask, so the scratch may pass it by one walk's growth until the worker
frees it). States past it are built on demand, as without the worker."""


@dataclass(eq=False)
class CompiledGrammar:
    """A grammar bound to a vocabulary, with its native engine and shared caches.

    Every matcher made from it shares the per-state token-mask caches (filled on first use,
    and for the DPDA also ahead of use by a background worker unless compiled with
    ``precompute=False``) and, for Earley, the interned states, so a second request with the
    same grammar starts warm. Matchers of one grammar may be filled from several threads at
    once."""

    grammar: Grammar
    engine: EngineName
    vocabulary: Vocabulary
    native: _native.CompiledCfg
    compile_seconds: float
    lr_note: str = ""
    lr_states: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        """Width of every mask."""
        return self.vocabulary.size

    def matcher(self) -> CfgMatcher:
        """A fresh matcher at the start of the language (implements ``cad.grammar.Matcher``)."""
        return CfgMatcher(self)

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a complete sentence of the grammar (token-free check)."""
        return self.native.accepts(data)

    def mask_stats(self) -> dict[str, int | bool]:
        """What the mask cache holds: ``worker_states``/``worker_bytes`` built by the
        precompute worker, ``demand_states``/``demand_bytes`` built by fills that found a state
        missing, and whether the worker is still running (``worker_running``)."""
        return dict(self.native.mask_stats())


def compile(
    source: str | dict[str, Any],
    tokenizer: Any,
    *,
    format: Literal["ebnf", "json-schema"] = "ebnf",
    engine: Literal["auto", "earley", "dpda"] = "auto",
    vocab_size: int | None = None,
    backend: Literal["native", "python"] = "native",
    compact: bool = False,
    max_whitespace: int = DEFAULT_MAX_WHITESPACE,
    ignore_unsupported: bool = False,
    precompute: bool = True,
) -> CompiledGrammar | ReferenceGrammar:
    """Compile grammar text (``format="ebnf"``) or a JSON Schema (dict or JSON text,
    ``format="json-schema"``) for a Hugging Face tokenizer or a ``Vocabulary``.

    ``engine="auto"`` builds LR(1) tables (LALR(1), or canonical LR(1) where LALR(1) has a
    conflict) and uses the DPDA when there is no conflict, Earley otherwise; ``"dpda"``
    raises GrammarError if the grammar is not LR(1).
    ``backend="python"`` gives the pure-Python reference engines (same languages and masks,
    much slower). JSON Schema only: at most ``max_whitespace`` white-space characters between
    two tokens (``compact``: none); ``ignore_unsupported`` leaves out keywords that cannot be
    enforced (listed in ``details["ignored_keywords"]``) instead of raising GrammarError.
    ``precompute``: see :func:`compile_grammar`."""
    started = time.perf_counter()
    grammar, details = front_end(
        source,
        format=format,
        compact=compact,
        max_whitespace=max_whitespace,
        ignore_unsupported=ignore_unsupported,
    )
    vocabulary = (
        tokenizer
        if isinstance(tokenizer, Vocabulary)
        else Vocabulary.for_tokenizer(tokenizer, vocab_size)
    )
    compiled = compile_grammar(
        grammar, vocabulary, engine=engine, backend=backend, precompute=precompute
    )
    compiled.compile_seconds = time.perf_counter() - started
    compiled.details = details
    return compiled


def front_end(
    source: str | dict[str, Any],
    *,
    format: Literal["ebnf", "json-schema"] = "ebnf",
    compact: bool = False,
    max_whitespace: int = DEFAULT_MAX_WHITESPACE,
    ignore_unsupported: bool = False,
    file: bool = False,
) -> tuple[Grammar, dict[str, Any]]:
    """What :func:`compile` does before it needs a tokenizer: grammar text or a JSON Schema
    to a lowered, simplified grammar, and the details (``ignored_keywords`` for a schema).
    Every front-end limit is checked here, so a command can refuse a bad grammar before it
    loads a model; :func:`compile_grammar` then binds the result to a vocabulary. JSON
    Schema only: ``file`` allows any white space around the value (a file's)."""
    details: dict[str, Any] = {}
    options = SchemaOptions(0 if compact else max_whitespace, ignore_unsupported, file)
    with _collector_paused():
        return _front_end(source, format, options, details), details


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (if it runs) while the front end works. The
    translation builds thousands of short-lived expression objects, all freed by reference
    counting once lowered; with the collector on, each 700 of them start a collection that
    walks the live ones, and now and then a full one walks the whole process (200,000
    objects, tens of milliseconds, with transformers loaded). Paused, a schema's median
    translation is about a fifth faster and no full collection lands inside it; whatever
    cycles it leaves are collected after. The collector's state is restored as it was
    found."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def compile_grammar(
    grammar: Grammar,
    vocabulary: Vocabulary,
    *,
    engine: Literal["auto", "earley", "dpda"] = "auto",
    backend: Literal["native", "python"] = "native",
    precompute: bool = True,
) -> CompiledGrammar | ReferenceGrammar:
    """Bind an already lowered and simplified grammar to ``vocabulary`` (what :func:`compile`
    does after its front end).

    It returns once the engine's tables exist; the state masks are built on first use. With
    ``precompute`` (the DPDA only) a native worker thread also builds them from then on, in
    the order a decode is likely to reach them, so that most first visits find their mask
    ready; a fill never waits for it. The worker holds at most :data:`PRECOMPUTE_MAX_BYTES`
    and stops when the grammar is dropped."""
    started = time.perf_counter()
    if backend == "python":
        compiled = _reference(grammar, vocabulary, engine)
        compiled.compile_seconds = time.perf_counter() - started
        return compiled
    if backend != "native":
        raise GrammarError(f"unknown backend {backend!r}")
    rules = grammar.nonterminal_count
    skipped_lr = ""
    if rules > MAX_LR_RULES:
        if engine == "dpda":
            raise GrammarError(
                f"the grammar has {rules:,} rules, more than the {MAX_LR_RULES:,} LR(1) tables "
                "are built for; use engine='auto' or 'earley'"
            )
        engine = "earley"
        skipped_lr = f"{rules:,} rules, more than {MAX_LR_RULES:,}: LR(1) not tried"
    try:
        native, note, states = (
            _native.compile_cfg(
                grammar.names,
                [lhs for lhs, _ in grammar.productions],
                [list(rhs) for _, rhs in grammar.productions],
                [mask.to_bytes(CLASS_BYTES, "little") for mask in grammar.terminals],
                grammar.start,
                vocabulary.native_trie,
                engine,
            )
            if grammar.native is None
            else _native.compile_lowered(grammar.native, vocabulary.native_trie, engine)
        )
    except _native.NotLr1 as error:
        raise GrammarError(f"grammar is not LR(1): {error}") from error
    if precompute:
        native.start_precompute(PRECOMPUTE_MAX_BYTES)
    return CompiledGrammar(
        grammar=grammar,
        engine=native.engine,
        vocabulary=vocabulary,
        native=native,
        compile_seconds=time.perf_counter() - started,
        lr_note=skipped_lr or note,
        lr_states=states,
    )


def _front_end(
    source: str | dict[str, Any], format: str, options: SchemaOptions, details: dict[str, Any]
) -> Grammar:
    if format == "ebnf":
        if not isinstance(source, str):
            raise GrammarError("an EBNF grammar must be text")
        rules = parse_ebnf(source)
        length = len(source)
    elif format == "json-schema":
        schema = load_schema_text(source) if isinstance(source, str) else source
        translated = translate_schema(schema, options)
        rules = translated.rules
        details["ignored_keywords"] = translated.ignored
        length = len(source) if isinstance(source, str) else translated.length
    else:
        raise GrammarError(f"unknown grammar format {format!r}")
    try:
        return lower_and_simplify(rules, symbol_budget(length))
    except GrammarError as error:
        if format == "json-schema" and "derives no string" in str(error):
            raise GrammarError("the JSON Schema accepts no value") from None
        raise


def _reference(grammar: Grammar, vocabulary: Vocabulary, engine: str) -> ReferenceGrammar:
    tokens = TokenTable.for_vocabulary(vocabulary)
    note = ""
    tables = None
    if engine in ("auto", "dpda"):
        try:
            tables = build_lr1(grammar)
        except NotLr1 as error:
            if engine == "dpda":
                raise GrammarError(f"grammar is not LR(1): {error}") from error
            note = str(error)
    return ReferenceGrammar.build(grammar, tokens, tables, note)


def fill_masks(
    matchers: Sequence[CfgMatcher | ReferenceCfgMatcher], out: torch.Tensor | None = None
) -> torch.Tensor:
    """Allowed-token masks of many matchers as one ``(B, vocab_size)`` bool tensor.

    Native matchers fill one packed bitmask together (on several threads, without the GIL),
    which is then unpacked once; a decoder should keep the bitmask instead
    (:func:`cad.grammar.fill_next_token_bitmasks`)."""
    if not matchers:
        raise ValueError("fill_masks needs at least one matcher")
    vocab_size = matchers[0].vocab_size
    bitmask = allocate_token_bitmask(len(matchers), vocab_size)
    fill_next_token_bitmasks(matchers, bitmask)
    result = unpack_bitmask(bitmask, vocab_size)
    if out is None:
        return result
    out.copy_(result)
    return out
