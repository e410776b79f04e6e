"""What fits the model's context: a streaming session's room per chunk, the decisions an
edit starts with, and the refusals made before any text is tokenized or built."""

from __future__ import annotations

import pytest

from cad.engine.context import (
    MIN_DECISIONS,
    ContextWindow,
    check_text_fits,
    decision_budget,
    program_output_bound,
)
from cad.resolver import CopyLines, Document, Gen, Program, ProgramError
from cad.selector import ContextTooLongError


def test_a_session_holds_every_chunk_and_all_but_the_last_sampled_token() -> None:
    window = ContextWindow(100)
    assert window.room(60) == 40  # the prompt: it may sample 40
    window.add(60, 5)  # the fifth token is not in the cache: the next chunk starts with it
    assert window.held == 64
    assert window.room(1 + 20) == 15  # that token, a copy of 20
    window.add(21, 15)
    assert window.room(1) == 0  # full: no further chunk may run


def test_decisions_are_capped_by_the_context() -> None:
    assert decision_budget(100, 50, 30, 10**9) == 20
    assert decision_budget(100, 50, 30, 5) == 5
    with pytest.raises(ContextTooLongError) as caught:
        decision_budget(100, 50, 35, 5)
    assert str(caught.value) == (
        f"the edit needs {50 + 35 + MIN_DECISIONS} tokens (a prompt of 50, a copy of the range "
        f"35, {MIN_DECISIONS} decisions) but the model's context is 100 tokens; edit a smaller "
        "range or use a longer-context model"
    )


def test_text_far_too_long_is_refused_before_it_is_tokenized() -> None:
    check_text_fits(128 * 100, 128, 100 + MIN_DECISIONS)
    with pytest.raises(ContextTooLongError, match=r"at least 101 tokens .* context is 116"):
        check_text_fits(128 * 100 + 1, 128, 100 + MIN_DECISIONS)


def test_a_program_output_is_measured_without_building_it() -> None:
    document = Document("".join(f"{i:099d}\n" for i in range(2000)))  # 200 kB
    everything = CopyLines(1, 2000)
    huge = Program((everything,) * 100_000)  # 20 GB if it were resolved
    assert program_output_bound(huge, document, 1_000_000) == 1_200_000  # stops at the sixth
    small = Program((CopyLines(1, 2), Gen("new\n")))
    assert program_output_bound(small, document, 1_000_000) == 204
    with pytest.raises(ProgramError, match="out of range"):
        program_output_bound(Program((CopyLines(1, 2001),)), document, 1_000_000)
