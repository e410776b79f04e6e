"""``cad edit`` through the console script with a tiny random model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cad.defaults import DEFAULT_MODEL
from cad.errors import UserError
from cad.resolver import format, oracle
from cad.selector.stats import Progress
from cad.server.edit_command import _rewrite_status, check_instruction
from cad.server.syntax_setting import SyntaxChoice, plan_syntax
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
BEFORE = (
    "def mean(values):\r\n    return sum(values) / len(values) + 1\r\n\r\nprint(mean([1, 2]))\r\n"
)
AFTER = "def mean(values):\r\n    return sum(values) / len(values)\r\n\r\nprint(mean([1, 2]))\r\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture
def workspace(tmp_path) -> Path:
    (tmp_path / "mean.py").write_bytes(BEFORE.encode())
    (tmp_path / "after.py").write_bytes(AFTER.encode())
    (tmp_path / "fix.program").write_text(format(oracle(BEFORE, AFTER)))
    return tmp_path


def cad(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CAD, *args], capture_output=True, cwd=cwd, timeout=300)


def test_forced_program_write_is_exact_and_reports_stats(workspace, model_dir) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "Drop the + 1",
        "--model",
        str(model_dir),
        "--program",
        "fix.program",
        "--write",
        "--stats-json",
        "stats.json",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert (workspace / "mean.py").read_bytes() == AFTER.encode()
    stats = json.loads((workspace / "stats.json").read_text())
    for key in ("forwards", "generated_tokens", "copied_tokens", "forced_tokens", "wall_s"):
        assert key in stats
    assert stats["copied_tokens"] > 0 and stats["mode"] == "program"
    assert list(workspace.glob(".mean.py.*")) == []
    # Quiet: no library warning, no progress bar, no blank line; only the command's own line.
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith(f"wrote mean.py ({stats['ops']} op") and line.endswith("s)")


def test_the_draft_budget_shapes_program_mode_forwards_not_its_bytes(workspace, model_dir) -> None:
    forwards = []
    for budget in ("0", "64"):
        result = cad(
            "edit", "mean.py", "--instr", "Drop the + 1", "--model", str(model_dir),
            "--program", "fix.program", "--draft-budget", budget, "--stdout",
            "--stats-json", f"stats-{budget}.json", cwd=workspace,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout == AFTER.encode()
        forwards.append(json.loads((workspace / f"stats-{budget}.json").read_text())["forwards"])
    one_per_forward, drafted = forwards
    assert drafted < one_per_forward


def test_diff_is_the_default_output(workspace, model_dir) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--program",
        "fix.program",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert b"-    return sum(values) / len(values) + 1" in result.stdout
    assert b"+    return sum(values) / len(values)" in result.stdout
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


@pytest.mark.parametrize("baseline", ["ar", "pld"])
def test_baselines_regenerate_the_target_exactly(workspace, model_dir, baseline: str) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--baseline",
        baseline,
        "--target",
        "after.py",
        "--stdout",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == AFTER.encode()


@pytest.mark.parametrize(
    ("run", "stats", "message"),
    [
        ("program", {"generated_tokens": 40}, "ran out of the model's context after 40 tokens"),
        ("rewrite", {"generated_tokens": 5, "copied_tokens": 60}, "context after 65 tokens"),
        ("program", {"generated_tokens": 100}, "used its whole budget of 100 tokens"),
    ],
)
def test_a_truncated_edit_says_whether_the_budget_or_the_context_ran_out(
    tmp_path, run: str, stats: dict, message: str
) -> None:
    from cad.server.edit_command import Delivery, deliver
    from cad.server.edit_pipeline import EditOptions, EditOutcome, Run

    target = tmp_path / "mean.py"
    target.write_bytes(BEFORE.encode())
    options = EditOptions(file=target, instr="x", max_new_tokens=100)
    outcome = EditOutcome("partial", None, {**stats, "truncated": True})
    delivery = Delivery(True, False, False, False, None, None, True)
    with pytest.raises(UserError, match=message):
        deliver(options, Run(run), BEFORE, outcome, delivery, "this process")
    assert target.read_bytes() == BEFORE.encode()


def test_model_decoding_never_writes_a_truncated_edit(workspace, model_dir) -> None:
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--max-new-tokens",
        "1",
        "--write",
        "--stats-json",
        "stats.json",
        cwd=workspace,
    )
    assert result.returncode == 1
    assert result.stderr.decode().startswith("error: the model used its whole budget of 1 token ")
    assert b"nothing was written" in result.stderr
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()
    stats = json.loads((workspace / "stats.json").read_text())
    assert stats["truncated"] is True and stats["mode"] == "rewrite"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["edit", "missing.py", "--instr", "x"], "missing.py: no such file"),
        (["edit", "blob.bin", "--instr", "x"], "binary file"),
        (["edit", "latin.py", "--instr", "x"], "not valid UTF-8"),
        (["edit", "mean.py", "--instr", "  "], "the instruction is empty"),
        (["edit", "mean.py", "--instr", "x", "--program", "bad.program"], "expected"),
        (["edit", "mean.py", "--instr", "x", "--program", "range.program"], "out of range"),
        (["edit", "mean.py", "--instr", "x", "--baseline", "ar"], "--target"),
        (
            ["edit", "mean.py", "--instr", "x", "--write", "--stdout"],
            "choose one of --write, --stdout, --diff and --json",
        ),
        (["edit", "mean.py", "--instr", "x", "--model", "./no-model-here"], "does not exist"),
        (
            ["edit", "mean.py", "--instr", "x", "--device", "tpu", "--model", "MODEL"],
            "unknown device",
        ),
        (
            ["edit", "mean.py", "--instr", "x", "--grammar", "a.ebnf", "--ignore-unsupported"],
            "--ignore-unsupported applies to --grammar-format json-schema",
        ),
        (
            [
                "edit",
                "mean.py",
                "--instr",
                "x",
                "--model",
                "MODEL",
                "--grammar",
                "unique.json",
                "--grammar-format",
                "json-schema",
            ],
            "keyword 'uniqueItems' cannot be enforced",
        ),
    ],
)
def test_bad_input_is_one_line_nonzero_and_writes_nothing(
    workspace, model_dir, args: list[str], message: str
) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01")
    (workspace / "latin.py").write_bytes("café".encode("latin-1"))
    (workspace / "bad.program").write_text("<copy lines=1/>")
    (workspace / "range.program").write_text('<copy lines="1-99"/>\n</program>')
    (workspace / "unique.json").write_text('{"type": "array", "uniqueItems": true}')
    args = [str(model_dir) if a == "MODEL" else a for a in args]
    result = cad(*args, cwd=workspace)
    assert result.returncode != 0
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert message in stderr
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


def test_grammar_constrains_the_rewritten_file(workspace, model_dir) -> None:
    (workspace / "answer.ebnf").write_text('root ::= "yes" | "no" | "maybe\\n"\n')
    (workspace / "schema.json").write_text(
        json.dumps(
            {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        )
    )
    for seed in ("1", "2"):
        result = cad(
            "edit",
            "mean.py",
            "--instr",
            "x",
            "--model",
            str(model_dir),
            "--grammar",
            "answer.ebnf",
            "--temperature",
            "1",
            "--seed",
            seed,
            "--stdout",
            cwd=workspace,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout in (b"yes", b"no", b"maybe\n")
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--grammar",
        "schema.json",
        "--grammar-format",
        "json-schema",
        "--temperature",
        "1",
        "--stdout",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert isinstance(json.loads(result.stdout)["ok"], bool)


def test_bad_grammar_is_one_line(workspace, model_dir) -> None:
    (workspace / "bad.ebnf").write_text('root ::= ( "a"')
    result = cad(
        "edit",
        "mean.py",
        "--instr",
        "x",
        "--model",
        str(model_dir),
        "--grammar",
        "bad.ebnf",
        cwd=workspace,
    )
    assert result.returncode == 1
    assert result.stderr.decode().startswith("error: grammar: expected ')'")


@pytest.fixture(scope="module")
def eos_model_dir(tmp_path_factory) -> Path:
    """A tiny model that answers every prompt with end-of-sequence at once: its layers add
    nothing to the residual stream, and its output head sees only a coordinate that is
    positive for every token and maps it to the end-of-sequence row."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = make_tiny_model(tmp_path_factory.mktemp("eos"), "qwen2")
    model = AutoModelForCausalLM.from_pretrained(folder, tie_word_embeddings=False)
    eos = AutoTokenizer.from_pretrained(folder).eos_token_id
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight[:, 0] = 1.0
        model.model.norm.weight.zero_()
        model.model.norm.weight[0] = 1.0
        head = torch.zeros_like(model.model.embed_tokens.weight)
        head[eos, 0] = 1.0
        model.lm_head.weight = torch.nn.Parameter(head)
    model.save_pretrained(folder)
    return folder


