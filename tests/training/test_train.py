"""``train``: a tiny random model learns to write edit programs; adapters and runs resume exactly."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from cad.selector import Decoder, load_model
from cad.training import EditExample, write_jsonl
from cad.training.datasets import MultiEditExample
from cad.training.train import TrainConfig, TrainingError, train
from tests.tiny_model import make_tiny_model

WORDS = (
    "apple berry cedar dune ember fjord grove harbor iris jade kelp lotus maple nectar opal pine"
)


def toy_edits() -> list[EditExample]:
    """16 small edits: set a variable to a number, or remove it, in 5-line documents."""
    words = WORDS.split()
    edits = []
    for i in range(16):
        names = [words[(i + k) % len(words)] for k in range(4)]
        before = "".join(f"{name} = {j}\n" for j, name in enumerate(names)) + f"print({names[0]})\n"
        name = names[i % 4]
        line = f"{name} = {i % 4}\n"
        if i % 2 == 0:
            after = before.replace(line, f"{name} = {10 + i}\n")
            instruction = f"Set {name} to {10 + i}."
        else:
            after = before.replace(line, "")
            instruction = f"Remove {name}."
        edits.append(EditExample(f"toy-{i:02d}", instruction, before, after))
    return edits


def exact_matches(model_dir: Path, edits: list[EditExample], adapter: Path | None = None) -> int:
    loaded = load_model(
        str(model_dir), device="cpu", dtype="float32", adapter=str(adapter) if adapter else None
    )
    decoder = Decoder(loaded, max_new_tokens=64)
    return sum(decoder.edit(e.before, e.instruction).text == e.after for e in edits)


@pytest.fixture(scope="module")
def sharp_model(tmp_path_factory) -> Path:
    """A tiny random Qwen2 whose (tied) embeddings are large enough to give sharp logits."""
    return make_tiny_model(tmp_path_factory.mktemp("sharp"), "qwen2", init_std=0.5)


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "toy.jsonl"
    write_jsonl(path, toy_edits())
    return path


def config(model: Path, data: Path, out: Path, **overrides) -> TrainConfig:
    settings = dict(
        base=str(model),
        data=str(data),
        out=out,
        device="cpu",
        dtype="float32",
        valid_fraction=0.0,
        test_fraction=0.0,
    )
    settings.update(overrides)
    return TrainConfig(**settings)


def test_a_tiny_model_learns_the_toy_edits_and_its_adapter_round_trips(
    sharp_model: Path, toy_data: Path, tmp_path: Path
) -> None:
    edits = toy_edits()
    assert exact_matches(sharp_model, edits) == 0

    out = tmp_path / "adapter"
    reports = []
    result = train(
        config(sharp_model, toy_data, out, lr=1e-2, max_steps=80, batch_size=16, save_every=1000),
        reports.append,
    )
    assert result.steps == 80 and result.train_examples == 16
    assert result.history[-1]["loss"] < result.history[0]["loss"] / 10
    assert (out / "adapter_config.json").is_file()
    assert json.loads((out / "training.json").read_text())["result"]["steps"] == 80

    assert exact_matches(sharp_model, edits, adapter=out) == 16

    loaded = load_model(str(sharp_model), device="cpu", dtype="float32", adapter=str(out))
    ids = torch.tensor([loaded.tokenizer.encode(edits[0].before + edits[0].instruction)])
    result.model.eval()
    with torch.no_grad():
        assert torch.allclose(result.model(ids).logits, loaded.model(ids).logits, atol=1e-5)


def adapter_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "adapter_model.safetensors")


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(
    sharp_model: Path, toy_data: Path, tmp_path: Path
) -> None:
    common = dict(lr=1e-3, batch_size=3, grad_accum=2, save_every=2, valid_every=1000)
    straight = tmp_path / "straight"
    train(config(sharp_model, toy_data, straight, max_steps=4, **common))

    resumed = tmp_path / "resumed"

    def interrupt_after_first_checkpoint(report) -> None:
        if type(report).__name__ == "CheckpointReport":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(
            config(sharp_model, toy_data, resumed, max_steps=4, **common),
            interrupt_after_first_checkpoint,
        )
    assert (resumed / "checkpoints" / "step-0000002" / "optimizer.pt").is_file()
    assert not (resumed / "adapter_config.json").exists()
    result = train(config(sharp_model, toy_data, resumed, max_steps=4, resume=True, **common))
    assert result.steps == 4

    expected, got = adapter_weights(straight), adapter_weights(resumed)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6), name
    assert sorted(p.name for p in (resumed / "checkpoints").iterdir()) == [
        "step-0000002",
        "step-0000004",
    ]


def test_validation_runs_on_the_held_out_split(sharp_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "edits.jsonl"
    write_jsonl(data, toy_edits() * 1)
    reports = []
    result = train(
        config(
            sharp_model, data, tmp_path / "out", valid_fraction=0.25, max_steps=2, valid_every=1
        ),
        reports.append,
    )
    assert result.valid_examples > 0
    assert result.train_examples + result.valid_examples == 16
    assert result.valid_loss is not None and result.valid_loss > 0
    assert [r.step for r in reports if type(r).__name__ == "ValidReport"] == [1, 2]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lr": 0.0}, "--lr must be positive"),
        ({"batch_size": 0}, "--batch-size must be at least 1"),
        ({"resume": True}, "--resume: no checkpoint"),
        ({"base": "/no/such/model"}, "does not exist"),
        ({"data": "/no/such/data.jsonl"}, "cannot read"),
    ],
)
def test_bad_settings_fail_with_one_line_before_training(
    sharp_model: Path, toy_data: Path, tmp_path: Path, overrides: dict, message: str
) -> None:
    with pytest.raises(Exception, match=message) as caught:
        train(replace(config(sharp_model, toy_data, tmp_path / "out", max_steps=1), **overrides))
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "out" / "adapter_config.json").exists()


def test_an_existing_run_is_not_overwritten_without_resume(
    sharp_model: Path, toy_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    train(config(sharp_model, toy_data, out, max_steps=1, batch_size=2))
    with pytest.raises(TrainingError, match="already holds checkpoints"):
        train(config(sharp_model, toy_data, out, max_steps=1, batch_size=2))


def test_a_four_bit_base_trains_and_its_adapter_loads_on_the_full_base(
    sharp_model: Path, toy_data: Path, tmp_path: Path
) -> None:
    pytest.importorskip("bitsandbytes", reason="4-bit training needs the quant extra")
    out = tmp_path / "qlora"
    result = train(config(sharp_model, toy_data, out, four_bit=True, max_steps=2, batch_size=2))
    assert result.four_bit and result.steps == 2
    assert all(torch.isfinite(torch.tensor(row["loss"])) for row in result.history)
    assert any("Linear4bit" in type(module).__name__ for module in result.model.modules())
    trained_b = [w for name, w in adapter_weights(out).items() if "lora_B" in name]
    assert trained_b and any(bool(w.abs().sum() > 0) for w in trained_b)  # B starts at zero
    base = load_model(str(sharp_model), device="cpu", dtype="float32")
    loaded = load_model(str(sharp_model), device="cpu", dtype="float32", adapter=str(out))
    ids = torch.tensor([loaded.tokenizer.encode("x = 0\nSet x to 1.")])
    with torch.no_grad():
        assert not torch.allclose(base.model(ids).logits, loaded.model(ids).logits)
    loaded_b = [w for name, w in loaded.model.state_dict().items() if "lora_B" in name]
    assert sorted(float(w.abs().sum()) for w in loaded_b) == pytest.approx(
        sorted(float(w.abs().sum()) for w in trained_b)
    )


def test_edits_of_several_files_become_training_examples(sharp_model, tmp_path) -> None:
    from transformers import AutoTokenizer

    from cad.training.train import prepare_data
    from tests.training.test_examples import MOVE

    moves = [MultiEditExample(f"move-{i}", MOVE.instruction, MOVE.files) for i in range(12)]
    data = tmp_path / "mixed.jsonl"
    write_jsonl(data, [*toy_edits(), *moves])
    tokenizer = AutoTokenizer.from_pretrained(sharp_model)
    settings = config(sharp_model, data, tmp_path / "run", valid_fraction=0.0, test_fraction=0.0)
    train_set, _, skipped = prepare_data(settings, tokenizer, len(tokenizer))
    assert not skipped
    ids = {item.id for item in train_set}
    assert {edit.id for edit in moves} <= ids and {edit.id for edit in toy_edits()} <= ids
    move = next(item for item in train_set if item.id == "move-0")
    assert 0 < move.supervised < len(move.input_ids) - move.prompt_length
