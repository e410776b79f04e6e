"""The native program FSM against the pure-Python reference, and its on-disk index cache."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import torch

from cad.grammar import (
    ProgramMatcher,
    ProgramTokenIndex,
    Vocabulary,
    allocate_token_bitmask,
    unpack_bitmask,
)
from cad.grammar.index_cache import cache_path
from cad.grammar.program_fsm import ReferenceProgramMatcher
from cad.grammar.program_index import ReferenceProgramIndex
from cad.grammar.program_states import AWAIT, ProgramStructure
from cad.resolver import CopyLines, CopySpan, Document, format, oracle
from tests.conftest import heval_pairs


@pytest.fixture(scope="module", params=["qwen2_tokenizer", "llama3_tokenizer"])
def tokenizer(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def indexes(tokenizer) -> tuple[ProgramTokenIndex, ReferenceProgramIndex]:
    native = ProgramTokenIndex.for_tokenizer(tokenizer)
    return native, ReferenceProgramIndex.build(native.vocabulary)


def pair(indexes, text: str, subline: bool) -> tuple[ProgramMatcher, ReferenceProgramMatcher]:
    widths = [len(line) for line in Document(text).lines]
    native, reference = indexes
    return (
        ProgramMatcher(native, widths, subline=subline),
        ReferenceProgramMatcher(reference, widths, subline=subline),
    )


def native_mask(matcher: ProgramMatcher) -> torch.Tensor:
    bitmask = allocate_token_bitmask(1, matcher.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return unpack_bitmask(bitmask[0], matcher.vocab_size)


def assert_same(native: ProgramMatcher, reference: ReferenceProgramMatcher) -> torch.Tensor:
    mask = native_mask(native)
    expected = reference.allowed_tokens()
    difference = (mask != expected).nonzero().flatten().tolist()
    assert not difference, [(t, native.index.vocabulary.token_bytes[t]) for t in difference[:5]]
    assert torch.equal(native.allowed_tokens(), mask)
    assert native.forced_bytes() == reference.forced_bytes()
    assert native.text == reference.text and native.ops == reference.ops
    assert native.is_accepting() == reference.is_accepting()
    if not native.is_accepting():
        assert native.completion_bytes() == reference.completion_bytes()
    return mask


DOCUMENTS = {
    "empty": "",
    "short": "a = 1\nb = 2\r\nprint(a + b)\n",
    "hundred": "".join(f"line {i} {'x' * (i % 13)}\n" for i in range(100)),
    "wide": "".join(f"{'y' * (i * 7 % 120)}\n" for i in range(1234)),
}


def sample_and_compare(indexes, name: str, runs: int, steps: int) -> None:
    """Random walks under the mask (short tokens preferred, so numbers and literals are cut
    everywhere), with rollbacks: every mask, forced literal, completion and op list equal."""
    rng = random.Random(len(name) + runs)
    vocabulary = indexes[0].vocabulary
    short = np.array([0 < len(data or b"") <= 2 for data in vocabulary.token_bytes])
    for run in range(runs):
        native, reference = pair(indexes, DOCUMENTS[name], subline=run % 2 == 1)
        for _ in range(steps):
            mask = assert_same(native, reference).numpy()
            if native.is_accepting():
                break
            pool = np.flatnonzero(mask & short) if rng.random() < 0.7 else np.array([])
            choices = pool if pool.size else np.flatnonzero(mask)
            token = int(choices[rng.randrange(choices.size)])
            assert native.accept_token(token) and reference.accept_token(token)
            if rng.random() < 0.15:
                steps = rng.randint(1, native.history_size)
                native.rollback(steps)
                reference.rollback(steps)
        if not native.is_accepting():
            assert native.accept_bytes(native.completion_bytes())
            assert reference.accept_bytes(reference.completion_bytes())
        assert_same(native, reference)


@pytest.mark.parametrize("name", ["short", "wide"])
def test_sampled_steps_equal_the_reference(indexes, name: str) -> None:
    sample_and_compare(indexes, name, runs=2, steps=25)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_sampled_steps_equal_the_reference_heavy(indexes, name: str) -> None:
    sample_and_compare(indexes, name, runs=4, steps=40)


def test_rejections_equal_the_reference(indexes) -> None:
    native, reference = pair(indexes, DOCUMENTS["hundred"], subline=True)
    vocabulary = indexes[0].vocabulary
    rng = random.Random(3)
    for prefix in (b"", b'<copy lines="1', b'<copy span="12:', b"<gen>a</ge", b"</program>"):
        assert native.accept_bytes(prefix) == reference.accept_bytes(prefix) or not prefix
        for token in rng.sample(range(vocabulary.size), 400):
            accepted = native.accept_token(token)
            assert accepted == reference.accept_token(token)
            if accepted:
                native.rollback(1)
                reference.rollback(1)
    with pytest.raises(ValueError):
        native.rollback(native.history_size + 1)


def test_oracle_programs_of_real_edits_equal_the_reference(tokenizer, indexes) -> None:
    for before, after in heval_pairs("python")[:6]:
        program = format(oracle(before, after, granularity="subline"))
        native, reference = pair(indexes, before, subline=True)
        for op_text in [op + "\n" for op in program.split("\n")[:-1]] + ["</program>"]:
            for token in tokenizer.encode(op_text, add_special_tokens=False):
                assert_same(native, reference)
                assert native.accept_token(token) and reference.accept_token(token)
        assert native.is_accepting()
        eos = tokenizer.eos_token_id
        assert native_mask(native).nonzero().flatten().tolist() == [eos]
        assert native.accept_token(eos) and reference.accept_token(eos)


def test_bitmask_rows_beyond_the_vocabulary_are_cleared(indexes) -> None:
    native, _ = pair(indexes, DOCUMENTS["short"], subline=False)
    bitmask = allocate_token_bitmask(3, native.vocab_size + 100)
    native.fill_next_token_bitmask(bitmask, row=2)
    unpacked = unpack_bitmask(bitmask[2], native.vocab_size + 100)
    assert not unpacked[native.vocab_size :].any()
    assert torch.equal(unpacked[: native.vocab_size], native.allowed_tokens())
    assert bool(unpack_bitmask(bitmask[1], native.vocab_size).all())
    with pytest.raises(TypeError):
        native.fill_next_token_bitmask(bitmask.to(torch.int64))
    with pytest.raises(IndexError):
        native.fill_next_token_bitmask(bitmask, row=3)
    with pytest.raises(ValueError):
        native.fill_next_token_bitmask(allocate_token_bitmask(1, 64))


def test_index_is_cached_on_disk_and_rebuilt_when_unusable(qwen2_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_CACHE_DIR", str(tmp_path / "cache"))
    vocabulary = Vocabulary.from_tokenizer(qwen2_tokenizer)
    built = ProgramTokenIndex.for_vocabulary(vocabulary)
    path = cache_path("program-index", vocabulary.fingerprint)
    assert not built.loaded_from_cache and path.is_file()
    loaded = ProgramTokenIndex.for_vocabulary(vocabulary)
    assert loaded.loaded_from_cache
    document = DOCUMENTS["hundred"]
    widths = [len(line) for line in Document(document).lines]
    for prefix in (b"", b'<copy lines="4', b"<gen>x"):
        masks = []
        for index in (built, loaded):
            matcher = ProgramMatcher(index, widths)
            assert matcher.accept_bytes(prefix) or not prefix
            masks.append(native_mask(matcher))
        assert torch.equal(*masks)

    intact = path.read_bytes()
    for damaged in (intact[: len(intact) // 2], intact[:100] + b"\x00" + intact[101:], b""):
        path.write_bytes(damaged)
        rebuilt = ProgramTokenIndex.for_vocabulary(vocabulary)
        assert not rebuilt.loaded_from_cache and path.read_bytes() == intact

    other = Vocabulary((*vocabulary.token_bytes[:-1], b"changed"), vocabulary.eos_token_id)
    path.rename(cache_path("program-index", other.fingerprint))
    assert not ProgramTokenIndex.for_vocabulary(other).loaded_from_cache

    monkeypatch.setenv("CAD_CACHE_DIR", str(path))  # a file, not a folder: nothing is written
    assert not ProgramTokenIndex.for_vocabulary(vocabulary).loaded_from_cache


HOLD = re.compile(rb"<\\*(?:/(?:g(?:e(?:n)?)?)?)?\Z")
"""A gen body's end that may still become ``</gen>`` or its escape (at most 64 bytes)."""
PROBE_ALPHABET = b'<\\/gen>ab\n"0123456789-:'


