"""Program mode under a syntax constraint: copies admitted only where the parser survives,
gen bodies masked, ``</program>`` only on a whole file, no dead ends; masks equal what
``accept_token`` takes; ranges start after the text before them and end only where the
text after them still parses."""

from __future__ import annotations

import ast
import random

import pytest
import torch

from cad.grammar import ProgramMatcher, ProgramTokenIndex
from cad.grammar.syntax import (
    SyntaxConstraint,
    SyntaxMismatch,
    SyntaxProgramMatcher,
    syntax_machine,
)
from cad.resolver import Document, format_program, oracle, resolve
from tests.conftest import heval_pairs

DOCUMENT = (
    "import os\n"
    "\n"
    "\n"
    "def area(width, height):\n"
    "    if width < 0:\n"
    "        raise ValueError('negative')\n"
    "    return width * height\n"
    "\n"
    "\n"
    "print(area(2, 3))\n"
)


@pytest.fixture(scope="module")
def index(small_vocab) -> ProgramTokenIndex:
    return ProgramTokenIndex.for_vocabulary(small_vocab, use_cache=False)


@pytest.fixture(scope="module")
def python(small_vocab):
    return syntax_machine("python", small_vocab)


def matcher_for(index, python, document: str = DOCUMENT, before: str = "", after: str = ""):
    constraint = SyntaxConstraint.for_region(python, before, document, after)
    return SyntaxProgramMatcher(index, Document(document), constraint)


def follow(matcher, target: bytes, vocabulary) -> None:
    """Take the program ``target`` token by token, longest allowed token first."""
    while not matcher.is_accepting():
        remaining = target[len(matcher.text) :]
        allowed = matcher.allowed_tokens()
        for length in range(min(len(remaining), vocabulary.longest_token), 0, -1):
            token = vocabulary.ids_by_bytes.get(remaining[:length])
            if token is not None and bool(allowed[token]):
                assert matcher.accept_token(token)
                break
        else:
            raise AssertionError(f"stuck at {matcher.text[-30:]!r} before {remaining[:30]!r}")


def test_masks_are_exactly_the_tokens_accept_token_takes(index, python, small_vocab) -> None:
    matcher = matcher_for(index, python)
    target = b'<copy lines="1-3"/>\n<gen>def f(x):\n    return "<\\/gen>"\n</gen>\n</program>'
    for step in range(60):
        if matcher.is_accepting():
            break
        allowed = matcher.allowed_tokens()
        if step % 3 == 0:
            for token in range(small_vocab.size):
                took = matcher.accept_token(token)
                if took:
                    assert bool(matcher.allowed_tokens().any()), "no dead ends"
                    matcher.rollback(1)
                assert took == bool(allowed[token]), small_vocab.token_bytes[token]
        remaining = target[len(matcher.text) :]
        token = next(
            small_vocab.ids_by_bytes[remaining[:n]]
            for n in range(min(len(remaining), small_vocab.longest_token), 0, -1)
            if remaining[:n] in small_vocab.ids_by_bytes
            and allowed[small_vocab.ids_by_bytes[remaining[:n]]]
        )
        assert matcher.accept_token(token)
    assert matcher.is_accepting()
    text = resolve_text(matcher)
    assert text == 'import os\n\n\ndef f(x):\n    return "</gen>"\n'
    ast.parse(text)


def take(matcher, vocabulary, data: bytes) -> bool:
    """Accept ``data`` token by token (``accept_token`` is strict about the syntax, unlike
    ``accept_bytes``); on a refusal undo what was taken and return False."""
    from tests.grammar.syntax.test_masks import greedy_tokens

    for taken, token in enumerate(greedy_tokens(vocabulary, data)):
        if not matcher.accept_token(token):
            matcher.rollback(taken)
            return False
    return True


def resolve_text(matcher) -> str:
    from cad.resolver import Program

    return resolve(Program(matcher.ops), matcher.document)


def test_copy_lines_are_admitted_only_where_the_parser_survives(index, python, small_vocab) -> None:
    matcher = matcher_for(index, python)
    assert matcher.accept_bytes(b'<copy lines="4-4"/>\n<copy lines="')
    digits = {
        t: small_vocab.token_bytes[t]
        for t in range(small_vocab.size)
        if small_vocab.token_bytes[t]
        and small_vocab.token_bytes[t].isdigit()
        and len(small_vocab.token_bytes[t]) == 1
    }
    allowed = matcher.allowed_tokens()
    starts = {int(data) for token, data in digits.items() if allowed[token]}
    # after "def area(width, height):\n" only blank lines or the indented block may follow
    assert starts == {2, 3, 5, 6, 7, 8, 9}
    assert matcher.accept_bytes(b"5-")
    allowed = matcher.allowed_tokens()
    ends = {int(data) for token, data in digits.items() if allowed[token]}
    # from line 5 the copy may run to any line up to 10 (the rest of the file parses);
    # "1" starts 10
    assert ends == {1, 5, 6, 7, 8, 9}
    assert not matcher.accept_bytes(b'4"/>\n')


