"""Programs priced in forwards: the sub-line oracle never costs more than the line program,
and the model-free replay counts what real forced decoding takes."""

from __future__ import annotations

import pytest

from cad.grammar import ProgramTokenIndex
from cad.resolver import CopySpan, oracle, resolve
from cad.selector.draft_config import load_draft_config
from cad.selector.program_cost import Pricing, subline_oracle
from tests.conftest import heval_pairs


@pytest.fixture(scope="module")
def pricing(qwen2_tokenizer) -> Pricing:
    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))
    config = load_draft_config()

    def encode(text: str) -> list[int]:
        return qwen2_tokenizer.encode(text, add_special_tokens=False)

    return Pricing(index, encode, config.budget, config.program)


def _pieces(tokenizer):
    def pieces(text: str) -> list[tuple[int, int]]:
        return tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)[
            "offset_mapping"
        ]

    return pieces


def test_the_subline_oracle_never_costs_more_than_the_line_program(
    pricing: Pricing, qwen2_tokenizer
) -> None:
    pieces = _pieces(qwen2_tokenizer)
    words = " ".join(f"item_{i}" for i in range(60))
    long_line = f"x = 1\nnames = [{words}]\ny = 2\n"
    edits = [
        *heval_pairs("python")[:4],
        (long_line, long_line.replace("item_3 ", "thing_3 ").replace("item_50", "thing_50")),
    ]
    for before, after in edits:
        line = oracle(before, after)
        sub = subline_oracle(before, after, pricing, pieces=pieces)
        assert resolve(sub, before) == after
        assert pricing.forwards(before, sub) <= pricing.forwards(before, line)
    raw = oracle(*edits[-1], granularity="subline", pieces=pieces)
    assert any(isinstance(op, CopySpan) for op in raw.ops)
    assert pricing.forwards(edits[-1][0], raw) > pricing.forwards(edits[-1][0], sub)
