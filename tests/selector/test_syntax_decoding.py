"""Decoding under a syntax constraint with a random-weight model (the worst writer there is):
every finished edit parses, forced programs stay byte-exact, and a spent budget is flagged
so that nothing is written."""

from __future__ import annotations

import ast

import pytest

from cad.grammar.syntax import SyntaxConstraint, syntax_machine
from cad.resolver import oracle, parse
from cad.selector import Decoder, Sampling
from cad.selector.rewrite import rewrite, rewrite_forced

DOCUMENT = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"
EDITED = "def add(a, b):\n    return a - b\n\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def constraint(tiny_qwen) -> SyntaxConstraint:
    machine = syntax_machine("python", tiny_qwen.tokenizer, vocab_size=tiny_qwen.vocab_size)
    return SyntaxConstraint.for_region(machine, "", DOCUMENT)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def test_sampled_programs_parse_when_they_finish(tiny_qwen, constraint) -> None:
    for seed in range(3):
        decoder = Decoder(
            tiny_qwen, max_new_tokens=24, sampling=Sampling(temperature=1.0, seed=seed)
        )
        result = decoder.edit(DOCUMENT, "change something", syntax=constraint)
        assert result.stats.truncated or _parses(result.text), result.text


def test_sampled_rewrites_parse_when_they_finish(tiny_qwen, constraint) -> None:
    for seed in range(2):
        result = rewrite(
            tiny_qwen, DOCUMENT, "change something", max_new_tokens=12,
            sampling=Sampling(temperature=1.0, seed=seed), syntax=constraint, draft_budget=4,
        )  # fmt: skip
        assert result.stats.truncated or _parses(result.text), result.text


def test_forced_program_is_byte_exact_with_the_constraint(tiny_qwen, constraint) -> None:
    program = oracle(DOCUMENT, EDITED)
    plain = Decoder(tiny_qwen).edit(DOCUMENT, "subtract", program=program)
    held = Decoder(tiny_qwen).edit(DOCUMENT, "subtract", program=program, syntax=constraint)
    assert held.text == plain.text == EDITED
    assert held.stats.forwards == plain.stats.forwards


def test_forced_rewrite_is_exact_and_drafts_stay_in_the_language(tiny_qwen, constraint) -> None:
    result = rewrite_forced(
        tiny_qwen, DOCUMENT, "subtract", EDITED, syntax=constraint, draft_budget=6
    )
    assert result.text == EDITED


def test_a_program_that_would_break_the_file_is_not_followed(tiny_qwen, constraint) -> None:
    broken = parse('<copy lines="1-1"/>\n</program>')
    with pytest.raises(RuntimeError):
        Decoder(tiny_qwen).edit(DOCUMENT, "x", program=broken, syntax=constraint)
