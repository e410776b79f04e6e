"""The decoder end to end on tiny random models with the real tokenizers."""

from __future__ import annotations

import threading

import pytest
import torch

from cad.grammar import Matcher, masked_argmax
from cad.resolver import CopyLines, Gen, Program, format, oracle, parse, resolve
from cad.selector import (
    Cancelled,
    ContextTooLongError,
    Decoder,
    Sampling,
    generate_constrained,
    prompt_lookup,
    regenerate,
    sampling,
)
from cad.selector.tree_verify import NodeLogits
from tests.conftest import heval_pairs

INSTRUCTION = "Fix the bug."


@pytest.mark.parametrize("language", ["python", "js"])
def test_forced_program_is_byte_exact_on_every_heval_pair(tiny_qwen, language: str) -> None:
    decoder = Decoder(tiny_qwen, max_new_tokens=4096)
    for before, after in heval_pairs(language):
        program = oracle(before, after)
        result = decoder.edit(before, INSTRUCTION, program=program)
        assert result.text == after
        assert result.program == program
        assert not result.stats.truncated


def test_a_forced_program_still_makes_the_model_choose_at_every_decision(
    tiny_qwen, monkeypatch
) -> None:
    """Forcing replaces the model's choices, not their cost: each decision still fills its
    mask and chooses from the logits (a CPU's greedy choice over a whole row: in native
    code; where the mask allows a few tokens, over their logits alone) before the program's
    token is taken."""
    choices: list[str] = []
    among = NodeLogits.among

    def counting_argmax(logits: torch.Tensor, bitmask: torch.Tensor) -> int | None:
        assert logits.shape == (tiny_qwen.vocab_size,)
        choices.append("row")
        return masked_argmax(logits, bitmask)

    def counting_among(self, node: int, ids: torch.Tensor) -> torch.Tensor:
        choices.append("few")
        return among(self, node, ids)

    monkeypatch.setattr(sampling, "masked_argmax", counting_argmax)
    monkeypatch.setattr(NodeLogits, "among", counting_among)
    before, after = heval_pairs("python")[0]
    result = Decoder(tiny_qwen).edit(before, INSTRUCTION, program=oracle(before, after))
    assert result.text == after
    assert len(choices) == result.stats.generated_tokens > 0
    assert "few" in choices


def test_forced_program_with_multi_digit_tokens_and_subline(tiny_llama) -> None:
    decoder = Decoder(tiny_llama, max_new_tokens=4096)
    for before, after in heval_pairs("python")[:20]:
        for granularity in ("line", "subline"):
            program = oracle(before, after, granularity=granularity)
            assert decoder.edit(before, INSTRUCTION, program=program).text == after


def test_copies_cost_one_forward_each(tiny_qwen) -> None:
    before = "".join(f"line {i}\n" for i in range(1, 301))
    after = before.replace("line 150\n", "line one hundred fifty\n")
    program = oracle(before, after)
    assert len(program.ops) == 3
    cad = Decoder(tiny_qwen).edit(before, INSTRUCTION, program=program)
    ar = regenerate(tiny_qwen, before, INSTRUCTION, after)
    pld = prompt_lookup(tiny_qwen, before, INSTRUCTION, after)
    assert cad.text == ar.text == pld.text == after
    assert cad.stats.copied_tokens > 1000
    assert cad.stats.forwards < 40 < pld.stats.forwards < ar.stats.forwards
    assert ar.stats.forwards == len(tiny_qwen.tokenizer.encode(after, add_special_tokens=False))
    stats = cad.stats.to_dict()
    for key in (
        "forwards",
        "generated_tokens",
        "copied_tokens",
        "forced_tokens",
        "wall_s",
        "prefill_s",
    ):
        assert key in stats


@pytest.mark.parametrize("seed", range(12))
def test_sampled_programs_always_parse_and_resolve(tiny_qwen, seed: int) -> None:
    document = "".join(f"x = {i}\r\n" if i % 3 else f"y{i}\n" for i in range(1, 40 + seed * 9))
    decoder = Decoder(
        tiny_qwen,
        max_new_tokens=60,
        subline=seed % 2 == 1,
        sampling=Sampling(temperature=1.0, seed=seed),
    )
    result = decoder.edit(document, INSTRUCTION)
    text = format(result.program)
    assert resolve(parse(text), document) == result.text
    assert result.stats.generated_tokens <= 60


