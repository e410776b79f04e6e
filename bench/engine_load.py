"""Many users at once: edits per second of one shared engine (``cad-engine``, vLLM) serving
concurrent clients, side by side with the in-process backend (what ``cad serve`` runs without
``--engine``: one edit at a time) on the same model, machine and edits. Every edit is the
corpus edit's oracle program in forced-program mode, so all methods write the same bytes and
every result is checked byte for byte; none may be lost.

    python -m bench.engine_load --model qwen2.5-0.5b --corpus heval-python --edits 60 \
        --clients 12 --rounds 3 --out-json engine_load.json --out-md engine_load.md

The engine is started here (``--engine-url`` uses a running one instead, serving the same
model folder). Rounds interleave the methods; ratios are per round, then summarised. Each row
also gives the forwards per edit (median and range over every edit of every round): the
engine follows a given program through the same drafts as the in-process decoder, so the two
should be equal; a last row sends the same edits with ``draft_budget`` 0 (one decision per
forward, as the engine decodes freely).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.harness import QWEN2_TOKENIZER, machine, spread
from cad.resolver import format_program, oracle
from cad.selector import Decoder, load_model
from cad.selector.architectures import ARCHITECTURES, random_init
from cad.training.datasets import load_edits


def model_folder(model: str, work: Path) -> Path:
    """A folder vLLM and transformers both load: ``model`` itself, or an architecture at
    random init saved with the real Qwen2 tokenizer."""
    if model not in ARCHITECTURES:
        return Path(model)
    folder = work / model
    loaded = random_init(model, QWEN2_TOKENIZER, device="cpu", dtype="float32")
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


def start_engine(folder: Path, log: Path, extra: list[str]) -> tuple[str, subprocess.Popen]:
    """``cad-engine`` on a free port, once ``/v1/cad/info`` answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        sys.executable, "-m", "cad.engine", "--model", str(folder), "--dtype", "float32",
        "--max-model-len", "8192", "--max-num-batched-tokens", "8192",
        "--host", "127.0.0.1", "--port", str(port), *extra,
    ]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
    process = subprocess.Popen(
        command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    while process.poll() is None:
        try:
            urllib.request.urlopen(url + "/v1/cad/info", timeout=5).read()
            return url, process
        except OSError:
            time.sleep(1)
    raise SystemExit(f"cad-engine exited with {process.returncode}; see {log}")


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + "/v1/cad/edit", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.loads(response.read())


def engine_round(url: str, jobs: list[dict], afters: list[str], clients: int) -> dict:
    """All jobs from ``clients`` concurrent clients; every answer must be exact."""
    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(lambda job: post(url, job), jobs))
    wall = time.perf_counter() - began
    wrong = sum(answer.get("text") != after for answer, after in zip(answers, afters, strict=True))
    if wrong or len(answers) != len(jobs):
        raise AssertionError(f"{wrong} of {len(jobs)} engine edits were not byte-exact")
    forwards = [answer["stats"]["forwards"] for answer in answers]
    return {"wall_s": wall, "edits_per_s": len(jobs) / wall, "forwards": forwards}


def in_process_round(decoder: Decoder, examples, programs) -> dict:
    """The in-process backend: the same edits one after another."""
    began = time.perf_counter()
    forwards = []
    for example, program in zip(examples, programs, strict=True):
        result = decoder.edit(example.before, example.instruction, program=program)
        if result.text != example.after:
            raise AssertionError(f"in-process edit {example.id} was not byte-exact")
        forwards.append(result.stats.forwards)
    wall = time.perf_counter() - began
    return {"wall_s": wall, "edits_per_s": len(examples) / wall, "forwards": forwards}


def markdown(result: dict) -> str:
    """The README rows for one run."""
    s = result["summary"]
    lines = [
        f"Many users at once: {result['corpus']} ({result['edits']} forced-program edits per "
        f"round, {result['rounds']} rounds), {result['model']}, float32, {result['machine']}; "
        "medians over rounds (min–max)",
        "",
        "| backend | clients | edits/s | vs in-process | forwards per edit |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    rows = (
        ("in-process (`cad serve`)", 1, "in_process", None),
        ("engine (`cad-engine`), one client", 1, "engine_serial", "engine_serial_over_in_process"),
        (
            "engine (`cad-engine`), concurrent",
            result["clients"],
            "engine_concurrent",
            "engine_concurrent_over_in_process",
        ),
        (
            "engine (`cad-engine`), one client, one decision per forward (`draft_budget` 0)",
            1,
            "engine_single",
            "engine_single_over_in_process",
        ),
    )
    for label, clients, key, ratio in rows:
        rate = s[f"{key}_edits_per_s"]
        versus = "1" if ratio is None else f"{s[ratio]['median']:.2f}×"
        forwards = s[f"{key}_forwards"]
        lines.append(
            f"| {label} | {clients} | {rate['median']:.2f} ({rate['min']:.2f}–{rate['max']:.2f}) "
            f"| {versus} | {forwards['median']:g} ({forwards['min']:g}–{forwards['max']:g}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-0.5b", help="architecture or model folder")
    parser.add_argument("--corpus", default="heval-python")
    parser.add_argument("--edits", type=int, default=60)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine-url", help="a running cad-engine serving the same model folder")
    parser.add_argument("--engine-arg", action="append", default=[], help="passed to cad-engine")
    parser.add_argument("--out-json", type=Path)
    parser.add_argument("--out-md", type=Path)
    args = parser.parse_args()

    examples = load_edits(args.corpus)[: args.edits]
    programs = [oracle(e.before, e.after) for e in examples]
    jobs = [
        {"document": e.before, "instruction": e.instruction, "program": format_program(p)}
        for e, p in zip(examples, programs, strict=True)
    ]
    singles = [{**job, "draft_budget": 0} for job in jobs]
    afters = [e.after for e in examples]
    with tempfile.TemporaryDirectory() as work:
        folder = model_folder(args.model, Path(work))
        process = None
        url = args.engine_url
        if url is None:
            url, process = start_engine(folder, Path(work) / "engine.log", args.engine_arg)
        try:
            decoder = Decoder(
                load_model(str(folder), device="cpu", dtype="float32"), max_new_tokens=4096
            )
            rounds = []
            for _ in range(args.rounds):
                rounds.append(
                    {
                        "in_process": in_process_round(decoder, examples, programs),
                        "engine_concurrent": engine_round(url, jobs, afters, args.clients),
                        "engine_serial": engine_round(url, jobs, afters, 1),
                        "engine_single": engine_round(url, singles, afters, 1),
                    }
                )
        finally:
            if process is not None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(60)
    summary = {}
    for key in ("in_process", "engine_concurrent", "engine_serial", "engine_single"):
        summary[f"{key}_edits_per_s"] = spread([r[key]["edits_per_s"] for r in rounds])
        summary[f"{key}_forwards"] = spread([f for r in rounds for f in r[key]["forwards"]])
    for key in ("engine_concurrent", "engine_serial", "engine_single"):
        summary[f"{key}_over_in_process"] = spread(
            [r[key]["edits_per_s"] / r["in_process"]["edits_per_s"] for r in rounds]
        )
    result = {
        "corpus": args.corpus,
        "edits": len(jobs),
        "clients": args.clients,
        "rounds": args.rounds,
        "model": f"{args.model} (random init)" if args.model in ARCHITECTURES else args.model,
        "machine": machine(),
        "rounds_raw": rounds,
        "summary": summary,
    }
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2))
    table = markdown(result)
    if args.out_md:
        args.out_md.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
