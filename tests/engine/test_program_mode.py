"""Program mode's chunk loop against a stand-in engine built on the in-process model: the same
bytes, programs and forwards as the in-process decoder, with copies prefilled in one forward
and gen bodies decoded inside one chunk. The stand-in keeps vLLM's session rules: a chunk is
prefilled in one forward, sampling happens under the processor's masks, and a chunk's last
sampled token stays out of the cache until the next chunk feeds it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import torch

from cad.engine.masking import BatchMasks
from cad.engine.program_mode import Chunk, EditTokenizer, decode_program, in_gen_body
from cad.grammar import ProgramTokenIndex
from cad.resolver import CopyLines, Document, Gen, Program, format_program, oracle
from cad.selector import ContextTooLongError, Decoder, kv, load_draft_config
from cad.selector.prompt import program_prompt
from cad.selector.tape import follow_program
from tests.conftest import heval_pairs

INSTRUCTION = "Fix the bug."


class ModelSession:
    """An engine of one request: the tiny model, a KV cache and the processor's masks."""

    def __init__(self, loaded, index: ProgramTokenIndex) -> None:
        self.loaded = loaded
        self.cache = kv.new_cache(loaded.model)
        self.masks = BatchMasks(lambda: index, 1)
        self.chunks: list[Chunk] = []
        self.forwards = 0

    def _forward(self, tokens: list[int]) -> torch.Tensor:
        self.forwards += 1
        return kv.append(self.loaded.model, self.cache, tokens, self.loaded.device)

    async def run(self, chunk: Chunk) -> list[int]:
        self.chunks.append(chunk)
        sampled: list[int] = []
        self.masks.remove(0)
        self.masks.add(0, chunk.spec, sampled)
        logits = self._forward(chunk.tokens)
        while True:
            masked = self.masks.apply(logits[None].clone())
            token = int(torch.argmax(masked[0]))
            sampled.append(token)
            if len(sampled) >= chunk.max_tokens or token in chunk.stop_token_ids:
                return sampled
            logits = self._forward([token])


class LengthLimitedSession:
    """An engine of one request that keeps vLLM's length rule: a chunk that could carry the
    session past ``limit`` tokens would break the engine core (here it fails the test). Its
    model writes ``target`` (the processor's forced-program mask over flat logits), whatever
    the edit asked for."""

    def __init__(self, index: ProgramTokenIndex, vocab: int, limit: int, target: bytes) -> None:
        self.masks = BatchMasks(lambda: index, 1)
        self.vocab = vocab
        self.limit = limit
        self.target = target
        self.held = 0
        self.chunks: list[Chunk] = []

    async def run(self, chunk: Chunk) -> list[int]:
        assert self.held + len(chunk.tokens) + chunk.max_tokens <= self.limit
        self.chunks.append(chunk)
        sampled: list[int] = []
        self.masks.remove(0)
        self.masks.add(0, replace(chunk.spec, target=self.target), sampled)
        while len(sampled) < chunk.max_tokens:
            token = int(torch.argmax(self.masks.apply(torch.zeros(1, self.vocab))[0]))
            sampled.append(token)
            if token in chunk.stop_token_ids:
                break
        self.held += len(chunk.tokens) + len(sampled) - 1
        return sampled


def decode(loaded, tokens: EditTokenizer, before: str, **options):
    session = ModelSession(loaded, tokens.index)
    result = asyncio.run(decode_program(tokens, session, before, INSTRUCTION, **options))
    return result, session


@pytest.fixture(scope="module")
def tokens(tiny_qwen) -> EditTokenizer:
    index = ProgramTokenIndex.for_tokenizer(tiny_qwen.tokenizer, tiny_qwen.vocab_size)
    return EditTokenizer(tiny_qwen.tokenizer, index, tiny_qwen.context_length)


def test_forced_programs_match_the_in_process_decoder(tiny_qwen, tokens) -> None:
    """Without drafts the engine decides one token per step, as the in-process decoder does
    with a draft budget of 0."""
    decoder = Decoder(tiny_qwen, max_new_tokens=4096, draft_budget=0)
    for before, after in heval_pairs("python")[:2]:
        program = oracle(before, after)
        result, session = decode(
            tiny_qwen, tokens, before, program=program, max_new_tokens=4096, draft_budget=0
        )
        reference = decoder.edit(before, INSTRUCTION, program=program)
        assert result.text == reference.text == after
        assert result.program == reference.program == program
        for key in ("forwards", "generated_tokens", "forced_tokens", "copied_tokens", "ops"):
            assert getattr(result.stats, key) == getattr(reference.stats, key), key
        assert session.forwards == result.stats.forwards + 1


@pytest.mark.parametrize("budget", [None, 16, 96])
def test_forced_programs_through_drafts_take_cad_edits_forwards(tiny_qwen, tokens, budget) -> None:
    """A given program followed through draft trees: the in-process decoder's forwards
    (same budget, the shipped accelerator configuration), one engine forward per chunk, and
    the cache holding the prompt and the program's tokens in order, never a rejected draft
    (all of them but the last decision and the literal after it, which no forward needs)."""
    config = load_draft_config()
    decoder = Decoder(tiny_qwen, max_new_tokens=4096, config=config, draft_budget=budget)
    pairs = heval_pairs("python")
    for before, after in [pairs[0], pairs[7], pairs[20]]:
        program = oracle(before, after)
        result, session = decode(
            tiny_qwen, tokens, before, program=program, max_new_tokens=4096, draft_budget=budget
        )
        reference = decoder.edit(before, INSTRUCTION, program=program)
        assert result.text == reference.text == after
        assert result.program == reference.program == program
        stats = result.stats
        for key in ("forwards", "generated_tokens", "forced_tokens", "copied_tokens", "ops"):
            assert getattr(stats, key) == getattr(reference.stats, key), key
        assert stats.drafted_tokens == reference.stats.drafted_tokens
        assert session.forwards == len(session.chunks) == stats.forwards + 1
        fed = [token for chunk in session.chunks for token in chunk.tokens]
        tape = follow_program(tokens.index, tokens.encode, Document(before), program)
        written = fed[: stats.prefill_tokens] + list(tape.tokens)
        assert fed == written[: len(fed)] == written[: kv.cache_length(session.cache)]
        assert 0 < len(written) - len(fed) <= 8
        assert stats.forwards < stats.generated_tokens  # several decisions per forward


