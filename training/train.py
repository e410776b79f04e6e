"""LoRA / QLoRA fine-tuning of a span selector: the loop behind ``cad train``.

The base model is frozen (in 4-bit NF4 for QLoRA) and LoRA adapters on every linear layer
learn to write programs. Loss is cross-entropy on model-decided tokens only, and only those
positions go through the output head, so a 150k-word vocabulary costs nothing on the prompt
and on copied text. Checkpoints hold the adapter, the optimizer and the step; the data order
is a function of the seed and the step, so a resumed run continues the same schedule.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from cad.resolver.oracle import Granularity
from cad.training.datasets import load_any_edits, split_by_id
from cad.training.examples import (
    IGNORE,
    ExampleBuilder,
    TrainingExample,
    build_examples,
    collate,
    pad_token_id,
)

CHECKPOINTS = "checkpoints"
STATE = "trainer_state.json"
OPTIMIZER = "optimizer.pt"
SUMMARY = "training.json"


class TrainingError(ValueError):
    """A training run that cannot start or continue; the message is one line."""


@dataclass
class TrainConfig:
    """Everything ``cad train`` takes. ``four_bit=None`` means QLoRA on CUDA, full-precision
    LoRA elsewhere; ``max_steps`` (optimizer steps) overrides ``epochs``."""

    base: str
    data: str
    out: Path
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    lr: float = 2e-4
    warmup_steps: int = 0
    epochs: int = 3
    batch_size: int = 4
    grad_accum: int = 1
    max_steps: int | None = None
    valid_every: int = 50
    save_every: int = 100
    keep_checkpoints: int = 2
    resume: bool = False
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    four_bit: bool | None = None
    gradient_checkpointing: bool = False
    granularity: Granularity = "line"
    max_tokens: int = 4096
    valid_fraction: float = 0.1
    test_fraction: float = 0.1


@dataclass(frozen=True)
class StepReport:
    """One optimizer step: mean loss per supervised token, throughput in input tokens/s."""

    step: int
    total_steps: int
    loss: float
    tokens_per_s: float


@dataclass(frozen=True)
class ValidReport:
    """Validation loss (mean per supervised token) after ``step``."""

    step: int
    loss: float


@dataclass(frozen=True)
class CheckpointReport:
    """A checkpoint written to ``path`` after ``step``."""

    step: int
    path: Path


Report = StepReport | ValidReport | CheckpointReport


@dataclass
class TrainResult:
    """What a run did: steps taken (in total, across resumes), last losses, throughput."""

    steps: int
    train_examples: int
    valid_examples: int
    skipped: list[str]
    train_loss: float | None
    valid_loss: float | None
    tokens_per_s: float
    four_bit: bool
    adapter: Path
    history: list[dict[str, float]] = field(default_factory=list)
    model: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict (the trained model itself is left out)."""
        return {
            name: str(value) if isinstance(value, Path) else value
            for name, value in vars(self).items()
            if name != "model"
        }


