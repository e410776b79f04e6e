"""F-strings before Python 3.12, where an f-string was one string token and the text of a
replacement field was checked apart: the 3.10/3.11 grammar accepts exactly what the
interpreter of that version accepts, and its masks stay exact through f-string states."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.syntax import python_parses
from cad.grammar.syntax import syntax_machine
from cad.grammar.syntax.machine import DEAD
from cad.grammar.syntax.python_syntax import python_syntax
from tests.grammar.syntax.conftest import RUNNING
from tests.grammar.syntax.test_masks import assert_mask_exact, greedy_tokens

LEGACY = (3, 11)
JUDGED = RUNNING < (3, 12)
"""Whether the running interpreter reads f-strings the pre-3.12 way (then it judges too)."""

# (text, what Python 3.10 and 3.11 say)
CASES = [
    # a string inside a field may hold '#' and the other quote kind
    ("x = f'{\"#\"}'\n", True), ("x = f'{x#}'\n", False), ("x = f'''{x # c\n}'''\n", False),
    ("x = f'''{#\n1}'''\n", False), ("x = f'{f\"#\"}'\n", True), ("x = f'{x:#x}'\n", True),
    ("x = f'{x}#'\n", True), ("x = f'''{f\"{'#'}\"}'''\n", True),
    # a triple-quoted f-string ends only at three quotes in a row
    ('x = f"""{"a"}"""\n', True), ('x = f"""{"a"""}"""\n', False),
    ('x = f"""{"a""x"}"""\n', True), ('x = f"""{""}"""\n', True), ('x = f"""{"""a"""}"""\n', False),
    ("x = f'''{'a' 'b'}'''\n", True), ("x = f'''{f'{x}'}'''\n", True),
    ("x = f'''{f'a'''}'''\n", False), ('x = f"""{f"a"}"""\n', True),
    ('x = f"""{f\'a"""\'}"""\n', False), ('x = f"""{x!r}"""""\n', True),
    ('x = f"""{x:"}"""\n', True), ("x = f'''{x:a'b}'''\n", True),
    # a single-quoted one at its quote character, anywhere inside
    ("x = f'{'a'}'\n", False), ("x = f'{x:'}'\n", False), ("x = f\"{'a'}\"\n", True),
    # no backslash anywhere in a field, even in a nested string; fine in specs and text
    ("x = f'{\"\\n\"}'\n", False), ("x = f'{f\"\\n\"}'\n", False), ("x = f'\\{x}'\n", True),
    ("x = f'{x:\\x41}'\n", True), ("x = f'{x:\\'}'\n", True), ("x = f'{x:{\"\\n\"}}'\n", False),
    ("x = f'{x:{y:\\x41}}'\n", True), ("x = f'''{\\\n1}'''\n", False),
    # a spec was a nested f-string's text: no doubled braces there, one level of fields
    ("x = f'{x:{{y}}}'\n", True), ("x = f'{x:{{}'\n", False), ("x = f'{x:}}'\n", False),
    ("x = f'{x:{y:{z}}}'\n", False), ("x = f'{x:{y:>{1}}}'\n", False),
    # the field text was parsed in parentheses
    ("x = f'{x for x in y}'\n", True), ("x = f'{*a,}'\n", True), ("x = f'{*a}'\n", False),
    ("x = f'{yield}'\n", True), ("x = f'''{a\n}'''\n", True), ("x = f'{a\n}'\n", False),
    ("x = f'{a !r}'\n", True), ("x = f'{a!r }'\n", False), ("x = f'{a!r=}'\n", False),
    ("x = f'{x=y}'\n", False), ("x = f'{a!=b}'\n", True), ("x = f'{x:=1}'\n", True),
    ("x = f'{lambda: 1}'\n", False), ("x = f'{(lambda: 1)}'\n", True),
]  # fmt: skip