def test_rewrite_mode_replaces_the_range_with_the_reply(workspace, eos_model_dir) -> None:
    lines = BEFORE.splitlines(keepends=True)
    result = cad(
        "edit", "mean.py", "--instr", "Drop line 2", "--model", str(eos_model_dir),
        "--mode", "rewrite", "--lines", "2-2", "--write", "--stats-json", "stats.json",
        "--syntax", "none",  # an empty body does not parse; this test is about ranges
        cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (workspace / "mean.py").read_bytes() == "".join([lines[0], *lines[2:]]).encode()
    assert b"forwards" in result.stderr
    stats = json.loads((workspace / "stats.json").read_text())
    assert stats["mode"] == "rewrite"
    assert {"forwards", "drafted_tokens", "accepted_per_forward"} <= set(stats)
    assert list(workspace.glob(".mean.py.*")) == []


def test_auto_mode_rewrites_without_an_adapter(workspace, eos_model_dir) -> None:
    for extra in ([], ["--mode", "rewrite"]):
        result = cad(
            "edit", "mean.py", "--instr", "x", "--model", str(eos_model_dir), "--stdout",
            "--stats-json", "stats.json", *extra, cwd=workspace,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout == b""
        assert json.loads((workspace / "stats.json").read_text())["mode"] == "rewrite"
    shown = cad("edit", "mean.py", "--instr", "x", "--model", str(eos_model_dir), cwd=workspace)
    assert shown.returncode == 0, shown.stderr
    assert b"-def mean(values):" in shown.stdout
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


def test_rewrite_mode_refuses_a_spent_budget(workspace, model_dir) -> None:
    result = cad(
        "edit", "mean.py", "--instr", "x", "--model", str(model_dir), "--mode", "rewrite",
        "--lines", "1-2", "--max-new-tokens", "3", "--draft-budget", "4", "--write",
        cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 1
    assert b"nothing was written" in result.stderr
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "rewrite", "--program", "fix.program"], "use --mode program"),
        (["--mode", "program", "--lines", "1-2"], "--lines applies to rewrite mode"),
        (
            ["--baseline", "ar", "--draft-budget", "8"],
            "--draft-budget does not apply to --baseline",
        ),
        (["--lines", "3-9"], "the file has 4 lines"),
        (["--mode", "rewrite", "--lines", "4-2"], "--lines 4-2: the range is reversed; write 2-4"),
        (["--mode", "rewrite", "--subline"], "--subline applies to program mode"),
        (["--stdout", "--diff"], "choose one of --write, --stdout, --diff and --json"),
        (["--target", "fix.program"], "--target applies to --baseline"),
        (["--grammar", "g.ebnf", "--baseline", "ar"], "choose one of --grammar and --baseline"),
        (["--lines", "two"], "expected I-J"),
        (["--mode", "rewrite", "--grammar", "g.ebnf"], "--mode does not apply to --grammar"),
        (["--draft-config", "bad.json"], "unknown draft-config keys: budgit"),
        (["--draft-config", "nothing.json"], "nothing.json: no such file"),
    ],
)
def test_rewrite_mode_bad_input_is_one_line(
    workspace, model_dir, args: list[str], message: str
) -> None:
    (workspace / "bad.json").write_text('{"budgit": 3}')
    (workspace / "g.ebnf").write_text('root ::= "a"\n')
    result = cad("edit", "mean.py", "--instr", "x", "--model", str(model_dir), *args, cwd=workspace)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert message in stderr
    assert (workspace / "mean.py").read_bytes() == BEFORE.encode()


