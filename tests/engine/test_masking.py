"""The engine's program masks: a mirror synchronised at every chunk start gives exactly the
in-process program FSM's masks, forced-program rows allow exactly the program's next token
(or the token a chunk names), and the batch table follows vLLM's removes, adds and moves."""

from __future__ import annotations

import pytest
import torch

from cad.engine.masking import BatchMasks, ProgramMirror
from cad.engine.wire import ProgramSpec
from cad.grammar import ProgramMatcher, ProgramTokenIndex, allocate_token_bitmask, unpack_bitmask
from cad.resolver import Document, format_program, oracle
from cad.selector.tape import follow_program
from tests.conftest import heval_pairs


@pytest.fixture(scope="module")
def index(qwen2_tokenizer) -> ProgramTokenIndex:
    return ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))


def decisions(index, tokenizer, pair: tuple[str, str]):
    """Walk the oracle program's tape as the decoder would: yields ``(widths, target, text,
    token)`` at every model decision, ``text`` being the program bytes accepted before it; the
    last item is the finished program text."""
    before, after = pair
    document = Document(before)
    program = oracle(before, after)
    widths = tuple(len(line) for line in document.lines)
    tape = follow_program(
        index, lambda t: tokenizer.encode(t, add_special_tokens=False), document, program
    )
    reference = ProgramMatcher(index, widths)
    target = format_program(program).encode()
    steps = []
    while forced := reference.forced_bytes():
        assert reference.accept_bytes(forced)
    for token in (
        token for token, decided in zip(tape.tokens, tape.decided, strict=True) if decided
    ):
        steps.append((reference.allowed_tokens().clone(), reference.text, token))
        assert reference.accept_token(token)
        while forced := reference.forced_bytes():
            assert reference.accept_bytes(forced)
    assert reference.is_accepting() and reference.text == target
    return widths, target, steps


def test_mirror_masks_equal_the_fsm_at_every_decision(index, qwen2_tokenizer) -> None:
    widths, _, steps = decisions(index, qwen2_tokenizer, heval_pairs("python")[3])
    masks = BatchMasks(lambda: index, 4)
    bitmask = allocate_token_bitmask(1, index.vocab_size)
    for expected, text, token in steps:
        masks.add(0, ProgramSpec("edit", widths, False, text), [])
        masks.rows[0].mirror.fill(bitmask, 0)
        allowed = unpack_bitmask(bitmask[0], index.vocab_size)
        assert torch.equal(allowed, expected)
        assert bool(allowed[token])
    assert len(steps) > 10


def test_forced_program_rows_allow_only_the_next_program_token(index, qwen2_tokenizer) -> None:
    widths, target, steps = decisions(index, qwen2_tokenizer, heval_pairs("python")[7])
    bitmask = allocate_token_bitmask(1, index.vocab_size)
    mirror = ProgramMirror(index, ProgramSpec("edit", widths, False, b"", target))
    for _, text, token in steps:
        mirror.sync(ProgramSpec("edit", widths, False, text, target))
        mirror.fill(bitmask, 0)
        assert unpack_bitmask(bitmask[0], index.vocab_size).nonzero().flatten().tolist() == [token]


def test_a_fixed_sample_allows_that_token_alone_and_parks_no_mirror(index) -> None:
    """A forced program's chunk through drafts names its sample (``ProgramSpec.token``): the
    row allows exactly it, whatever program text the spec holds, and leaves the edit's parked
    mirror alone."""
    masks = BatchMasks(lambda: index, 2)
    masks.add(0, ProgramSpec("a", (4, 4), False, b'<copy lines="'), [])
    masks.remove(0)
    parked = masks.parked["a"]
    masks.add(0, ProgramSpec("a", (4, 4), False, b"", b"</program>", token=7), [])
    logits = torch.zeros(1, index.vocab_size)
    masks.apply(logits)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [7]
    masks.remove(0)
    assert masks.parked["a"] is parked and parked.matcher.text == b'<copy lines="'
    spec = ProgramSpec("a", (4,), False, b"", None, token=151643)
    assert ProgramSpec.from_args(spec.to_args()) == spec


def test_sync_undoes_tokens_sampled_past_the_chunk(index) -> None:
    widths = (4, 4, 4)
    start = ProgramSpec("edit", widths, False, b"<")
    mirror = ProgramMirror(index, start)
    mirror.sync(start)
    ids = index.vocabulary.ids_by_bytes
    for piece in (b"c", b"opy", b" lines", b'="', b"1"):
        assert mirror.matcher.accept_bytes(piece)
    mirror.accept(ids[b"-"])  # sampled in a step the engine then dropped
    mirror.sync(ProgramSpec("edit", widths, False, b'<copy lines="1'))
    assert mirror.matcher.text == b'<copy lines="1'
    mirror.sync(ProgramSpec("edit", widths, False, b'<copy lines="1-3"/>\n<'))
    assert mirror.matcher.text == b'<copy lines="1-3"/>\n<'


def test_batch_follows_removes_adds_and_moves(index) -> None:
    ids = index.vocabulary.ids_by_bytes
    vocab = index.vocab_size
    masks = BatchMasks(lambda: index, 8, parked=2)
    outputs: list[int] = []
    masks.add(1, ProgramSpec("a", (4, 4), False, b'<copy lines="'), outputs)
    masks.add(2, None, [])
    logits = torch.zeros(3, vocab)
    masks.apply(logits)
    assert torch.isfinite(logits[0]).all() and torch.isfinite(logits[2]).all()
    allowed = torch.isfinite(logits[1])
    assert bool(allowed[ids[b"1"]]) and bool(allowed[ids[b"2"]])
    assert not bool(allowed[ids[b"3"]]) and not bool(allowed[ids[b"-"]])
    outputs.append(ids[b"1"])
    outputs.append(-1)  # a token still on its way: not accepted yet
    logits = torch.zeros(3, vocab)
    masks.apply(logits)
    allowed = torch.isfinite(logits[1])
    assert bool(allowed[ids[b"-"]]) and not bool(allowed[ids[b"1"]])
    masks.move(1, 0, swap=False)
    assert set(masks.rows) == {0}
    masks.remove(0)
    assert not masks.rows and "a" in masks.parked
    logits = torch.zeros(1, vocab)
    masks.apply(logits)
    assert torch.isfinite(logits).all()
    for edit in ("b", "c", "d"):
        masks.add(0, ProgramSpec(edit, (4,), False, b"<"), [])
        masks.remove(0)
    assert list(masks.parked) == ["c", "d"]


def test_spec_survives_extra_args_and_rejects_garbage() -> None:
    spec = ProgramSpec("x", (3, 1), True, b"<copy \xe2", b"target")
    assert ProgramSpec.from_args(spec.to_args()) == spec
    assert ProgramSpec.from_args({"other": 1}) is None
    assert ProgramSpec.from_args(None) is None
    with pytest.raises(ValueError, match="not a program spec"):
        ProgramSpec.from_args({"cad": {"edit": "x"}})