@pytest.mark.parametrize(("text", "accepted"), CASES)
def test_pre_312_f_strings_read_as_the_interpreter_reads_them(text: str, accepted: bool) -> None:
    if JUDGED:
        assert python_parses(text) == accepted
    assert python_syntax(LEGACY).accepts(text.encode()) == accepted


_QUOTES = ["'", '"', "'''", '"""']
_EXPRESSIONS = [
    "x", "1", "x + y", "a[1]", "f(a=1)", "(a:=1)", "{'k': 1}['k']", "x for x in y", "*a,",
    "yield", "lambda: 1", "(lambda: 1)", "a != b", "a<=b", "x, y", " x ", "\nx\n", "x#c\n",
    "'#'", '"#"', "''", '""', "'a' 'b'", "'\\n'", "'''a'''", '"""a"""', "{x}", "", " ", "x)",
]  # fmt: skip
_TEXTS = ["a", "{{", "}}", "\\n", "'", '"', "''", '""', "#", "\\{", "\\N{BULLET}", "\n", "}"]
_TAILS = [
    "", "=", "!r", "!x", "= ", "=!r", "!r ", ":>10", ":{w}", ":{w:{z}}", ":'", ':"', ":\\n",
    ":{{", ":}}", ":#x", ":{'a'}", ":%H:%M",
]  # fmt: skip


@st.composite
def f_strings(draw, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.integers(0, 9)) < 3:
            parts.append(draw(st.sampled_from(_TEXTS)))
            continue
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            expression = draw(f_strings(depth + 1))
        else:
            expression = draw(st.sampled_from(_EXPRESSIONS))
        parts.append("{" + expression + draw(st.sampled_from(_TAILS)) + "}")
    quote = draw(st.sampled_from(_QUOTES))
    return draw(st.sampled_from(["f", "F", "rf", "fR"])) + quote + "".join(parts) + quote


@pytest.mark.skipif(not JUDGED, reason="the interpreter reads f-strings as PEP 701 does")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(f_strings())
def test_generated_f_strings_agree_with_ast_parse(f_string: str) -> None:
    text = f"def g():\n    return {f_string}\n"
    assert python_syntax(RUNNING).accepts(text.encode()) == python_parses(text)


WALKED = [
    'x = f"""{"a""b"}{\'#\'}"""\n',
    "y = f'{x:{w}>10}' f\"{'a'!r:\\x41}\"\n",
    "z = f'''{f\"{x!r}\"}''' + f\"{x=}\" + f'{x for x in y}'\n",
]


def test_pre_312_masks_equal_brute_force_through_f_strings(small_vocab) -> None:
    machine = syntax_machine("python", small_vocab, python_version=LEGACY)
    for text in WALKED:
        state = machine.initial
        for token in greedy_tokens(small_vocab, text.encode()):
            assert assert_mask_exact(machine, state)[token]
            state = machine.feed(state, small_vocab.token_bytes[token])
        assert machine.is_complete(state)


@pytest.mark.parametrize("prefix", ['x = f"""{', "x = f'{", "x = f'''{f\"{"])
def test_pre_312_masks_equal_brute_force_on_random_walks(small_vocab, prefix: str) -> None:
    machine = syntax_machine("python", small_vocab, python_version=LEGACY)
    rng = random.Random(prefix)
    state = machine.feed(machine.initial, prefix.encode())
    for _ in range(20):
        mask = assert_mask_exact(machine, state)
        choices = [t for t in np.flatnonzero(mask) if t != small_vocab.eos_token_id]
        assert choices, "a viable prefix always has a continuation"
        # quotes and braces half the time, so the walk stays in and around fields
        quoted = [t for t in choices if set(small_vocab.token_bytes[t]) & set(b"\"'{}#")]
        pool = quoted if quoted and rng.random() < 0.5 else choices
        state = machine.feed(state, small_vocab.token_bytes[rng.choice(pool)])
        assert state != DEAD
