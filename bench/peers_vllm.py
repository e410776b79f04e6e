"""The vLLM rows of ``bench/peers.py``: one vLLM engine configuration (plain decoding, n-gram
or suffix speculative decoding) run over the given edits, every output forced to the gold
tokens by a structured-output grammar.

It runs in the engine environment (``.venv-engine/bin/python``, where vLLM is installed) as a
child of ``bench/peers.py``, which runs in the project environment; the two exchange JSON
files, so nothing here imports the masking core or the decoders (only the launcher's
head-size check, which imports no more than transformers and vLLM). It runs as a module from
the repository root (as a script, ``bench/`` would come first on the path and its
``coverage.py`` would hide the ``coverage`` package that numba imports):

    .venv-engine/bin/python -m bench.peers_vllm JOB.json RESULT.json
    .venv-engine/bin/python -m bench.peers_vllm --probe MODEL_FOLDER

``JOB.json`` holds the model folder, the engine settings, one configuration (``name``,
``speculative``: vLLM's ``speculative_config`` or null) and the edits as token ids (``prompt``:
the rewrite prompt; ``gold``: the gold file's tokens). ``RESULT.json`` gets, per edit, the
wall-clock of the request, the engine's forwards (its step counter), drafted and accepted
tokens, the output text and whether its tokens equal the gold tokens; or ``error``, one line
saying why the configuration could not run.

**Forcing.** vLLM 0.32 refuses custom logits processors when speculative decoding is on, but
runs structured outputs with it: each request carries a Lark grammar whose only sentence is
the gold text (``start: "<gold>"``, llguidance backend). The engine masks every position it
verifies, the target's and the drafted ones, so the model's choice is the next gold token.
A grammar of token ids (``<[id]>``) would pin the tokens themselves; it forces plain decoding
exactly but breaks under speculative decoding in this vLLM (the matcher rejects a draft the
engine already accepted), so the text grammar is used, and every output's token ids are
checked against the gold tokens (an output with other tokens is reported as such).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

STEP_COUNTER = "vllm:iteration_tokens_total"
DRAFTED = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"


def gold_grammar(text: str) -> str:
    """A Lark grammar (llguidance dialect) whose only sentence is ``text``: one string literal,
    JSON-escaped (Lark reads the same escapes)."""
    return "start: " + json.dumps(text, ensure_ascii=False) + "\n"


def counters(llm: Any) -> dict[str, float]:
    """The engine's counters and histogram counts by name (a histogram counts observations:
    the step counter's count is the number of engine steps, one forward each)."""
    values: dict[str, float] = {}
    for metric in llm.get_metrics():
        value = getattr(metric, "value", None)
        if value is None:
            value = getattr(metric, "count", None)
        if isinstance(value, int | float):
            values[metric.name] = float(value)
    return values


def probe(model: str) -> dict[str, Any]:
    """What this environment can run, before any engine starts: the vLLM version, why its CPU
    attention cannot run ``model`` (the head size; None where it can), and whether suffix
    decoding's library (arctic-inference) is installed."""
    import vllm
    from vllm.utils.import_utils import has_arctic_inference

    from cad.engine.launcher import cpu_head_sizes, model_head_size

    head = model_head_size(model)
    supported = cpu_head_sizes() if head is not None else None
    problem = None
    if supported and head not in supported:
        problem = (
            f"vLLM's CPU attention needs a head size of {min(supported)} or more; "
            f"this model's is {head}"
        )
    return {"vllm": vllm.__version__, "problem": problem, "suffix": has_arctic_inference()}


def constraint_seconds(info: Any, grammar: str) -> float:
    """What building the gold grammar's matcher costs llguidance, timed alone: vLLM pays it
    once per request (in its grammar threads), a cost of the forcing, not of the peer."""
    import llguidance

    began = time.perf_counter()
    matcher = llguidance.LLMatcher(info, llguidance.LLMatcher.grammar_from_lark(grammar))
    spent = time.perf_counter() - began
    if matcher.is_error():
        raise ValueError(matcher.get_error())
    return spent


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Start the configuration's engine, warm it on the first edit, then time every edit.
    Prefix caching is off: every method prefills each whole prompt, and the warm-up edit's
    prompt is not served from the cache when it is timed."""
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    began = time.perf_counter()
    llm = LLM(
        model=job["model"],
        dtype=job["dtype"],
        max_model_len=job["max_model_len"],
        max_num_batched_tokens=job["max_model_len"],
        speculative_config=job["speculative"],
        structured_outputs_config={"backend": "guidance"},
        enable_prefix_caching=False,
        disable_log_stats=False,
        seed=0,
    )
    started = time.perf_counter() - began
    import llguidance.hf

    tokenizer = llm.get_tokenizer()
    eos = tokenizer.eos_token_id
    info = llguidance.hf.from_tokenizer(tokenizer)

    def one(edit: dict[str, Any]) -> dict[str, Any]:
        grammar = gold_grammar(edit["after"])
        params = SamplingParams(
            temperature=0.0,
            max_tokens=len(edit["gold"]) + 1,
            structured_outputs=StructuredOutputsParams(grammar=grammar),
        )
        before = counters(llm)
        clock = time.perf_counter()
        output = llm.generate(
            [TokensPrompt(prompt_token_ids=edit["prompt"])], params, use_tqdm=False
        )[0]
        wall = time.perf_counter() - clock
        after = counters(llm)
        completion = output.outputs[0]
        tokens = list(completion.token_ids)
        if tokens and tokens[-1] == eos:
            tokens.pop()
        return {
            "id": edit["id"],
            "wall_s": wall,
            "forwards": int(after.get(STEP_COUNTER, 0) - before.get(STEP_COUNTER, 0)) - 1,
            "drafted": int(after.get(DRAFTED, 0) - before.get(DRAFTED, 0)),
            "accepted": int(after.get(ACCEPTED, 0) - before.get(ACCEPTED, 0)),
            "text": completion.text,
            "tokens_match": tokens == edit["gold"],
            "finish": completion.finish_reason,
            "constraint_s": constraint_seconds(info, grammar),
        }

    edits = job["edits"]
    if edits:
        one(edits[0])
    rows = [one(edit) for edit in edits]
    return {"vllm": vllm.__version__, "start_s": started, "rows": rows}


def main(argv: list[str]) -> int:
    """Read the job, run it, write the result (an ``error`` line where it could not run);
    ``--probe MODEL`` prints :func:`probe`'s answer as JSON instead."""
    if argv[0] == "--probe":
        print(json.dumps(probe(argv[1])))
        return 0
    job_path, result_path = Path(argv[0]), Path(argv[1])
    job = json.loads(job_path.read_text())
    try:
        result = run(job)
    except Exception as exc:  # any failure of the peer is a table row, not a crash
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        result = {"error": f"{type(exc).__name__}: {line[:300]}"}
    partial = result_path.with_name(f".{result_path.name}.{os.getpid()}")
    partial.write_text(json.dumps(result))
    partial.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
