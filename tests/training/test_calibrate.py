"""Draft-graph calibration: the model-free replay is the real decode loop, calibration learns
the draft shapes a corpus accepts, and ``cad calibrate`` writes a usable configuration."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cad.selector.draft_config import DraftConfig, load_draft_config
from cad.selector.rewrite import DraftStep, rewrite_forced
from cad.training.calibrate import calibrate, replay, replay_trace
from cad.training.datasets import EditExample, write_jsonl
from tests.conftest import TOKENIZERS, heval_pairs
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
STOP = 0


def _document(rng: random.Random, length: int) -> list[int]:
    """Distinct token ids, so every n-gram occurs once and drafts are unambiguous."""
    return rng.sample(range(1000, 60000), length)


def _substitutions(seed: int, n: int = 30) -> list[tuple[list[int], list[int]]]:
    """Edits that replace one token somewhere in a long document."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        before = _document(rng, 300)
        after = list(before)
        after[rng.randrange(20, 280)] = rng.randrange(60000, 70000)
        pairs.append((before, after))
    return pairs


def _repeated_insertions(seed: int, n: int = 30) -> list[tuple[list[int], list[int]]]:
    """Edits that insert new text and then repeat it (a new line written twice)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        before = _document(rng, 200)
        new = [rng.randrange(60000, 70000) for _ in range(30)]
        cut = rng.randrange(20, 180)
        pairs.append((before, before[:cut] + new + new + before[cut:]))
    return pairs


def _traces(pairs):
    return [replay_trace(before, after, STOP) for before, after in pairs]


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    """A 2-layer random Qwen2 model with the real Qwen2 tokenizer, on CPU."""
    from cad.selector import load_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-qwen"), "qwen2")
    return load_model(str(folder), device="cpu", dtype="float32")


def test_replay_takes_the_forwards_of_real_forced_decoding(tiny_qwen) -> None:
    config = replace(load_draft_config(), top_k=0, budget=24)
    stop = tiny_qwen.tokenizer.eos_token_id
    for before, after in heval_pairs("python")[:5]:
        trace: list[DraftStep] = []
        result = rewrite_forced(tiny_qwen, before, "Fix it.", after, config=config, trace=trace)
        encode = tiny_qwen.tokenizer.encode
        steps = replay(encode(before), encode(after), config, stop=stop)
        assert [step for step, _ in steps] == trace
        assert len(steps) == result.stats.forwards + 1
        assert sum(nodes for _, nodes in steps) == result.stats.drafted_tokens


def test_verbatim_copies_need_only_the_alignment() -> None:
    rng = random.Random(0)
    docs = [_document(rng, 400) for _ in range(20)]
    result = calibrate(_traces([(d, d) for d in docs]), budgets=(16, 64), token_cost=0.01)
    config = result.config
    assert (config.aligned, config.ngram, config.output, config.top_k) == (1, 0, 0, 0)
    assert min(config.rates["copying"]["aligned:0"]) > 0.95
    assert config.budget == 64
    best = min(result.budgets, key=lambda row: row.cost)
    assert best.forwards < 20 * 400 / 32


def test_substitutions_teach_the_skip_offset() -> None:
    config = calibrate(_traces(_substitutions(1)), budgets=(32,)).config
    assert config.aligned >= 2
    assert min(config.rates["editing"]["aligned:1"]) > 0.9
    assert config.rates["editing"]["aligned:0"][0] < 0.1


def test_repeated_text_teaches_the_output_source() -> None:
    plain = calibrate(_traces(_substitutions(2)), budgets=(32,)).config
    repeated = calibrate(_traces(_repeated_insertions(2)), budgets=(32,)).config
    assert plain.output == 0
    assert repeated.output >= 1
    forwards = [
        sum(len(replay(b, a, config, stop=STOP)) for b, a in _repeated_insertions(3))
        for config in (replace(repeated, output=0), repeated)
    ]
    assert forwards[1] < forwards[0]


def test_a_dearer_draft_token_buys_a_smaller_budget() -> None:
    traces = _traces(_substitutions(4))
    cheap = calibrate(traces, token_cost=0.001).config
    dear = calibrate(traces, token_cost=0.5).config
    assert dear.budget < cheap.budget


def test_calibrated_config_round_trips_and_checks_its_json() -> None:
    config = calibrate(_traces(_substitutions(5, n=8)), budgets=(16,)).config
    assert DraftConfig.from_json(config.to_json()) == config
    with pytest.raises(ValueError, match="unknown draft-config keys: budgit"):
        DraftConfig.from_json('{"budgit": 3}')
    with pytest.raises(ValueError, match="rates"):
        DraftConfig.from_json('{"rates": {"copying": {"aligned:0": [1.5]}}}')


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    examples = [
        EditExample(f"e{i}", "Fix the bug.", before, after)
        for i, (before, after) in enumerate(heval_pairs("python")[:12])
    ]
    write_jsonl(folder / "edits.jsonl", examples)
    return folder


def _cad(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CAD, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cad_calibrate_writes_a_loadable_config_deterministically(corpus: Path) -> None:
    args = ["calibrate", "--data", "edits.jsonl", "--tokenizer", str(TOKENIZERS / "qwen2")]
    first = _cad(*args, "--out", "a.json", cwd=corpus)
    assert first.returncode == 0, first.stderr
    assert "wrote a.json: 12 edits" in first.stderr
    second = _cad(*args, "--out", "b.json", "--token-cost", "0.05", cwd=corpus)
    assert second.returncode == 0, second.stderr
    assert (corpus / "a.json").read_text() == (corpus / "b.json").read_text()
    config = load_draft_config(corpus / "a.json")
    assert config.calibrated_on.startswith("edits.jsonl (12); tokenizer qwen2; gold targets")
    assert config.aligned >= 1 and config.budget > 0
    assert list(corpus.glob(".a.json.*")) == []


def test_cad_calibrate_keeps_a_fixed_budget(corpus: Path) -> None:
    args = ["calibrate", "--data", "edits.jsonl", "--tokenizer", str(TOKENIZERS / "qwen2")]
    result = _cad(*args, "--limit", "4", "--budget", "24", "--out", "fixed.json", cwd=corpus)
    assert result.returncode == 0, result.stderr
    assert "budget 24," in result.stderr
    config = load_draft_config(corpus / "fixed.json")
    assert config.budget == 24
    assert "budget fixed at 24" in config.calibrated_on


def test_cad_calibrate_traces_real_decoding_with_a_model(corpus: Path, tmp_path) -> None:
    model = make_tiny_model(tmp_path / "tiny", "qwen2")
    result = _cad(
        "calibrate", "--data", "edits.jsonl", "--model", str(model), "--device", "cpu",
        "--limit", "3", "--greedy", "--out", "greedy.json", cwd=corpus,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads((corpus / "greedy.json").read_text())
    assert "greedy targets" in data["calibrated_on"]
    assert set(data["rates"]) == {"copying", "editing"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "edits.jsonl", "--out", "c.json"], "give --tokenizer DIR"),
        (["--data", "missing.jsonl", "--tokenizer", "TOK", "--out", "c.json"], "missing.jsonl"),
        (["--data", "edits.jsonl", "--tokenizer", "TOK", "--greedy", "--out", "c.json"], "--model"),
        (["--data", "edits.jsonl", "--tokenizer", "TOK", "--out", "no/c.json"], "does not exist"),
        (["--data", "edits.jsonl", "--tokenizer", "nowhere", "--out", "c.json"], "no such folder"),
        (
            ["--data", "edits.jsonl", "--tokenizer", "TOK", "--model", "m", "--out", "c.json"],
            "choose one of --tokenizer (model-free traces) and --model",
        ),
    ],
)
def test_cad_calibrate_bad_input_is_one_line(corpus: Path, args: list[str], message: str) -> None:
    args = [str(TOKENIZERS / "qwen2") if a == "TOK" else a for a in args]
    result = _cad("calibrate", *args, cwd=corpus)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr
    assert not (corpus / "c.json").exists()


def test_the_program_prior_is_read_off_oracle_programs(qwen2_tokenizer) -> None:
    from cad.grammar import ProgramTokenIndex
    from cad.training.calibrate_program import (
        SEARCHED,
        calibrate_prior,
        fit_prior,
        oracle_edits,
    )

    pairs = heval_pairs("python")[:10]
    edits = oracle_edits(EditExample(f"e{i}", "Fix.", b, a) for i, (b, a) in enumerate(pairs))
    prior = fit_prior(edits)
    assert prior.next_op["start"]["copy"] > 0.8
    assert prior.next_op["copy"]["gen"] > prior.next_op["copy"]["end"]
    assert prior.start_offsets[3] == max(prior.start_offsets)
    unchanged = fit_prior(oracle_edits(EditExample("same", "Keep.", b, b) for b, _ in pairs))
    assert unchanged.to_end > 0.9
    assert unchanged.next_op["past_end"]["end"] > 0.8
    index = ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer))

    def encode(text: str) -> list[int]:
        return qwen2_tokenizer.encode(text, add_special_tokens=False)

    chosen, rows = calibrate_prior(edits[:4], index, encode, budget=64)
    best = min((row.forwards, row.drafted) for row in rows)
    assert chosen in [row.prior for row in rows if (row.forwards, row.drafted) == best]
    # the weights a program cannot show were chosen by replay, each over its values
    for name, values in SEARCHED.items():
        assert getattr(chosen, name) in values
        assert {getattr(row.prior, name) for row in rows} >= set(values)
    config = replace(load_draft_config(), program=chosen)
    assert DraftConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("value", ["-1", "1.5", "true", '"16"'])
def test_a_bad_program_budget_is_one_clear_error(value: str) -> None:
    from cad.selector.draft_config import DraftConfigError

    with pytest.raises(DraftConfigError, match="program_budget must be"):
        DraftConfig.from_json(f'{{"program_budget": {value}}}')


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ('{"nope": 1}', "unknown program keys: nope"),
        ('{"to_end": 1.5}', "probabilities"),
        ('{"start_offsets": [0.5]}', "start_offsets"),
        ('{"next_op": {"later": {"copy": 1}}}', "next_op"),
        ('{"min_reach": 0.5, "follow_reach": 0.1}', "min_reach <= follow_reach"),
        ('{"gen_close": "x"}', "ill-typed"),
    ],
)
def test_a_bad_program_prior_is_one_clear_error(program: str, message: str) -> None:
    from cad.selector.draft_config import DraftConfigError

    with pytest.raises(DraftConfigError, match=message):
        DraftConfig.from_json(f'{{"program": {program}}}')