def reference_probe(structure, state, body: bytes, definite: int, data: bytes, cross_ops: bool):
    """What ``ProgramMatcher.probe`` reports, from the Python byte transitions."""
    if structure.walk(state, data, cross_ops=cross_ops) is None:
        return None
    pieces: list = []

    def decide(until: int) -> None:
        if until > definite:
            pieces.append(re.sub(rb"<\\(\\*)/gen>", rb"<\1/gen>", body[definite:until]))

    for byte in data:
        before = state
        state, ended = structure.step(before, byte)
        if before[0] == "await" and state[0] == "gen":
            body, definite = b"", 0
        elif before[0] == "gen":
            body += bytes((byte,))
            if state[0] == "lit":
                decide(len(body) - len(b"</gen>"))
                definite = len(body) - len(b"</gen>")
        if ended and isinstance(before[2], CopyLines | CopySpan):
            pieces.append(("lines", before[2].start, before[2].end))
    held = b""
    if state[0] == "gen":
        match = HOLD.search(body, max(0, len(body) - 64))
        decided = match.start() if match else len(body)
        if decided > definite:
            decide(decided)
            definite = decided
        held = body[definite:]
    return state, pieces, definite, held, body


def same_state(native, expected: tuple) -> bool:
    if native.mode != expected[0]:
        return False
    if expected[0] == "await":
        return native.prefix == expected[1]
    if expected[0] == "num":
        return (native.kind, native.values, native.digits) == expected[1:]
    return True


