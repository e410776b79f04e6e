"""The resolver and the oracle stay bounded on large input: an output past the limit is
refused before it is built, and the sub-line oracle's memory grows slowly with the text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cad.resolver import CopyLines, CopySpan, Gen, Program, ProgramError, oracle, resolve
from cad.resolver.cover import SuffixAutomaton, longest_matches
from cad.resolver.resolve import MAX_OUTPUT_CHARS


def test_an_output_past_the_limit_is_refused_before_it_is_built() -> None:
    """Twenty copies of a 1 MB line would be 20 MB of output: refused at the op that
    passes the limit, with nothing built."""
    document = "x" * (1024 * 1024 - 1) + "\n"
    program = Program((Gen("head\n"),) + (CopyLines(1, 1),) * 20)
    with pytest.raises(ProgramError) as refused:
        resolve(program, document)
    total, passing = 0, 0
    while total <= MAX_OUTPUT_CHARS:
        total += 5 if passing == 0 else len(document)
        passing += 1
    assert refused.value.op_index == passing - 1
    assert f"op {passing}:" in str(refused.value)
    assert f"{MAX_OUTPUT_CHARS:,} characters" in str(refused.value)
    assert len(resolve(program, document, max_chars=None)) == 20 * len(document) + 5


def test_the_limit_counts_characters_of_every_kind_of_op() -> None:
    document = "ab\ncd\n"
    program = Program((CopySpan(1, 2, 2, 1), Gen("xyz"), CopyLines(2, 2)))
    assert resolve(program, document, max_chars=9) == "b\ncxyzcd\n"
    with pytest.raises(ProgramError, match="op 3:"):
        resolve(program, document, max_chars=8)


def test_the_suffix_automaton_matches_a_brute_force_search() -> None:
    source = list("abracadabra, cadabra!")
    target = list("cadabrax abra; zz dabra")
    lengths, starts = longest_matches(source, target)
    text = "".join(source)
    for k in range(len(target)):
        best = 0
        while k + best < len(target) and "".join(target[k : k + best + 1]) in text:
            best += 1
        assert lengths[k] == best
        run = "".join(target[k : k + best])
        assert text[starts[k] : starts[k] + best] == run
    automaton = SuffixAutomaton([ord(c) for c in "abab"])
    assert automaton.step(0, ord("a")) > 0 and automaton.step(0, ord("c")) == -1


@pytest.mark.slow
def test_the_subline_oracle_of_large_texts_fits_in_modest_memory() -> None:
    """About 700 kB of text before and after: the address space is capped at 320 MB, which
    a dictionary per automaton state (over 400 MB here) would pass."""
    code = """
import random, resource
limit = 320 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from cad.resolver import oracle, resolve
random.seed(0)
words = ["alpha", "beta", "gamma", "delta", "(", ")", ":", " ", "\\n", "x", "y"]
before = "".join(random.choice(words) for _ in range(300_000))
after = "".join("Q" if i % 997 == 0 else c for i, c in enumerate(before))
program = oracle(before, after, granularity="subline")
assert resolve(program, before) == after
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_oracle_is_still_minimal_on_repetitive_text() -> None:
    before = "ab" * 50 + "\n" + "ba" * 50 + "\n"
    after = "ab" * 30 + "ba" * 30 + "\n"
    program = oracle(before, after, granularity="subline")
    assert resolve(program, before) == after
    assert not any(isinstance(op, Gen) for op in program.ops)
    assert len(program.ops) == 2
