"""Start-up benchmark: ``cad edit`` with the tiny test model from start to finish, as a user
runs it (a fresh process each time), with the per-tokenizer table cache cold and warm, and
where the time goes.

    python -m bench.startup --runs 5 --out-json s.json --out-md s.md

The edit follows a given program (forced-program mode), so its decoding is the same in every
run; the file is Python, so ``cad edit`` holds it to the Python grammar (``--syntax auto``).
"Cold" runs get an empty ``CAD_CACHE_DIR`` (the program token index and the Python syntax
tables are built); "warm" runs reuse the ones the first run stored. With ``--warm-server`` the
same edits also run through a warm server (``cad serve --background --preload``, started once
and given one edit before the timed ones), as a script applying many edits would.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import QWEN2_TOKENIZER, machine, write_results

DOCUMENT = "def add(a, b):\n    return a - b\n\n\nprint(add(1, 2))\n"
PROGRAM = '<copy lines="1-1"/>\n<gen>    return a + b\n</gen>\n<copy lines="3-5"/>\n</program>\n'
PHASES = """
import json, sys, time
marks, last = {}, time.perf_counter()
def mark(name):
    global last
    now = time.perf_counter(); marks[name] = now - last; last = now
import torch; mark("import torch")
import transformers; mark("import transformers")
from cad.grammar import ProgramTokenIndex
from cad.resolver import parse
from cad.selector import Decoder, load_model; mark("import cad")
loaded = load_model(sys.argv[1], device="cpu", dtype="float32"); mark("load model")
ProgramTokenIndex.for_tokenizer(loaded.tokenizer, loaded.vocab_size); mark("program index")
from cad.grammar.syntax import SyntaxConstraint, syntax_machine
document = open(sys.argv[2]).read()
machine = syntax_machine("python", loaded.tokenizer, vocab_size=loaded.vocab_size)
constraint = SyntaxConstraint.for_region(machine, "", document, ""); mark("python syntax")
program = parse(open(sys.argv[3]).read())
Decoder(loaded).edit(document, "fix", program=program, syntax=constraint); mark("decode")
print(json.dumps(marks))
"""


def tiny_model(folder: Path) -> Path:
    """The test suite's model shape at random init, saved with the real Qwen2 tokenizer."""
    from cad.selector.architectures import random_init

    loaded = random_init("tiny", QWEN2_TOKENIZER, device="cpu", dtype="float32")
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


def cad_edit(model: Path, file: Path, program: Path, cache: Path, extra: list[str]) -> float:
    """Seconds for one ``cad edit`` process, start to finish."""
    env = {**os.environ, "CAD_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    command = [
        sys.executable, "-c", "from cad.server.cli import main; main()", "edit", str(file),
        "--instr", "fix", "--model", str(model), "--device", "cpu", "--program", str(program),
        "--stdout", *extra,
    ]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0 or done.stdout != DOCUMENT.replace("a - b", "a + b"):
        raise RuntimeError(f"cad edit failed: {done.stderr.strip()[-400:]}")
    return elapsed


def warm_server_runs(model: Path, file: Path, program: Path, cache: Path, runs: int) -> list[float]:
    """Start-to-finish seconds of ``runs`` edits through a warm server on ``cache``'s socket
    (started, preloaded and given one edit first; stopped afterwards)."""
    env = {**os.environ, "CAD_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    cad = [sys.executable, "-c", "from cad.server.cli import main; main()"]
    subprocess.run(
        [*cad, "serve", "--background", "--model", str(model), "--device", "cpu", "--preload"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    try:
        cad_edit(model, file, program, cache, [])
        return [cad_edit(model, file, program, cache, []) for _ in range(runs)]
    finally:
        subprocess.run([*cad, "serve", "--stop"], env=env, check=False, capture_output=True)


def run(runs: int, extra: list[str], warm_server: bool = False) -> dict:
    """Cold and warm start-to-finish times, through a warm server too when asked, and one
    phase breakdown."""
    work = Path(tempfile.mkdtemp(prefix="cad-startup-"))
    try:
        model = tiny_model(work / "model")
        file, program = work / "add.py", work / "fix.program"
        file.write_text(DOCUMENT)
        program.write_text(PROGRAM)
        cold, warm = [], []
        for attempt in range(runs):
            cache = work / f"cache-{attempt}"
            cold.append(cad_edit(model, file, program, cache, extra))
            warm.append(cad_edit(model, file, program, cache, extra))
        served = (
            warm_server_runs(model, file, program, work / "cache-served", runs)
            if warm_server
            else []
        )
        phases = subprocess.run(
            [sys.executable, "-c", PHASES, str(model), str(file), str(program)],
            env={**os.environ, "CAD_CACHE_DIR": str(work / "cache-phases")},
            capture_output=True,
            text=True,
            check=True,
        )
        breakdown = json.loads(phases.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "device": machine(),
        "runs": runs,
        "options": extra,
        "cold_s": statistics.median(cold),
        "warm_s": statistics.median(warm),
        "cold_all_s": cold,
        "warm_all_s": warm,
        "served_s": statistics.median(served) if served else None,
        "served_all_s": served,
        "phases_s": breakdown,
    }


def markdown(result: dict) -> str:
    """The README lines for one run."""
    phases = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in result["phases_s"].items())
    options = " ".join(result["options"]) or "eager"
    return (
        f"`cad edit` with the tiny test model ({options}), {result['device']}, median of "
        f"{result['runs']} runs: {result['cold_s']:.2f} s with the program token index and the "
        f"Python syntax tables built, {result['warm_s']:.2f} s with them cached. Phases of one "
        f"cold run: {phases}.\n"
        + (
            f"Through a warm server (`cad serve --background --preload`): "
            f"{result['served_s']:.2f} s (runs: "
            f"{', '.join(f'{value:.2f}' for value in result['served_all_s'])}).\n"
            if result.get("served_s") is not None
            else ""
        )
    )


def main(argv: list[str] | None = None) -> dict:
    """Command line entry point; returns the result it wrote."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="run cad edit --compile")
    parser.add_argument(
        "--warm-server", action="store_true", help="also time edits through a warm server"
    )
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args(argv)
    result = run(args.runs, ["--compile"] if args.compile else [], warm_server=args.warm_server)
    write_results(result, markdown(result), args.out_json, args.out_md)
    return result


if __name__ == "__main__":
    main()
