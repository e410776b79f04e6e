"""End-to-end benchmark: per edit of a corpus, forced-program copy-as-decode (speculative
program decoding with the shipped draft configuration) vs AR regeneration vs prompt-lookup
decoding — same model, same target bytes, same process. Each method's host work around its
forwards (``DecodeStats.host_s``: drafting, masks, layout, acceptance) is reported per
forward, the prompt's included.

    python -m bench.end_to_end --model qwen2.5-0.5b --corpus heval-python --limit 40 \
        --out-json e2e.json --out-md e2e.md --plot e2e.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.harness import machine, pick_model, spread, synchronize
from cad.resolver import oracle
from cad.selector import Decoder, prompt_lookup, regenerate
from cad.training.datasets import EditExample, load_edits


def measure(loaded, decoder: Decoder, example: EditExample) -> dict:
    """Wall-clock and forwards of the three methods on one edit; all must be byte-exact."""
    program = oracle(example.before, example.after)
    results = {}
    for name, call in (
        ("cad", lambda: decoder.edit(example.before, example.instruction, program=program)),
        ("ar", lambda: regenerate(loaded, example.before, example.instruction, example.after)),
        ("pld", lambda: prompt_lookup(loaded, example.before, example.instruction, example.after)),
    ):
        synchronize(loaded)
        result = call()
        synchronize(loaded)
        if result.text != example.after:
            raise AssertionError(f"{name} was not byte-exact on {example.id}")
        results[name] = {
            "wall_s": result.stats.wall_s,
            "forwards": result.stats.forwards,
            "host_s": result.stats.host_s,
        }
    return {"id": example.id, **results}


def summarise(rows: list[dict]) -> dict:
    """Per-edit ratios against copy-as-decode, as median and spread."""
    out = {}
    for baseline in ("ar", "pld"):
        out[f"{baseline}_over_cad_wall"] = spread(
            [r[baseline]["wall_s"] / r["cad"]["wall_s"] for r in rows]
        )
        out[f"{baseline}_over_cad_forwards"] = spread(
            [r[baseline]["forwards"] / max(r["cad"]["forwards"], 1) for r in rows]
        )
    for method in ("cad", "ar", "pld"):
        out[f"{method}_wall_s"] = spread([r[method]["wall_s"] for r in rows])
        out[f"{method}_host_ms_per_forward"] = spread(
            [1000 * r[method]["host_s"] / (r[method]["forwards"] + 1) for r in rows]
        )
        out[f"{method}_forwards"] = spread([float(r[method]["forwards"]) for r in rows])
    return out


def markdown(result: dict) -> str:
    """The README table for one run."""
    s = result["summary"]
    lines = [
        f"End to end: {result['corpus']} ({result['n']} edits), {result['model']}, "
        f"{result['dtype']}, {result['device']}; medians per edit (IQR)",
        "",
        "| method | wall (s) | forwards | host ms per forward | wall ratio vs CaD "
        "| forward ratio vs CaD |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for method, label in (
        ("cad", "copy-as-decode (forced program, speculative)"),
        ("ar", "AR regeneration"),
        ("pld", "prompt lookup"),
    ):
        wall, fw = s[f"{method}_wall_s"], s[f"{method}_forwards"]
        host = s[f"{method}_host_ms_per_forward"]
        ratio = (
            "1"
            if method == "cad"
            else (
                f"{s[f'{method}_over_cad_wall']['median']:.2f}× "
                f"({s[f'{method}_over_cad_wall']['q1']:.2f}–{s[f'{method}_over_cad_wall']['q3']:.2f})"
            )
        )
        fratio = "1" if method == "cad" else f"{s[f'{method}_over_cad_forwards']['median']:.2f}×"
        lines.append(
            f"| {label} | {wall['median']:.3f} ({wall['q1']:.3f}–{wall['q3']:.3f}) "
            f"| {fw['median']:.0f} | {host['median']:.3f} ({host['q1']:.3f}–{host['q3']:.3f}) "
            f"| {ratio} | {fratio} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], title: str, path: Path) -> None:
    """Box plot of per-edit wall-clock speedups of CaD over each baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [[r[b]["wall_s"] / r["cad"]["wall_s"] for r in rows] for b in ("ar", "pld")]
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.boxplot(data, tick_labels=["AR / CaD", "PLD / CaD"])
    axis.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    axis.set_ylabel("wall-clock ratio per edit (higher = CaD faster)")
    axis.set_title(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--corpus", default="heval-python")
    parser.add_argument("--limit", type=int, default=0, help="first N edits only (0 = all)")
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    loaded = pick_model(args.model, args.device, args.dtype)
    decoder = Decoder(loaded, max_new_tokens=8192)
    examples = load_edits(args.corpus)
    examples = examples[: args.limit] if args.limit else examples
    measure(loaded, decoder, examples[0])
    rows = []
    for i, example in enumerate(examples, 1):
        rows.append(measure(loaded, decoder, example))
        r = rows[-1]
        print(
            f"[{i}/{len(examples)}] {example.id}: cad {r['cad']['wall_s']:.3f}s/{r['cad']['forwards']} "
            f"ar {r['ar']['wall_s']:.3f}s/{r['ar']['forwards']} pld {r['pld']['wall_s']:.3f}s/{r['pld']['forwards']}",
            flush=True,
        )
    result = {
        "corpus": args.corpus,
        "n": len(rows),
        "model": loaded.name,
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "device": machine(),
        "summary": summarise(rows),
        "rows": rows,
    }
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2))
    table = markdown(result)
    if args.out_md:
        args.out_md.write_text(table)
    if args.plot:
        plot(rows, f"{result['model']} {result['dtype']} — {result['device']}", args.plot)
    print(table)


if __name__ == "__main__":
    main()