def load_trainable(config: TrainConfig, adapter: Path | None = None) -> tuple[Any, Any, bool]:
    """The base model with trainable LoRA adapters (fresh, or ``adapter`` to continue), its
    tokenizer, and whether the base is 4-bit."""
    from peft import LoraConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cad.selector.errors import ModelLoadError
    from cad.selector.loading import pick_device, pick_dtype

    try:
        device = pick_device(config.device)
        dtype = pick_dtype(config.dtype, device, training=True)
    except ModelLoadError as exc:
        raise TrainingError(str(exc)) from None
    four_bit = device.type == "cuda" if config.four_bit is None else config.four_bit
    local = Path(config.base).expanduser()
    if (config.base.startswith((".", "/", "~")) or local.exists()) and not local.is_dir():
        raise TrainingError(f"base model folder {config.base} does not exist; pass --base FOLDER")
    try:
        tokenizer = AutoTokenizer.from_pretrained(config.base)
        if four_bit:
            model = AutoModelForCausalLM.from_pretrained(
                config.base,
                quantization_config=quantization(dtype),
                device_map={"": str(device) if device.type == "cpu" else device.index or 0},
                dtype=dtype,
            )
            model = prepare_model_for_kbit_training(
                model, use_gradient_checkpointing=config.gradient_checkpointing
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(config.base, dtype=dtype).to(device)
            if config.gradient_checkpointing:
                model.gradient_checkpointing_enable()
                model.enable_input_require_grads()
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TrainingError(f"cannot load base model {config.base!r} ({first[:160]})") from None
    torch.manual_seed(config.seed)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    else:
        lora = LoraConfig(
            r=config.rank,
            lora_alpha=config.alpha,
            lora_dropout=config.dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    return model, tokenizer, four_bit


def quantization(compute_dtype: torch.dtype) -> Any:
    """4-bit NF4 with double quantization, computing in ``compute_dtype``."""
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError:
        raise TrainingError(
            "4-bit training needs bitsandbytes: pip install 'copy-as-decode[quant]' "
            "(or train without --4bit)"
        ) from None
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute_dtype,
    )


def model_device(model: Any) -> torch.device:
    """Where the model's first parameter lives."""
    return next(model.parameters()).device


def supervised_loss(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy over supervised tokens, and their count.

    The decoder stack runs on every position; the output head only on the positions whose
    next token is supervised (position ``t`` predicts token ``t + 1``)."""
    network = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = model_device(network)
    input_ids = batch["input_ids"].to(device)
    labels = batch["labels"].to(device)
    hidden = network.get_decoder()(
        input_ids=input_ids, attention_mask=batch["attention_mask"].to(device), use_cache=False
    ).last_hidden_state
    targets = labels[:, 1:]
    chosen = targets != IGNORE
    logits = network.get_output_embeddings()(hidden[:, :-1][chosen])
    loss = F.cross_entropy(logits.float(), targets[chosen], reduction="sum")
    return loss, int(chosen.sum())


def learning_rate(config: TrainConfig, step: int, total: int) -> float:
    """The rate for optimizer step ``step`` (0-based) of ``total``: linear warm-up over
    ``warmup_steps``, then cosine decay to zero. A function of the step alone, so a resumed
    run continues the same schedule."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(total - config.warmup_steps, 1)
    progress = (step - config.warmup_steps) / span
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def micro_batches(
    examples: Sequence[TrainingExample], batch_size: int, seed: int, start: int
) -> Iterator[list[TrainingExample]]:
    """Micro-batches forever, from the ``start``-th on: each epoch a fresh permutation drawn
    from ``seed`` and the epoch number, so position ``k`` is the same batch in every run."""
    per_epoch = math.ceil(len(examples) / batch_size)
    epoch, offset = divmod(start, per_epoch)
    while True:
        order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed + epoch))
        for index in range(offset, per_epoch):
            chosen = order[index * batch_size : (index + 1) * batch_size]
            yield [examples[int(i)] for i in chosen]
        epoch, offset = epoch + 1, 0


@torch.no_grad()
def validation_loss(
    model: Any, examples: Sequence[TrainingExample], batch_size: int, pad_id: int
) -> float:
    """Mean loss per supervised token over ``examples``."""
    model.eval()
    total, count = 0.0, 0
    for begin in range(0, len(examples), batch_size):
        loss, supervised = supervised_loss(
            model, collate(examples[begin : begin + batch_size], pad_id)
        )
        total, count = total + float(loss), count + supervised
    model.train()
    return total / max(count, 1)


def latest_checkpoint(out: Path) -> Path | None:
    """The checkpoint with the highest step in ``out``, if any."""
    found = sorted((out / CHECKPOINTS).glob("step-*"))
    return found[-1] if found else None


def save_checkpoint(
    model: Any, optimizer: torch.optim.Optimizer, out: Path, step: int, keep: int
) -> Path:
    """Adapter + optimizer + step into ``out/checkpoints/step-NNNNNNN``; older ones beyond
    ``keep`` are removed."""
    path = out / CHECKPOINTS / f"step-{step:07d}"
    model.save_pretrained(path)
    torch.save(optimizer.state_dict(), path / OPTIMIZER)
    (path / STATE).write_text(json.dumps({"step": step}) + "\n")
    for old in sorted((out / CHECKPOINTS).glob("step-*"))[:-keep]:
        shutil.rmtree(old)
    return path


