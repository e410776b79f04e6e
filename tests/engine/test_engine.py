"""The real engine (vLLM on the CPU, one engine for the session): forced-program edits of real
code through ``POST /v1/cad/edit``, byte-exact and identical to the in-process decoder, one
engine step per forward as vLLM's own step counter shows; free decoding identical too;
cancellation aborts the request; many clients at once all get exact edits."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from cad.resolver import CopyLines, Gen, Program, format_program, oracle
from cad.selector import Decoder
from tests.conftest import heval_pairs

pytestmark = pytest.mark.engine
INSTRUCTION = "Fix the bug."
STEPS = "vllm:iteration_tokens_total_count"


def forced(before: str, after: str) -> dict:
    return {
        "document": before,
        "instruction": INSTRUCTION,
        "program": format_program(oracle(before, after)),
    }


def test_forced_heval_edits_are_exact_and_equal_to_in_process(engine, loaded_engine_model) -> None:
    """Every edit byte-exact; drafted as ``cad edit`` drafts on the engine's device (the
    shipped CPU configuration here) and with one decision per forward, the in-process
    decoder's program, forwards and tokens."""
    pairs = heval_pairs("python")
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda pair: engine.post("/v1/cad/edit", forced(*pair)), pairs))
    assert [status for status, _ in answers] == [200] * len(pairs)
    assert [answer["text"] for _, answer in answers] == [after for _, after in pairs]
    drafting = Decoder(loaded_engine_model, max_new_tokens=4096)
    single = Decoder(loaded_engine_model, max_new_tokens=4096, draft_budget=0)
    for (before, after), (_, answer) in list(zip(pairs, answers, strict=True))[:3]:
        undrafted = engine.post("/v1/cad/edit", {**forced(before, after), "draft_budget": 0})[1]
        for decoder, stats in ((drafting, answer["stats"]), (single, undrafted["stats"])):
            reference = decoder.edit(before, INSTRUCTION, program=oracle(before, after))
            assert answer["program"] == format_program(reference.program)
            for key in (
                "forwards",
                "prefill_tokens",
                "generated_tokens",
                "forced_tokens",
                "copied_tokens",
                "drafted_tokens",
            ):
                assert stats[key] == getattr(reference.stats, key), key
        assert answer["stats"]["forwards"] < undrafted["stats"]["forwards"]


def test_engine_steps_are_one_per_forward_and_copies_cost_one(engine) -> None:
    """vLLM's own step counter advances by the forwards plus the prompt's, drafted or not."""
    before, after = heval_pairs("python")[10]
    taken = {}
    for budget in (None, 0):
        body = (
            forced(before, after)
            if budget is None
            else {**forced(before, after), "draft_budget": 0}
        )
        steps = engine.metric(STEPS)
        status, answer = engine.post("/v1/cad/edit", body)
        assert status == 200 and answer["text"] == after
        taken[budget] = engine.metric(STEPS) - steps
        assert taken[budget] == answer["stats"]["forwards"] + 1
    assert taken[None] < taken[0]
    document = "".join(f"line {i}\n" for i in range(1, 201))
    program = Program((CopyLines(1, 99), Gen("line one hundred\n"), CopyLines(101, 200)))
    steps = engine.metric(STEPS)
    status, answer = engine.post(
        "/v1/cad/edit",
        {
            "document": document,
            "instruction": "x",
            "program": format_program(program),
            "draft_budget": 0,
        },
    )
    assert answer["text"] == document.replace("line 100\n", "line one hundred\n")
    stats = answer["stats"]
    assert stats["copied_tokens"] > 900 and stats["ops"] == 3
    taken = engine.metric(STEPS) - steps
    assert taken == stats["forwards"] + 1 == stats["generated_tokens"]
    assert taken < 40  # 900+ copied tokens in two copies: two forwards, not one per token


