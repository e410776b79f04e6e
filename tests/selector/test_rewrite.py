"""Rewrite mode with draft graphs: exactly the tokens of plain decoding, whatever the drafts."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
import torch

from cad.selector import Cancelled, Sampling, kv, prompt_lookup, tree_verify
from cad.selector.draft_config import load_draft_config
from cad.selector.rewrite import (
    DraftStep,
    extract_file,
    rewrite,
    rewrite_forced,
    speculate,
    stop_tokens,
)
from tests.conftest import SMALL_DRAFTS as CONFIG
from tests.conftest import heval_pairs

INSTRUCTION = "Fix the bug."
DOCUMENT_ONLY = replace(CONFIG, output=0)


def plain_greedy(loaded, prompt: list[int], max_new_tokens: int) -> list[int]:
    """The reference: one token per forward, argmax, stop at end-of-sequence."""
    stops = stop_tokens(loaded)
    cache = kv.new_cache(loaded.model)
    logits = kv.prefill(loaded.model, cache, prompt, loaded.device)
    output: list[int] = []
    while len(output) < max_new_tokens:
        token = int(torch.argmax(logits))
        if token in stops:
            break
        output.append(token)
        logits = kv.decode_one(loaded.model, cache, token, loaded.device)
    return output


def _prompt(seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 20000, (24 + seed % 5,), generator=generator).tolist()


def _documents(reference: list[int], seed: int) -> dict[str, list[int]]:
    """Draft sources from all right to all wrong."""
    generator = torch.Generator().manual_seed(1000 + seed)
    mutated = list(reference)
    for index in torch.randint(0, len(reference), (4,), generator=generator).tolist():
        mutated[index] = (mutated[index] + 1) % 20000
    shifted = [*reference[:8], 5, 6, 7, *reference[8:16], *reference[19:]]
    unrelated = torch.randint(20000, 30000, (80,), generator=generator).tolist()
    return {
        "exact": reference,
        "mutated": mutated,
        "shifted": shifted,
        "unrelated": unrelated,
    }


@pytest.mark.parametrize("seed", range(6))
def test_greedy_rewrite_emits_exactly_the_plain_greedy_tokens(tiny_qwen, seed: int) -> None:
    prompt = _prompt(seed)
    max_new = 24 + 4 * seed
    reference = plain_greedy(tiny_qwen, prompt, max_new)
    for name, document in _documents(reference, seed).items():
        output, stats = speculate(
            tiny_qwen, prompt, document, config=CONFIG, max_new_tokens=max_new
        )
        assert output == reference, name
        assert stats.generated_tokens + stats.copied_tokens == len(reference)
        if name == "exact":
            assert stats.forwards <= 3


def test_every_draft_wrong_costs_one_forward_per_token(tiny_qwen) -> None:
    prompt = _prompt(99)
    reference = plain_greedy(tiny_qwen, prompt, 20)
    wrong = [(t + 7) % 20000 for t in reference]
    unrelated = _documents(reference, 99)["unrelated"]
    for document in (wrong, [], unrelated):
        output, stats = speculate(
            tiny_qwen, prompt, document, config=replace(DOCUMENT_ONLY, top_k=0), max_new_tokens=20
        )
        assert output == reference
        assert stats.copied_tokens == 0
        assert stats.forwards == len(reference)


@pytest.mark.parametrize("batched", [False, True])
def test_a_forced_rewrite_pays_for_the_choices_it_replaces(
    tiny_qwen, monkeypatch, batched: bool
) -> None:
    """Forced to the tokens the model writes by itself, a rewrite takes the same forwards and
    projects the same logits, chunk for chunk: forcing replaces the choices, not their cost.
    ``batched``: the choices along a chain made together, as on a GPU."""
    monkeypatch.setattr(tree_verify, "batched_reads", lambda device: batched)
    projected: list[int] = []
    real_head = tree_verify.output_head

    def counting_head(model):
        head = real_head(model)

        def project(hidden: torch.Tensor) -> torch.Tensor:
            projected.append(hidden.shape[0])
            return head(hidden)

        return project

    monkeypatch.setattr(tree_verify, "output_head", counting_head)
    for seed in range(3):
        prompt = _prompt(seed)
        document = _documents(plain_greedy(tiny_qwen, prompt, 24), seed)["mutated"]
        projected.clear()
        output, unforced = speculate(tiny_qwen, prompt, document, config=CONFIG, max_new_tokens=24)
        free = list(projected)
        projected.clear()
        forced_output, forced = speculate(
            tiny_qwen, prompt, document, config=CONFIG, max_new_tokens=24, target_ids=output
        )
        assert forced_output == output
        assert forced.forwards == unforced.forwards
        assert projected == free and sum(free) > 0


def test_a_tiny_temperature_samples_the_greedy_tokens(tiny_qwen) -> None:
    for seed in range(3):
        prompt = _prompt(seed)
        reference = plain_greedy(tiny_qwen, prompt, 24)
        document = _documents(reference, seed)["mutated"]
        sampling = Sampling(temperature=1e-7, seed=seed)
        output, stats = speculate(
            tiny_qwen, prompt, document, config=CONFIG, max_new_tokens=24, sampling=sampling
        )
        assert output == reference
        assert stats.copied_tokens > 0


def test_the_shipped_configurations_differ_by_device_in_reach_and_program_budget() -> None:
    accelerator, cpu = load_draft_config(device="cuda"), load_draft_config(device="cpu")
    assert load_draft_config() == accelerator
    assert (accelerator.min_reach, cpu.min_reach) == (0.0, 0.1)
    assert (accelerator.program_budget, cpu.program_budget) == (None, 16)
    assert replace(cpu, min_reach=0.0, program_budget=None, calibrated_on="", rates={}) == replace(
        accelerator, calibrated_on="", rates={}
    )


def test_rewrite_on_a_cpu_drafts_with_the_cpu_configuration(tiny_qwen) -> None:
    """With no configuration given, a model on the CPU drafts exactly as the CPU one says,
    which verifies fewer unlikely nodes than the accelerator one."""
    before, after = heval_pairs("python")[0]
    drafted = {}
    for name, config in [
        ("default", None),
        ("cpu", load_draft_config(device="cpu")),
        ("accelerator", load_draft_config(device="cuda")),
    ]:
        result = rewrite_forced(tiny_qwen, before, INSTRUCTION, after, config=config)
        assert result.text == after
        drafted[name] = result.stats.drafted_tokens
    assert drafted["default"] == drafted["cpu"] < drafted["accelerator"]


@pytest.mark.parametrize("language", ["python", "js"])
def test_forced_rewrite_is_byte_exact_and_needs_few_forwards(tiny_qwen, language: str) -> None:
    config = load_draft_config()
    ours = baseline = 0
    for before, after in heval_pairs(language)[:6]:
        trace: list[DraftStep] = []
        result = rewrite_forced(tiny_qwen, before, INSTRUCTION, after, config=config, trace=trace)
        assert result.text == after
        assert len(trace) == result.stats.forwards + 1
        assert result.stats.accepted_per_forward > 1
        ours += result.stats.forwards
        baseline += prompt_lookup(tiny_qwen, before, INSTRUCTION, after).stats.forwards
    assert 2 * ours <= baseline


def test_rewrite_reports_progress_and_stops_on_cancel(tiny_qwen) -> None:
    before, _ = heval_pairs("python")[0]
    seen = []
    result = rewrite(
        tiny_qwen, before, INSTRUCTION, config=CONFIG, max_new_tokens=20, on_progress=seen.append
    )
    assert result.stats.truncated
    assert result.stats.generated_tokens + result.stats.copied_tokens == 20
    assert seen and seen[-1].tokens_generated == 20
    assert seen[-1].ops == result.stats.forwards
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        rewrite(tiny_qwen, before, INSTRUCTION, config=CONFIG, cancel=cancel)


@pytest.mark.parametrize("seed", range(2))
def test_sampling_is_deterministic_under_a_seed_and_valid(tiny_qwen, seed: int) -> None:
    prompt = _prompt(seed)
    sampling = Sampling(temperature=0.8, top_p=0.95, seed=seed)
    document = plain_greedy(tiny_qwen, prompt, 20)
    runs = [
        speculate(tiny_qwen, prompt, document, config=CONFIG, max_new_tokens=20, sampling=sampling)
        for _ in range(2)
    ]
    assert runs[0][0] == runs[1][0]
    output, stats = runs[0]
    assert 0 < len(output) <= 20
    assert all(0 <= t < tiny_qwen.vocab_size for t in output)
    assert not set(output) & stop_tokens(tiny_qwen)
    assert stats.generated_tokens + stats.copied_tokens == len(output)


@pytest.mark.parametrize(
    ("reply", "file"),
    [
        ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1\n"),
        ("```\nx = 1\n```\n", "x = 1\n"),
        ("def f():\n    pass\n", "def f():\n    pass\n"),
        ("no fence ``` inside\n", "no fence ``` inside\n"),
    ],
)
def test_extract_file_strips_a_surrounding_fence(reply: str, file: str) -> None:
    assert extract_file(reply) == file


def test_extract_file_drops_the_line_break_the_prompt_added() -> None:
    assert extract_file("```\nx = 1\n```", final_newline=False) == "x = 1"
    assert extract_file("````md\na ``` b\n````\n") == "a ``` b\n"
    assert extract_file("x = 1", final_newline=False) == "x = 1"


def test_rewrite_prompt_shows_the_document_and_the_range(tiny_qwen) -> None:
    from cad.resolver import Document
    from cad.selector.prompt import rewrite_prompt

    before, _ = heval_pairs("python")[0]
    document = Document(before)
    whole = tiny_qwen.tokenizer.decode(rewrite_prompt(tiny_qwen.tokenizer, document, "Fix."))
    assert f"```\n{before}```" in whole
    part = tiny_qwen.tokenizer.decode(
        rewrite_prompt(tiny_qwen.tokenizer, document, "Fix.", lines=(2, 3))
    )
    assert "Rewrite lines 2-3 only" in part
    assert f"```\n{''.join(document.lines[1:3])}```" in part


def test_a_range_rewrite_keeps_the_rest_of_the_document(tiny_qwen) -> None:
    before, _ = heval_pairs("python")[1]
    lines = before.splitlines(keepends=True)
    result = rewrite(tiny_qwen, before, INSTRUCTION, config=CONFIG, max_new_tokens=12, lines=(3, 5))
    assert result.stats.truncated
    assert result.text.startswith("".join(lines[:2]))
    assert result.text.endswith("".join(lines[5:]))
    with pytest.raises(ValueError, match="outside the document"):
        rewrite(tiny_qwen, before, INSTRUCTION, config=CONFIG, lines=(4, 400))
