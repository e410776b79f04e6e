"""``cad-engine``: vLLM's arguments pass through, the plugin and the processor are switched on,
install problems are one line, and the supervisor leaves no process behind however the server
ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cad.engine import launcher
from cad.engine.launcher import (
    MAX_EDITS_VARIABLE,
    PROCESSOR,
    SERVER,
    LaunchError,
    engine_arguments,
    plugin_names,
)


def test_processor_added_unless_speculative_decoding() -> None:
    base = ["--model", "m", "--tensor-parallel-size", "2"]
    assert engine_arguments(base) == [*base, "--logits-processors", PROCESSOR]
    spec = [*base, "--speculative-config", '{"method": "ngram"}']
    assert engine_arguments(spec) == spec
    assert engine_arguments(["-sc", "{}"]) == ["-sc", "{}"]
    mine = ["--logits-processors", "my.Proc"]
    assert engine_arguments(mine) == ["--logits-processors", PROCESSOR, "my.Proc"]
    assert engine_arguments([*base, "--logits-processors", PROCESSOR]).count(PROCESSOR) == 1


def test_plugin_names_keep_the_operators() -> None:
    assert plugin_names(None) == "cad"
    assert plugin_names("") == "cad"
    assert plugin_names("lora_filesystem_resolver") == "lora_filesystem_resolver,cad"
    assert plugin_names("cad,x") == "cad,x"


def test_max_edits_is_ours() -> None:
    args = ["--model", "m", "--max-edits", "40", "--port", "1"]
    assert launcher._take_max_edits(args) == "40"
    assert args == ["--model", "m", "--port", "1"]
    args = ["--max-edits=3"]
    assert launcher._take_max_edits(args) == "3" and args == []
    with pytest.raises(LaunchError, match="--max-edits"):
        launcher._take_max_edits(["--max-edits", "many"])
    assert launcher._take_max_edits(["--model", "m"]) is None


def test_main_supervises_the_server(monkeypatch) -> None:
    started = []
    monkeypatch.setattr(launcher, "supervise", lambda *call: started.append(call) or 137)
    with pytest.raises(SystemExit) as exit_:
        launcher.main(["--model", "m", "--max-edits", "40"])
    assert exit_.value.code == 137
    [(command, _)] = started
    assert command == [*SERVER, "--model", "m", "--max-edits", "40"]


def test_the_server_takes_the_edit_limit_for_the_plugin(monkeypatch, capsys) -> None:
    ran = []
    monkeypatch.setattr(launcher, "check_vllm", lambda: None)
    monkeypatch.setattr(launcher.runpy, "run_module", lambda *args, **kwargs: ran.append(sys.argv))
    monkeypatch.setenv(MAX_EDITS_VARIABLE, "")  # restored afterwards, like VLLM_PLUGINS
    monkeypatch.setenv("VLLM_PLUGINS", "")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    launcher.serve(["--port", "1", "--max-edits", "40"])
    assert os.environ[MAX_EDITS_VARIABLE] == "40"
    assert ran == [[launcher.SERVER_MODULE, "--port", "1", "--logits-processors", PROCESSOR]]
    with pytest.raises(SystemExit):
        launcher.serve(["--max-edits", "many"])
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --max-edits 'many'") and "\n" not in err


def test_missing_vllm_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(SystemExit) as exit_:
        launcher.serve(["--model", "m"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: vLLM is not installed") and "\n" not in err
    assert "copy-as-decode[vllm]" in err


def _model_folder(folder, heads: int) -> str:
    """A model configuration (no weights) whose attention heads are ``64 // heads`` wide."""
    from transformers import Qwen2Config

    Qwen2Config(hidden_size=64, num_attention_heads=heads, num_key_value_heads=1).save_pretrained(
        folder
    )
    return str(folder)


def test_head_size_vllm_cannot_run_is_refused_before_start(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(launcher, "check_vllm", lambda: None)
    monkeypatch.setattr(launcher, "cpu_head_sizes", lambda: [32, 64, 128])
    monkeypatch.setattr(launcher.runpy, "run_module", pytest.fail)
    narrow = _model_folder(tmp_path / "narrow", heads=4)
    with pytest.raises(SystemExit) as exit_:
        launcher.serve(["--model", narrow, "--port", "1"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"error: model {narrow} has attention heads of size 16") and "\n" not in err
    )
    assert "32, 64, 128" in err and "cad serve" in err


def test_head_size_vllm_runs_passes(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(launcher, "cpu_head_sizes", lambda: [32, 64, 128])
    launcher.check_head_size(["--model=" + _model_folder(tmp_path / "wide", heads=2)])
    launcher.check_head_size(["--model", str(tmp_path / "missing")])
    launcher.check_head_size(["--port", "1"])
    monkeypatch.setattr(launcher, "cpu_head_sizes", lambda: None)
    launcher.check_head_size(["--model", _model_folder(tmp_path / "narrow", heads=4)])


SERVER_SCRIPT = """
import os, signal, subprocess, sys, time
from pathlib import Path

out = Path(sys.argv[1])
sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
stays = subprocess.Popen(sleep)  # in the server's process group, like vLLM's engine core
leaves = subprocess.Popen(sleep, start_new_session=True)  # a process group of its own
def stop(number, frame):
    out.with_suffix(".stopped").write_text(str(number))
    sys.exit(0)  # leaves both children behind
signal.signal(signal.SIGTERM, stop)
out.write_text(f"{os.getpid()} {stays.pid} {leaves.pid}")
time.sleep(600)
"""
SUPERVISOR = "import os, sys; from cad.engine.launcher import supervise; " + (
    "sys.exit(supervise(sys.argv[1:], os.environ))"
)
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process control")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(ready, what: str) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.05)


def start_supervised(tmp_path: Path) -> tuple[subprocess.Popen, Path, list[int]]:
    """A supervisor running the stand-in server; the server's pid and its two children."""
    script = tmp_path / "server.py"
    script.write_text(SERVER_SCRIPT)
    out = tmp_path / "pids"
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, sys.executable, str(script), str(out)],
        start_new_session=True,
    )
    wait_for(lambda: out.exists() and out.read_text().count(" ") == 2, "the server start")
    return supervisor, out, [int(pid) for pid in out.read_text().split()]


@linux
@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGSEGV])
def test_a_killed_server_takes_every_process_it_started_with_it(tmp_path, kill) -> None:
    supervisor, _, (server, stays, leaves) = start_supervised(tmp_path)
    os.kill(server, kill)
    assert supervisor.wait(60) == 128 + kill
    assert not any(alive(pid) for pid in (server, stays, leaves))


@linux
def test_stopping_the_supervisor_stops_the_server_and_what_it_left(tmp_path) -> None:
    supervisor, out, (server, stays, leaves) = start_supervised(tmp_path)
    os.kill(supervisor.pid, signal.SIGTERM)
    assert supervisor.wait(60) == 0
    assert out.with_suffix(".stopped").read_text() == str(int(signal.SIGTERM))
    assert not any(alive(pid) for pid in (server, stays, leaves))


@linux
def test_a_killed_supervisor_stops_the_server(tmp_path) -> None:
    supervisor, out, (server, stays, leaves) = start_supervised(tmp_path)
    try:
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait(60)
        wait_for(out.with_suffix(".stopped").exists, "the server's stop")
        wait_for(lambda: not alive(server), "the server's exit")
    finally:
        for pid in (server, stays, leaves):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
