"""Program FSM: soundness, document-bounded numbers, exact masks, forcing, rollback."""

from __future__ import annotations

import random

import pytest
import torch

from cad.grammar import Matcher, ProgramMatcher, ProgramTokenIndex
from cad.grammar.program_states import number_prefix_ok
from cad.resolver import Document, format, oracle, parse, resolve
from tests.conftest import heval_pairs


@pytest.fixture(scope="module", params=["qwen2_tokenizer", "llama3_tokenizer"])
def tokenizer(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def index(tokenizer) -> ProgramTokenIndex:
    return ProgramTokenIndex.for_tokenizer(tokenizer)


def document_of(lines: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    endings = ["\n", "\r\n", "\n", "\r"]
    return "".join(f"l{i} {'x' * rng.randint(0, 12)}{rng.choice(endings)}" for i in range(lines))


def matcher_for(index: ProgramTokenIndex, text: str, subline: bool = False) -> ProgramMatcher:
    return ProgramMatcher(index, [len(line) for line in Document(text).lines], subline=subline)


_SHORT: dict[int, torch.Tensor] = {}


def short_tokens(index: ProgramTokenIndex) -> torch.Tensor:
    """Tokens of at most two bytes: sampling prefers them so programs hit every structure."""
    if id(index) not in _SHORT:
        lengths = [len(data or b"xxx") for data in index.vocabulary.token_bytes]
        _SHORT[id(index)] = torch.tensor(lengths) <= 2
    return _SHORT[id(index)]


def sample_program(matcher: ProgramMatcher, rng: random.Random, budget: int) -> bytes:
    """Random tokens under the mask (biased towards short ones), then the completion."""
    for _ in range(budget):
        if matcher.is_accepting():
            break
        mask = matcher.allowed_tokens()
        short = mask & short_tokens(matcher.index)
        pool = short if rng.random() < 0.7 and bool(short.any()) else mask
        allowed = pool.nonzero().flatten()
        choice = int(allowed[rng.randrange(len(allowed))])
        assert matcher.accept_token(choice)
    if not matcher.is_accepting():
        assert matcher.accept_bytes(matcher.completion_bytes())
    return matcher.text


def test_index_is_cached_per_tokenizer(tokenizer, index) -> None:
    assert ProgramTokenIndex.for_tokenizer(tokenizer) is index
    assert isinstance(matcher_for(index, "a\n"), Matcher)


@pytest.mark.parametrize("lines", [0, 1, 7, 50, 99, 100, 101, 2000])
def test_sampled_programs_always_parse_and_resolve(index, lines: int) -> None:
    document = document_of(lines, lines)
    for seed in range(12):
        rng = random.Random(seed * 1000 + lines)
        matcher = matcher_for(index, document, subline=seed % 2 == 1)
        text = sample_program(matcher, rng, budget=rng.choice([5, 30, 120]))
        program = parse(text.decode("utf-8"))
        assert program.ops == matcher.ops
        resolve(program, document)
        assert matcher.is_accepting()


@pytest.mark.parametrize("lines", [1, 9, 10, 57, 100, 999, 1000, 2000])
def test_out_of_range_numbers_are_impossible(index, lines: int) -> None:
    """From every digit state, every allowed token keeps the number a prefix of 1..n."""
    matcher = matcher_for(index, document_of(lines))
    assert matcher.accept_bytes(b'<copy lines="')
    frontier = [b""]
    seen = 0
    while frontier and seen < 300:
        digits = frontier.pop()
        seen += 1
        if digits:
            assert matcher.accept_bytes(digits)
        for token in matcher.allowed_tokens().nonzero().flatten().tolist():
            data = index.vocabulary.token_bytes[token]
            head = data.split(b"-")[0] if data[:1].isdigit() else b""
            if head:
                assert number_prefix_ok(digits + head, 1, lines)
                if len(frontier) < 50:
                    frontier.append(digits + head)
            else:
                assert data[:1] == b"-" and digits and 1 <= int(digits) <= lines
        if digits:
            matcher.rollback(1)
    too_big = str(lines + 1).encode()
    assert not matcher.accept_bytes(too_big + b"-")


def test_reversed_range_and_leading_zero_are_impossible(index) -> None:
    matcher = matcher_for(index, document_of(30))
    assert matcher.accept_bytes(b'<copy lines="12-')
    assert not matcher.accept_bytes(b'11"')
    assert not matcher.accept_bytes(b"0")
    assert matcher.accept_bytes(b'12"/>\n')
    assert not matcher.accept_bytes(b'<copy lines="05-')


def test_span_columns_bounded_by_line_width(index) -> None:
    document = "abc\nde\r\n"
    matcher = matcher_for(index, document, subline=True)
    assert matcher.accept_bytes(b'<copy span="2:')
    assert not matcher.accept_bytes(b"5")
    assert matcher.accept_bytes(b"4-2:")
    assert not matcher.accept_bytes(b"3")
    assert matcher.accept_bytes(b'4"/>\n')
    assert resolve(parse(matcher.text.decode() + "</program>"), document) == "\n"
    assert not matcher_for(index, document).accept_bytes(b"<copy span=")


def test_mask_equals_brute_force(index) -> None:
    """On sampled states, the mask is exactly the tokens that accept_token takes."""
    document = document_of(120, 3)
    rng = random.Random(7)
    vocab = index.vocabulary
    states = [
        b"",
        b"<",
        b'<copy lines="1',
        b'<copy lines="12-1',
        b'<copy lines="3-30"',
        b"<gen>x",
        "<gen>é</ge".encode(),
        b"<gen>" + "é".encode()[:1],
        b'<copy span="5:',
        b"<gen>a</gen>",
        b"</program>",
    ]
    candidates = rng.sample(range(vocab.size), 3000) + [
        t
        for t, data in enumerate(vocab.token_bytes)
        if data and (b"<" in data or data[:1].isdigit() or b'"' in data)
    ]
    for prefix in states:
        matcher = matcher_for(index, document, subline=True)
        assert matcher.accept_bytes(prefix) or not prefix
        mask = matcher.allowed_tokens()
        assert mask.dtype == torch.bool and mask.shape == (vocab.size,)
        for token in candidates:
            accepted = matcher.accept_token(token)
            if accepted:
                matcher.rollback(1)
            assert accepted == bool(mask[token]), (prefix, token, vocab.token_bytes[token])


@pytest.mark.parametrize("language", ["python", "js"])
def test_canonical_programs_are_accepted_token_by_token(tokenizer, index, language: str) -> None:
    for before, after in heval_pairs(language)[:40]:
        for granularity in ("line", "subline"):
            program = oracle(before, after, granularity=granularity)
            text = format(program)
            matcher = matcher_for(index, before, subline=granularity == "subline")
            ops_text = [op + "\n" for op in text.split("\n")[:-1]] + ["</program>"]
            position = 0
            for chunk in ops_text:
                for token in tokenizer.encode(chunk, add_special_tokens=False):
                    forced = matcher.forced_bytes()
                    assert text.encode()[position:].startswith(forced)
                    assert matcher.accept_token(token), (chunk, token)
                    position = len(matcher.text)
            assert matcher.is_accepting()
            assert matcher.ops == program.ops


@pytest.mark.parametrize(
    "text",
    [
        b'<copy lines="1-2"/> \n',
        b'<copy lines="1-2"/><gen>x</gen>\n',
        b" <gen>x</gen>\n",
        b"</program>\n",
        b'<copy lines="1-2" />\n',
        b"<gen>\xff</gen>\n",
        b'<copy lines="1-99"/>\n',
    ],
)
def test_non_canonical_text_is_rejected(index, text: bytes) -> None:
    assert not matcher_for(index, document_of(10)).accept_bytes(text)


def test_after_program_only_eos(tokenizer, index) -> None:
    matcher = matcher_for(index, "a\n")
    assert matcher.accept_bytes(b"</program>")
    allowed = matcher.allowed_tokens().nonzero().flatten().tolist()
    assert allowed == [tokenizer.eos_token_id]
    assert not matcher.accept_bytes(b"\n")


def test_tokens_never_cross_an_op_boundary(index) -> None:
    vocab = index.vocabulary
    for prefix in (b'<copy lines="1-1"/>', b"<gen>x</gen>"):
        matcher = matcher_for(index, "a\nb\n")
        assert matcher.accept_bytes(prefix)
        crossing = [
            t
            for t, data in enumerate(vocab.token_bytes)
            if data and data.startswith(b"\n") and len(data) > 1
        ]
        assert crossing
        assert not any(matcher.accept_token(t) for t in crossing)
        assert not matcher.allowed_tokens()[crossing].any()
        assert matcher.accept_token(vocab.ids_by_bytes[b"\n"])
        assert len(matcher.ops) == 1


def test_gen_body_closes_across_token_boundaries_and_straddling_tokens(index) -> None:
    matcher = matcher_for(index, "a\n")
    for piece in (b"<gen>", b"if a <", b"/", b"ge", b"x </g", b"en>", b"\n", b"</program>"):
        assert matcher.accept_bytes(piece), piece
    assert format(parse(matcher.text.decode())) == matcher.text.decode()
    assert matcher.ops[0].text == "if a </gex "


def test_forced_bytes_stop_at_the_op_boundary(index) -> None:
    matcher = matcher_for(index, "a\nb\nc\n")
    assert matcher.forced_bytes() == b"<"
    assert matcher.accept_bytes(b"<c")
    assert matcher.forced_bytes() == b'opy lines="'
    assert matcher.accept_bytes(b'opy lines="3')
    assert matcher.forced_bytes() == b'-3"/>\n'
    assert matcher.accept_bytes(b'-3"/>\n')
    assert matcher.forced_bytes() == b"<"


def test_completion_from_every_kind_of_state(index) -> None:
    for prefix in (
        b"",
        b"<",
        b'<copy lines="2',
        b'<copy lines="2-',
        b"<gen>ab<",
        b"<gen>\xe4\xb8",
        b'<copy span="1:',
        b"<gen>x</gen",
    ):
        matcher = matcher_for(index, document_of(12), subline=True)
        assert matcher.accept_bytes(prefix) or not prefix
        assert matcher.accept_bytes(matcher.completion_bytes())
        assert matcher.is_accepting()
        resolve(parse(matcher.text.decode()), document_of(12))


def test_rollback_restores_state_ops_and_text(index) -> None:
    matcher = matcher_for(index, "a\nb\n")
    assert matcher.accept_bytes(b'<copy lines="1-2"/>\n')
    snapshot = (matcher.text, matcher.ops, matcher.allowed_tokens().clone())
    assert matcher.accept_bytes(b"<gen>zz</gen>\n")
    assert matcher.accept_bytes(b"</program>")
    matcher.rollback(2)
    assert (matcher.text, matcher.ops) == snapshot[:2]
    assert torch.equal(matcher.allowed_tokens(), snapshot[2])
    with pytest.raises(ValueError):
        matcher.rollback(5)