def test_budget_ends_the_program_cleanly(tiny_qwen) -> None:
    program = Program((CopyLines(1, 1), Gen("a long generated tail " * 20)))
    result = Decoder(tiny_qwen, max_new_tokens=8).edit("keep\n", INSTRUCTION, program=program)
    assert result.stats.truncated
    assert result.stats.generated_tokens == 8
    assert resolve(parse(format(result.program)), "keep\n") == result.text
    assert result.text.startswith("keep\n")


def test_cancel_stops_within_one_step(tiny_qwen) -> None:
    cancel = threading.Event()
    seen = []

    def on_progress(progress) -> None:
        seen.append(progress)
        cancel.set()

    decoder = Decoder(tiny_qwen, max_new_tokens=500, sampling=Sampling(temperature=1.0, seed=3))
    with pytest.raises(Cancelled):
        decoder.edit("a\nb\n" * 50, INSTRUCTION, on_progress=on_progress, cancel=cancel)
    assert len(seen) == 1


def test_document_too_long_for_the_context(tiny_qwen, monkeypatch) -> None:
    monkeypatch.setattr(type(tiny_qwen), "context_length", property(lambda self: 256))
    with pytest.raises(ContextTooLongError, match="context is 256"):
        Decoder(tiny_qwen).edit("word " * 400, INSTRUCTION)


def test_context_error_reports_the_tokens_the_edit_needs(tiny_qwen, monkeypatch) -> None:
    from cad.resolver import Document
    from cad.selector.prompt import program_prompt

    monkeypatch.setattr(type(tiny_qwen), "context_length", property(lambda self: 256))
    document = "word " * 400
    decoder = Decoder(tiny_qwen)
    prompt = len(program_prompt(tiny_qwen.tokenizer, Document(document), INSTRUCTION))
    copy = len(decoder.encode(document))
    needed = prompt + copy + decoder.budget + 16
    message = (
        f"needs about {needed} tokens of context \\({prompt} of prompt, {copy} for a copy of "
        f"the document, {decoder.budget} of draft tree and 16 to write\\)"
    )
    with pytest.raises(ContextTooLongError, match=message):
        decoder.edit(document, INSTRUCTION)


def test_out_of_range_forced_program_is_refused_before_decoding(tiny_qwen) -> None:
    with pytest.raises(ValueError, match="out of range"):
        Decoder(tiny_qwen).edit("a\n", INSTRUCTION, program=Program((CopyLines(1, 2),)))


class ChoiceMatcher:
    """A Matcher whose language is a handful of words: enough to drive rewrite mode."""

    def __init__(self, tokenizer, vocab_size: int, words: list[bytes]) -> None:
        from cad.grammar import Vocabulary

        self.vocabulary = Vocabulary.from_tokenizer(tokenizer, vocab_size)
        self.vocab_size = vocab_size
        self.words = words
        self.history: list[bytes] = [b""]

    def _ok(self, text: bytes) -> bool:
        return any(word.startswith(text) for word in self.words)

    def accept_token(self, token_id: int) -> bool:
        data = self.vocabulary.token_bytes[token_id]
        if not data or not self._ok(self.history[-1] + data):
            return False
        self.history.append(self.history[-1] + data)
        return True

    def allowed_tokens(self) -> torch.Tensor:
        text = self.history[-1]
        return torch.tensor([bool(d) and self._ok(text + d) for d in self.vocabulary.token_bytes])

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        from cad.grammar.bitmask import fill_from_allowed

        fill_from_allowed(bitmask, row, self.allowed_tokens())

    def rollback(self, k: int) -> None:
        del self.history[len(self.history) - k :]

    def is_accepting(self) -> bool:
        return self.history[-1] in self.words


@pytest.mark.parametrize("seed", range(3))
def test_any_matcher_constrains_rewrite_generation(tiny_qwen, seed: int) -> None:
    words = [b"alpha beta", b"gamma", b"delta\n"]
    matcher = ChoiceMatcher(tiny_qwen.tokenizer, tiny_qwen.vocab_size, words)
    assert isinstance(matcher, Matcher)
    result = generate_constrained(
        tiny_qwen, "a\n", INSTRUCTION, matcher, sampling=Sampling(temperature=1.0, seed=seed)
    )
    assert result.text.encode() in words
    assert not result.stats.truncated
    assert result.stats.generated_tokens == len(matcher.history) - 1


def test_rewrite_generation_budget(tiny_qwen) -> None:
    matcher = ChoiceMatcher(tiny_qwen.tokenizer, tiny_qwen.vocab_size, [b"x" * 50])
    result = generate_constrained(tiny_qwen, "a\n", INSTRUCTION, matcher, max_new_tokens=3)
    assert result.stats.truncated
    assert result.stats.generated_tokens == 3