def test_probe_reports_the_resolved_text_of_the_python_transitions(indexes) -> None:
    """Walking bytes without taking them reports the state after them, the resolved pieces
    (decided gen text unescaped, copies that end) and the held end of a gen body, as the
    Python transitions and the hold pattern give them, from every point of programs whose
    gen bodies hold escapes and look-alikes of ``</gen>``."""
    text = "".join(f"line {n}\n" for n in range(1, 13))
    widths = [len(line) for line in Document(text).lines]
    structure = ProgramStructure(widths, subline=False)
    bodies = ["x = 1", "<\\/gen> and <\\\\/gen", "a </ge b <\\\\\\/gen>", "<" * 3 + "\\" * 70]
    rng = random.Random(7)
    for body in bodies:
        program = f'<copy lines="1-3"/>\n<gen>{body}\n</gen>\n<copy lines="5-12"/>\n</program>'
        data = program.encode()
        matcher = ProgramMatcher(indexes[0], widths)
        state, definite_native, definite, gen_body = AWAIT, 0, 0, b""
        position = 0
        while position < len(data):
            for _ in range(12):
                if rng.random() < 0.5:
                    chunk = data[position : position + rng.randint(1, 10)]
                else:
                    chunk = bytes(rng.choice(PROBE_ALPHABET) for _ in range(rng.randint(1, 8)))
                cross = rng.random() < 0.5
                expected = reference_probe(structure, state, gen_body, definite, chunk, cross)
                probed = matcher.probe(chunk, cross, definite_native)
                assert (probed is None) == (expected is None), (data[:position], chunk)
                if probed is not None:
                    assert same_state(probed[0], expected[0]), (data[:position], chunk)
                    assert probed[1:] == (expected[1], expected[2], expected[3])
            step = data[position : position + rng.randint(1, 6)]
            probed = matcher.probe(step, True, definite_native)
            expected = reference_probe(structure, state, gen_body, definite, step, True)
            assert matcher.accept_bytes(step)
            state, definite, gen_body = expected[0], expected[2], expected[4]
            definite_native = probed[2]
            assert matcher.gen_body == (gen_body if state[0] == "gen" else b"")
            position += len(step)