def test_free_decoding_equals_the_in_process_decoder(engine, loaded_engine_model) -> None:
    before = heval_pairs("python")[0][0]
    reference = Decoder(loaded_engine_model, max_new_tokens=24, draft_budget=0).edit(
        before, INSTRUCTION
    )
    assert reference.stats.truncated  # a random model does not finish a program
    status, answer = engine.post(
        "/v1/cad/edit", {"document": before, "instruction": INSTRUCTION, "max_new_tokens": 24}
    )
    assert status == 422 and answer["error"]["code"] == "budget_spent"
    assert answer["error"]["program"] == format_program(reference.program)
    body = {"document": before, "instruction": INSTRUCTION, "max_new_tokens": 24, "stream": True}
    request = urllib.request.Request(
        engine.url + "/v1/cad/edit", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        lines = [json.loads(line) for line in response]
    progress = [line["progress"] for line in lines if "progress" in line]
    assert 0 < progress[-1]["tokens_generated"] <= reference.stats.generated_tokens
    assert lines[-1]["error"]["program"] == format_program(reference.program)


def test_a_range_keeps_the_lines_around_it(engine) -> None:
    document = "head\nfix me\nkeep\ntail\n"
    program = '<gen>fixed\n</gen>\n<copy lines="2-2"/>\n</program>'
    body = {"document": document, "program": program, "range": [2, 3]}
    status, answer = engine.post("/v1/cad/edit", body)
    assert status == 200, answer
    assert answer["text"] == "head\nfixed\nkeep\ntail\n"


def test_rewrite_route_writes_the_model_reply(engine) -> None:
    status, answer = engine.post(
        "/v1/cad/edit",
        {"document": "a\nfix me\nc\n", "instruction": "x", "mode": "rewrite", "range": [2, 2]},
    )
    assert status == 200, answer
    assert answer["text"] == "a\nreturn None\nc\n"
    assert answer["program"] == "" and answer["stats"]["mode"] == "rewrite"


def test_cancelling_aborts_the_request(engine) -> None:
    before = heval_pairs("python")[1][0]
    long_edit = forced(before, before + "value = 1\n" * 400)  # a forward per generated token
    body = {**long_edit, "max_new_tokens": 4000, "stream": True, "draft_budget": 0}
    request = urllib.request.Request(
        engine.url + "/v1/cad/edit", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    response = urllib.request.urlopen(request, timeout=300)
    while "progress" not in json.loads(response.readline()):
        pass
    assert json.loads(engine.get("/v1/cad/info"))["running_edits"] == 1
    response.close()
    deadline = time.monotonic() + 30
    while json.loads(engine.get("/v1/cad/info"))["running_edits"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads(engine.get("/v1/cad/info"))["running_edits"] == 0
    assert engine.metric("vllm:num_requests_running") == 0


def test_many_clients_at_once(engine) -> None:
    pairs = heval_pairs("python")[:60]
    barrier = threading.Barrier(12)
    answers: dict[int, tuple[int, dict]] = {}
    info: list[dict] = []

    def client(number: int) -> None:
        barrier.wait()
        for index in range(number, len(pairs), 12):
            answers[index] = engine.post("/v1/cad/edit", forced(*pairs[index]))
        info.append(json.loads(engine.get("/v1/cad/info")))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert sorted(answers) == list(range(60))
    assert all(status == 200 for status, _ in answers.values())
    assert all(answers[i][1]["text"] == pairs[i][1] for i in range(60))
    assert len(info) == 12
    assert json.loads(engine.get("/v1/cad/info"))["running_edits"] == 0


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"document": "a\n", "instruction": "x", "model": "someone/else"}, 400, "model_mismatch"),
        ({"document": "a\n", "instruction": "x", "adapter": "selector"}, 400, "unknown_adapter"),
        ({"document": "a\n", "program": '<copy lines="1-2"/>\n</program>'}, 400, "invalid_program"),
        ({"document": "a\n"}, 400, "invalid_request"),
        ({"document": "word " * 5000, "instruction": "x"}, 400, "context_too_long"),
    ],
)
def test_refusals_are_one_line_with_a_next_step(engine, body, status: int, code: str) -> None:
    got, answer = engine.post("/v1/cad/edit", body)
    assert (got, answer["error"]["code"]) == (status, code)
    assert "\n" not in answer["error"]["message"]


def test_info_names_the_model_and_modes(engine) -> None:
    info = json.loads(engine.get("/v1/cad/info"))
    assert info["model"] == str(engine.model)
    assert info["modes"] == ["program", "rewrite"] and info["speculative"] is None
    assert info["max_edits"] == 64 and info["max_model_len"] == 4096
