"""Test oracles: sentence sampling, mutations, a lark reference parser, brute-force masks."""

from __future__ import annotations

import random

import numpy as np
from lark import Lark
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError

from cad.grammar.cfg.automaton import DEAD
from cad.grammar.cfg.grammar_ir import Grammar, mask_bytes, terminal_index
from cad.grammar.cfg.lr1 import byte_atoms


def sample_sentence(grammar: Grammar, rng: random.Random, depth_budget: int = 10) -> bytes:
    """A random sentence: random productions until ``depth_budget``, then the shortest."""
    shortest = _shortest_lengths(grammar)
    cheapest = [
        min(grammar.by_lhs[n], key=lambda p: _rhs_length(grammar.productions[p][1], shortest))
        for n in range(len(grammar.names))
    ]
    out = bytearray()
    stack: list[tuple[int, int]] = [(grammar.start, 0)]
    while stack:
        symbol, depth = stack.pop()
        if symbol < 0:
            out.append(rng.choice(mask_bytes(grammar.terminals[terminal_index(symbol)])))
            continue
        options = grammar.by_lhs[symbol]
        production = rng.choice(options) if depth < depth_budget else cheapest[symbol]
        for child in reversed(grammar.productions[production][1]):
            stack.append((child, depth + 1))
    return bytes(out)


def _rhs_length(rhs: tuple[int, ...], shortest: list[float]) -> float:
    return sum(1 if s < 0 else shortest[s] for s in rhs)


def _shortest_lengths(grammar: Grammar) -> list[float]:
    shortest = [float("inf")] * len(grammar.names)
    changed = True
    while changed:
        changed = False
        for lhs, rhs in grammar.productions:
            length = _rhs_length(rhs, shortest)
            if length < shortest[lhs]:
                shortest[lhs] = length
                changed = True
    return shortest


def mutate(data: bytes, rng: random.Random, alphabet: bytes) -> bytes:
    """One random edit: delete, insert, replace, duplicate a slice, or truncate."""
    kind = rng.randrange(5)
    position = rng.randrange(len(data) + 1)
    byte = bytes([rng.choice(alphabet)])
    if kind == 0 and data:
        position = min(position, len(data) - 1)
        return data[:position] + data[position + 1 :]
    if kind == 1:
        return data[:position] + byte + data[position:]
    if kind == 2 and data:
        position = min(position, len(data) - 1)
        return data[:position] + byte + data[position + 1 :]
    if kind == 3 and data:
        start = rng.randrange(len(data))
        return data[:position] + data[start : start + rng.randint(1, 4)] + data[position:]
    return data[:position]


def grammar_alphabet(grammar: Grammar) -> bytes:
    """Bytes the grammar uses, plus a few it does not."""
    used = sorted({b for mask in grammar.terminals for b in mask_bytes(mask) if b < 128})
    return bytes([*used, 0x00, 0x7F, 0xC3, 0xFF, ord(" ")])


class LarkReference:
    """The same byte-level grammar run by lark over latin-1 text (every byte one
    character). Byte classes are split into disjoint atoms so lark's basic lexer is
    deterministic. lark's LALR is used only when ``lalr_safe`` (the grammar is LR(1)):
    lark resolves shift/reduce conflicts silently, which would change the language."""

    def __init__(self, grammar: Grammar, *, lalr_safe: bool) -> None:
        atom_of_byte, terminal_atoms = byte_atoms(grammar.terminals)
        lines = [f"start: n{grammar.start}"]
        for atom in range(max(atom_of_byte) + 1):
            members = "".join(_class_member(b) for b in range(256) if atom_of_byte[b] == atom)
            lines.append(f"A{atom}: /[{members}]/")
        for index, atoms in enumerate(terminal_atoms):
            options = [f"A{a}" for a in range(atoms.bit_length()) if atoms >> a & 1]
            lines.append(f"t{index}: {' | '.join(options)}")
        for nonterminal in range(len(grammar.names)):
            alternatives = []
            for production in grammar.by_lhs[nonterminal]:
                rhs = grammar.productions[production][1]
                alternatives.append(
                    " ".join(f"n{s}" if s >= 0 else f"t{terminal_index(s)}" for s in rhs)
                )
            lines.append(f"n{nonterminal}: " + " | ".join(alternatives))
        text = "\n".join(lines) + "\n"
        self.kind = "earley"
        if lalr_safe:
            try:
                self.parser = Lark(text, parser="lalr", lexer="basic")
                self.kind = "lalr"
            except LarkGrammarError:
                self.kind = "earley"
        if self.kind == "earley":
            self.parser = Lark(text, parser="earley", lexer="basic")

    def accepts(self, data: bytes) -> bool:
        """Whether lark parses ``data`` completely."""
        try:
            self.parser.parse(data.decode("latin-1"))
        except LarkError:
            return False
        return True


def _class_member(byte: int) -> str:
    """One byte inside a lark regex class (lark unescapes \\xHH before ``re`` sees it)."""
    if byte == 0x5C:
        return "\\\\"
    if chr(byte) in "]^-[":
        return "\\" + chr(byte)
    return f"\\x{byte:02x}"


def brute_force_mask(automaton, config: int, token_bytes, eos_token_id: int | None) -> np.ndarray:
    """The allowed-token mask by checking every token's bytes one by one with the engine's
    own ``step`` (results memoised per (config, byte) in a plain dict, nothing shared with
    the vectorised kernel)."""
    memo: dict[tuple[int, int], int] = {}
    allowed = np.zeros(len(token_bytes), dtype=bool)
    for token_id, data in enumerate(token_bytes):
        if not data:
            continue
        current = config
        for byte in data:
            key = (current, byte)
            if key not in memo:
                memo[key] = automaton.step(current, byte)
            current = memo[key]
            if current == DEAD:
                break
        allowed[token_id] = current >= 0
    if eos_token_id is not None and automaton.is_accepting(config):
        allowed[eos_token_id] = True
    return allowed