def save_adapter(model: Any, out: Path) -> None:
    """Write the adapter into ``out`` file by file through a staging folder and renames, so an
    interrupted save leaves the previous adapter files whole, never a half-written one."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".adapter-", dir=out))
    try:
        model.save_pretrained(staging)
        for item in staging.iterdir():
            os.replace(item, out / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def prepare_data(
    config: TrainConfig, tokenizer: Any, vocab_size: int
) -> tuple[list[TrainingExample], list[TrainingExample], list[str]]:
    """Train and validation examples (the test part of the split is left out) and the ids
    skipped as longer than ``max_tokens``."""
    from cad.grammar import ProgramTokenIndex

    edits = load_any_edits(config.data)
    train_edits, valid_edits, _ = split_by_id(edits, config.valid_fraction, config.test_fraction)
    if not train_edits:
        raise TrainingError(f"{config.data}: no training examples left after the split")
    builder = ExampleBuilder(tokenizer, ProgramTokenIndex.for_tokenizer(tokenizer, vocab_size))
    train_set, skipped = build_examples(
        builder, train_edits, granularity=config.granularity, max_tokens=config.max_tokens
    )
    valid_set, skipped_valid = build_examples(
        builder, valid_edits, granularity=config.granularity, max_tokens=config.max_tokens
    )
    if not train_set:
        raise TrainingError(f"every training example is longer than {config.max_tokens} tokens")
    return train_set, valid_set, skipped + skipped_valid


def check_config(config: TrainConfig) -> None:
    """Reject settings that cannot train, before anything is loaded."""
    positive = {
        "rank": config.rank,
        "epochs": config.epochs,
        "batch-size": config.batch_size,
        "grad-accum": config.grad_accum,
        "valid-every": config.valid_every,
        "save-every": config.save_every,
        "keep-checkpoints": config.keep_checkpoints,
    }
    for name, value in positive.items():
        if value < 1:
            raise TrainingError(f"--{name} must be at least 1, not {value}")
    if config.max_steps is not None and config.max_steps < 1:
        raise TrainingError(f"--max-steps must be at least 1, not {config.max_steps}")
    if not config.lr > 0:
        raise TrainingError(f"--lr must be positive, not {config.lr}")
    if config.out.exists() and not config.out.is_dir():
        raise TrainingError(f"{config.out}: exists and is not a folder")
    if config.resume and latest_checkpoint(config.out) is None:
        raise TrainingError(f"--resume: no checkpoint in {config.out / CHECKPOINTS}")
    if not config.resume and latest_checkpoint(config.out) is not None:
        raise TrainingError(
            f"{config.out} already holds checkpoints; pass --resume to continue that run "
            "or choose another --out"
        )


def train(config: TrainConfig, report: Callable[[Report], None] | None = None) -> TrainResult:
    """Fine-tune LoRA adapters on ``config.data``; the final adapter goes to ``config.out``
    (loadable with ``load_model(base, adapter=out)``) and the trained model comes back in
    the result, in memory."""
    check_config(config)
    notify = report or (lambda _: None)
    resume_from = latest_checkpoint(config.out) if config.resume else None
    model, tokenizer, four_bit = load_trainable(config, resume_from)
    vocab_size = int(model.get_output_embeddings().weight.shape[0])
    train_set, valid_set, skipped = prepare_data(config, tokenizer, vocab_size)
    pad_id = pad_token_id(tokenizer)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=config.lr, weight_decay=0.0
    )
    step = 0
    if resume_from is not None:
        optimizer.load_state_dict(torch.load(resume_from / OPTIMIZER, weights_only=True))
        step = json.loads((resume_from / STATE).read_text())["step"]
    per_step = config.batch_size * config.grad_accum
    total = config.max_steps or config.epochs * math.ceil(len(train_set) / per_step)
    batches = micro_batches(train_set, config.batch_size, config.seed, step * config.grad_accum)
    model.train()
    history: list[dict[str, float]] = []
    train_loss = valid_loss = None
    tokens_per_s = 0.0
    while step < total:
        began = time.perf_counter()
        for group_params in optimizer.param_groups:
            group_params["lr"] = learning_rate(config, step, total)
        group = [next(batches) for _ in range(config.grad_accum)]
        supervised = sum(item.supervised for batch in group for item in batch)
        summed, tokens = 0.0, 0
        for batch in group:
            loss, _ = supervised_loss(model, collate(batch, pad_id))
            (loss / max(supervised, 1)).backward()
            summed += float(loss.detach())
            tokens += sum(len(item.input_ids) for item in batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        train_loss = summed / max(supervised, 1)
        tokens_per_s = tokens / max(time.perf_counter() - began, 1e-9)
        history.append({"step": step, "loss": train_loss})
        notify(StepReport(step, total, train_loss, tokens_per_s))
        if valid_set and (step % config.valid_every == 0 or step == total):
            valid_loss = validation_loss(model, valid_set, config.batch_size, pad_id)
            history[-1]["valid_loss"] = valid_loss
            notify(ValidReport(step, valid_loss))
        if step % config.save_every == 0 or step == total:
            path = save_checkpoint(model, optimizer, config.out, step, config.keep_checkpoints)
            notify(CheckpointReport(step, path))
    save_adapter(model, config.out)
    result = TrainResult(
        steps=step,
        train_examples=len(train_set),
        valid_examples=len(valid_set),
        skipped=skipped,
        train_loss=train_loss,
        valid_loss=valid_loss,
        tokens_per_s=tokens_per_s,
        four_bit=four_bit,
        adapter=config.out,
        history=history,
        model=model,
    )
    summary = {"config": asdict(config), "result": result.to_dict()}
    (config.out / SUMMARY).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return result
