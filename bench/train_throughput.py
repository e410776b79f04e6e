"""Training throughput: ``cad train`` on an architecture at random init.

python -m bench.train_throughput --model qwen2.5-1.5b --data heval-python --steps 300

Writes the architecture (random weights, real Qwen2 tokenizer) to a temporary folder, trains
LoRA adapters on it exactly as ``cad train`` does (QLoRA on CUDA), and reports input tokens/s
per optimizer step (median and spread), peak memory and the loss curve's ends. Weights are
random, so losses say nothing about span selection; the cost per token is what is measured.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
from pathlib import Path

import torch

from bench.harness import machine, pick_model, spread
from cad.training.train import StepReport, TrainConfig, train


def save_random_model(name: str, folder: Path, dtype: str) -> Path:
    """The architecture ``name`` at random init, saved with the Qwen2 tokenizer into ``folder``."""
    loaded = pick_model(name, "cpu", dtype)
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


def peak_memory_gib(device: torch.device) -> float:
    """Peak GPU memory allocated, or the process's peak resident set on CPU, in GiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run(args: argparse.Namespace) -> dict[str, object]:
    """Train for ``args.steps`` steps and summarise throughput and memory."""
    with tempfile.TemporaryDirectory() as scratch:
        base = save_random_model(args.model, Path(scratch) / "base", "bfloat16")
        config = TrainConfig(
            base=str(base),
            data=args.data,
            out=Path(scratch) / "adapter",
            max_steps=args.steps,
            batch_size=args.batch_size,
            grad_accum=args.grad_accum,
            lr=args.lr,
            rank=args.rank,
            alpha=2 * args.rank,
            device=args.device,
            dtype=args.dtype,
            four_bit=args.four_bit,
            gradient_checkpointing=args.gradient_checkpointing,
            max_tokens=args.max_tokens,
            save_every=args.steps,
            valid_every=args.steps,
        )
        steps: list[StepReport] = []
        result = train(config, lambda r: steps.append(r) if isinstance(r, StepReport) else None)
        device = next(result.model.parameters()).device
        measured = [s.tokens_per_s for s in steps[min(2, len(steps) - 1) :]]
        return {
            "machine": machine(),
            "model": f"{args.model} (random init)",
            "dtype": args.dtype,
            "four_bit": result.four_bit,
            "data": args.data,
            "train_examples": result.train_examples,
            "steps": result.steps,
            "batch": args.batch_size * args.grad_accum,
            "tokens_per_s": spread(measured),
            "peak_memory_gib": peak_memory_gib(device),
            "first_loss": steps[0].loss,
            "last_loss": steps[-1].loss,
        }


def markdown(summary: dict[str, object]) -> str:
    """A one-row README table."""
    rate = summary["tokens_per_s"]
    assert isinstance(rate, dict)
    return (
        "| machine | model | base | steps × batch | tokens/s median (IQR) | peak memory |\n"
        "| --- | --- | --- | ---: | ---: | ---: |\n"
        f"| {summary['machine']} | {summary['model']} | "
        f"{'4-bit NF4' if summary['four_bit'] else summary['dtype']} | "
        f"{summary['steps']} × {summary['batch']} | "
        f"{rate['median']:,.0f} ({rate['q1']:,.0f}–{rate['q3']:,.0f}) | "
        f"{summary['peak_memory_gib']:.1f} GiB |\n"
    )


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-1.5b")
    parser.add_argument("--data", default="heval-python")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--four-bit", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args()
    summary = run(args)
    print(json.dumps(summary, indent=2))
    if args.out_json:
        args.out_json.write_text(json.dumps(summary, indent=2) + "\n")
    if args.out_md:
        args.out_md.write_text(markdown(summary))


if __name__ == "__main__":
    main()