def test_free_decoding_matches_the_in_process_decoder(tiny_qwen, tokens) -> None:
    before = heval_pairs("python")[0][0]
    result, session = decode(tiny_qwen, tokens, before, max_new_tokens=16)
    reference = Decoder(tiny_qwen, max_new_tokens=16, draft_budget=0).edit(before, INSTRUCTION)
    assert format_program(result.program) == format_program(reference.program)
    assert result.text == reference.text
    assert result.stats.truncated and reference.stats.truncated
    # The in-process decoder feeds its last decision before it notices the spent budget.
    assert result.stats.forwards == reference.stats.forwards - 1 == session.forwards - 1


def test_copies_are_one_chunk_and_gen_bodies_decode_inside_one(tiny_qwen, tokens) -> None:
    before = "".join(f"line {i}\n" for i in range(1, 201))
    body = "a generated line without closing brackets\n"
    program = Program((CopyLines(1, 99), Gen(body), CopyLines(101, 200)))
    result, session = decode(tiny_qwen, tokens, before, program=program, draft_budget=0)
    assert result.text == before.replace("line 100\n", body)
    copies = [c for c in session.chunks[1:] if len(c.tokens) > 200]
    assert len(copies) == 2  # each copy's text went in with ONE chunk, i.e. one forward
    gen_chunks = [c for c in session.chunks if in_gen_body(c.spec.program)]
    assert gen_chunks and all(c.max_tokens > 1 for c in gen_chunks)
    assert len(session.chunks) < result.stats.generated_tokens
    assert session.forwards == result.stats.forwards + 1


def test_budget_and_context_limits(tiny_qwen, tokens) -> None:
    program = Program((CopyLines(1, 1), Gen("a long generated tail " * 20)))
    result, _ = decode(tiny_qwen, tokens, "keep\n", program=program, max_new_tokens=8)
    assert result.stats.truncated and result.stats.generated_tokens == 8
    assert result.text.startswith("keep\n")
    short = EditTokenizer(tokens.tokenizer, tokens.index, 256)
    with pytest.raises(ContextTooLongError, match="context is 256"):
        decode(tiny_qwen, short, "word " * 400)


LINES = "".join(f"line {i}\n" for i in range(1, 41))
COPY_ALL_TWELVE_TIMES = Program((CopyLines(1, 40),) * 12)


def room_for_two_copies(tiny_qwen, tokens: EditTokenizer) -> EditTokenizer:
    """The tokenizer with a context that holds the prompt and about two copies of LINES."""
    prompt = program_prompt(tokens.tokenizer, Document(LINES), INSTRUCTION)
    limit = len(prompt) + 2 * len(tokens.encode(LINES)) + 40
    return EditTokenizer(tokens.tokenizer, tokens.index, limit)


def test_a_model_copying_past_the_context_stops_cleanly(tiny_qwen, tokens) -> None:
    short = room_for_two_copies(tiny_qwen, tokens)
    target = format_program(COPY_ALL_TWELVE_TIMES).encode()
    session = LengthLimitedSession(tokens.index, tiny_qwen.vocab_size, short.context_length, target)
    result = asyncio.run(
        decode_program(short, session, LINES, INSTRUCTION, max_new_tokens=2**31 - 1)
    )
    assert result.stats.truncated
    assert result.text.startswith(LINES * 2) and len(result.text) < len(LINES) * 12
    assert session.held <= short.context_length


def test_a_forced_program_that_cannot_fit_is_refused_before_the_engine(tiny_qwen, tokens) -> None:
    short = room_for_two_copies(tiny_qwen, tokens)
    session = LengthLimitedSession(tokens.index, tiny_qwen.vocab_size, short.context_length, b"")
    with pytest.raises(ContextTooLongError) as caught:
        asyncio.run(
            decode_program(short, session, LINES, INSTRUCTION, program=COPY_ALL_TWELVE_TIMES)
        )
    message = str(caught.value)
    assert message.startswith("the edit needs ") and "copied" in message
    assert f"the model's context is {short.context_length} tokens" in message
    assert session.chunks == []


def test_a_program_writing_gigabytes_is_refused_without_resolving_it(tiny_qwen, tokens) -> None:
    document = "".join(f"{i:099d}\n" for i in range(20))
    program = Program((CopyLines(1, 20),) * 1_000_000)  # 2 GB of output
    session = LengthLimitedSession(tokens.index, tiny_qwen.vocab_size, 1 << 20, b"")
    with pytest.raises(ContextTooLongError, match=r"at least .* output of over"):
        asyncio.run(decode_program(tokens, session, document, INSTRUCTION, program=program))
    assert session.chunks == []


def test_gen_body_detection() -> None:
    assert not in_gen_body(b"")
    assert in_gen_body(b"<gen>")
    assert in_gen_body(b'<copy lines="1-2"/>\n<gen>x <gen> </ge')
    assert not in_gen_body(b"<gen>x</gen>\n<")
    assert in_gen_body(b"<gen>x</gen>\n<gen>a <\\/gen>")