def test_an_offline_first_run_fails_at_once_naming_a_command_that_exists(workspace, tmp_path):
    """No model in the cache and no hub: one line naming ``hf download``, which the
    installation has, instead of a minute of retries."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_ENDPOINT="http://127.0.0.1:9")
    result = subprocess.run(
        [*CAD, "edit", "mean.py", "--instr", "x"], cwd=workspace, env=env, capture_output=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith(f"error: model {DEFAULT_MODEL} is not in the local cache and ")
    assert "cannot be reached" in line and f"(hf download {DEFAULT_MODEL})" in line
    assert (Path(sys.executable).parent / "hf").is_file()


def test_rewrite_progress_counts_the_lines_it_wrote() -> None:
    status = _rewrite_status(Progress(ops=1, lines_copied=2, lines_generated=1, tokens_generated=1))
    assert status == "1 forward, 1 token, 3 lines written"


def test_an_instruction_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(UserError, match="character 2 is an undecodable byte or a lone"):
        check_instruction("a\ud800b")
    check_instruction("naïve ✓")


def test_json_nested_past_the_limit_is_refused_or_left_unconstrained() -> None:
    """Named explicitly, the constraint refuses such a file at once; chosen by ``auto`` it
    is left out with a note. Brackets inside strings do not count."""
    deep = "[" * 1_500 + "]" * 1_500
    with pytest.raises(UserError, match="nests JSON 1,500 levels deep, more than the 1,000"):
        plan_syntax(
            SyntaxChoice.json, language="json", schema=None, before="", region=deep, after="",
            warn=print,
        )  # fmt: skip
    notes: list[str] = []
    plan = plan_syntax(
        SyntaxChoice.auto, language="json", schema=None, before="[", region=deep, after="]",
        warn=notes.append,
    )  # fmt: skip
    assert plan.language is None
    assert notes and "1,501 levels deep" in notes[0]
    quoted = '["' + "[" * 5_000 + '", "\\"[[["]'
    plan = plan_syntax(
        SyntaxChoice.json, language="json", schema=None, before="", region=quoted, after="",
        warn=print,
    )  # fmt: skip
    assert plan.language == "json"


def test_stdout_that_cannot_take_the_edit_is_one_line(workspace, model_dir) -> None:
    args = ["--model", str(model_dir), "--program", "fix.program", "--stdout"]
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [*CAD, "edit", "mean.py", "--instr", "x", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            cwd=workspace,
            timeout=300,
        )
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line == "error: cannot write the output to stdout (No space left on device)"


def test_a_draft_budget_past_the_context_names_the_budget(workspace, model_dir) -> None:
    result = cad(
        "edit", "mean.py", "--instr", "x", "--model", str(model_dir), "--mode", "rewrite",
        "--draft-budget", "100000", cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line == (
        "error: --draft-budget 100,000 is not below the model's context of 8,192 tokens; give "
        "a smaller budget"
    )