def test_program_ends_only_on_a_whole_file(index, python, small_vocab) -> None:
    matcher = matcher_for(index, python)
    end = small_vocab.ids_by_bytes[b"</program>"]
    assert matcher.allowed_tokens()[end]  # the empty file parses
    assert matcher.accept_bytes(b'<copy lines="4-5"/>\n')
    assert not matcher.allowed_tokens()[end]
    assert not matcher.accept_token(end)
    assert matcher.accept_bytes(b'<copy lines="6-7"/>\n')
    assert matcher.allowed_tokens()[end]
    assert matcher.accept_token(end)
    eos = small_vocab.eos_token_id
    assert matcher.allowed_tokens()[eos] and matcher.accept_token(eos)


def test_gen_bodies_are_masked_by_the_language(index, python, small_vocab) -> None:
    matcher = matcher_for(index, python)
    assert matcher.accept_bytes(b"<gen>def f(")
    allowed = matcher.allowed_tokens()
    for good in (b")", b"x", b"self", b"*", b"**"):
        assert allowed[small_vocab.ids_by_bytes[good]], good
    for bad in (b"1", b"]", b"...", b":", b" ==", b"</program>"):
        assert not allowed[small_vocab.ids_by_bytes[bad]], bad
    # a body may stop wherever its text is a prefix of a file, and brackets join lines
    for fine in (b"</gen>\n", b"\n", b"def"):
        assert allowed[small_vocab.ids_by_bytes[fine]], fine
    assert matcher.accept_bytes(b"x):\n    ")
    allowed = matcher.allowed_tokens()
    assert allowed[small_vocab.ids_by_bytes[b"</gen>"]]  # a body may stop anywhere viable
    assert not allowed[small_vocab.ids_by_bytes[b"</program>"]]


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_never_dead_end_and_finished_ones_parse(
    index, python, small_vocab, seed
) -> None:
    rng = random.Random(seed)
    matcher = matcher_for(index, python)
    structural = {small_vocab.ids_by_bytes[t] for t in (b"</gen>\n", b'<copy lines="', b"<gen>")}
    end = small_vocab.ids_by_bytes[b"</program>"]
    for step in range(150):
        if matcher.is_accepting():
            break
        allowed = torch.nonzero(matcher.allowed_tokens()).flatten().tolist()
        assert allowed, "no dead ends"
        preferred = [t for t in allowed if t in structural or (t == end and step > 60)]
        token = rng.choice(preferred if preferred and rng.random() < 0.3 else allowed)
        assert matcher.accept_token(token)
    if matcher.is_accepting():
        ast.parse(resolve_text(matcher))


def test_a_region_starts_after_its_prefix_and_ends_where_its_suffix_parses(
    index, python, small_vocab
) -> None:
    lines = DOCUMENT.splitlines(keepends=True)
    before, region, after = "".join(lines[:4]), "".join(lines[4:7]), "".join(lines[7:])
    matcher = matcher_for(index, python, region, before, after)
    end = small_vocab.ids_by_bytes[b"</program>"]
    assert not matcher.allowed_tokens()[end]  # an empty body does not parse
    assert not take(matcher, small_vocab, b"<gen>x = 1\n</gen>\n")  # not indented
    assert take(matcher, small_vocab, b"<gen>    pass\n</gen>\n")
    assert matcher.allowed_tokens()[end]
    assert take(matcher, small_vocab, b'<copy lines="1-1"/>\n')  # an if without a body
    assert not matcher.allowed_tokens()[end]
    assert matcher.syntax_ok


def test_a_file_that_does_not_parse_is_refused(python) -> None:
    with pytest.raises(SyntaxMismatch, match="line 2"):
        SyntaxConstraint.for_region(python, "", "x = 1\ndef f(:\n    pass\n")
    with pytest.raises(SyntaxMismatch, match="end of the file"):
        SyntaxConstraint.for_region(python, "", "x = (1,\n")


def test_without_a_constraint_the_plain_fsm_is_used(index) -> None:
    from cad.grammar.syntax import syntax_program_matcher

    assert isinstance(syntax_program_matcher(index, Document(DOCUMENT), None), ProgramMatcher)


def test_oracle_programs_decode_byte_exact_with_the_constraint(index, python, small_vocab) -> None:
    for before, after in heval_pairs("python")[:6]:
        program = oracle(before, after)
        matcher = matcher_for(index, python, before)
        follow(matcher, format_program(program).encode(), small_vocab)
        assert resolve_text(matcher) == after


@pytest.mark.slow
def test_oracle_programs_decode_byte_exact_with_a_real_vocabulary(
    qwen2_tokenizer, qwen2_vocab
) -> None:
    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer)
    machine = syntax_machine("python", qwen2_tokenizer)
    for before, after in heval_pairs("python")[10:14]:
        program = oracle(before, after)
        matcher = SyntaxProgramMatcher(
            index, Document(before), SyntaxConstraint.for_region(machine, "", before)
        )
        follow(matcher, format_program(program).encode(), qwen2_vocab)
        assert resolve_text(matcher) == after
