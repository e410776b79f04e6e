"""The warm server: ``cad serve --background`` keeps the model loaded, ``cad edit`` decodes
there, byte-identical to decoding in its own process, and falls back when none answers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cad.errors import UserError
from cad.resolver import format, oracle
from cad.server import warm
from cad.server.edit_pipeline import EditFiles, EditOptions, Run
from tests.tiny_model import make_tiny_model

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
BEFORE = "def mean(values):\n    return sum(values) / len(values) + 1\n\nprint(mean([1]))\n"
AFTER = "def mean(values):\n    return sum(values) / len(values)\n\nprint(mean([1]))\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), "qwen2")


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A folder with the file, its fixing program, and a cache folder of its own (where the
    warm server's socket goes)."""
    (tmp_path / "mean.py").write_text(BEFORE)
    (tmp_path / "fix.program").write_text(format(oracle(BEFORE, AFTER)))
    (tmp_path / "cache").mkdir()
    return tmp_path


def cad(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "CAD_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([*CAD, *args], capture_output=True, cwd=cwd, env=env, timeout=300)


def test_cad_edit_decodes_on_the_warm_server_byte_for_byte(workspace, model_dir) -> None:
    started = cad("serve", "--background", "--model", str(model_dir), "--preload", cwd=workspace)
    assert started.returncode == 0, started.stderr
    assert b"warm server ready at" in started.stderr
    try:
        edit = ["edit", "mean.py", "--instr", "Drop the + 1", "--program", "fix.program"]
        warm_run = cad(*edit, "--stats-json", "warm.json", cwd=workspace)
        local_run = cad(
            *edit, "--model", str(model_dir), "--no-server", "--stats-json", "local.json",
            cwd=workspace,
        )  # fmt: skip
        assert warm_run.returncode == 0, warm_run.stderr
        assert local_run.returncode == 0, local_run.stderr
        assert warm_run.stdout == local_run.stdout and b"+    return sum" in warm_run.stdout
        warm_stats = json.loads((workspace / "warm.json").read_text())
        local_stats = json.loads((workspace / "local.json").read_text())
        assert warm_stats["decoded_by"].startswith("warm server ")
        assert local_stats["decoded_by"] == "this process"
        assert warm_stats["forwards"] == local_stats["forwards"]

        (workspace / "bad.program").write_text('<copy lines="1-99"/>\n</program>')
        refused = cad("edit", "mean.py", "--instr", "x", "--program", "bad.program", cwd=workspace)
        assert refused.returncode == 1
        (line,) = refused.stderr.decode().splitlines()
        assert line.startswith('error: op 1: <copy lines="1-99"/> is out of range')

        again = cad("serve", "--background", cwd=workspace)
        assert again.returncode == 1 and b"a warm server already runs" in again.stderr
    finally:
        stopped = cad("serve", "--stop", cwd=workspace)
    assert stopped.returncode == 0, stopped.stderr
    assert not (workspace / "cache" / warm.SOCKET_NAME).exists()
    gone = cad("serve", "--stop", cwd=workspace)
    assert gone.returncode == 1 and b"no warm server runs" in gone.stderr


def test_a_server_that_does_not_answer_means_decoding_here(workspace, model_dir) -> None:
    result = cad(
        "edit", "mean.py", "--instr", "x", "--program", "fix.program", "--model",
        str(model_dir), "--server", "127.0.0.1:9", "--stdout", cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == AFTER
    assert result.stderr.decode().startswith("note: no warm server answers (127.0.0.1:9")


def test_a_client_that_leaves_cancels_its_edit(tmp_path) -> None:
    """The server's side of one connection: the client's request, then it hangs up while the
    edit waits for the model; the edit is cancelled, not decoded."""
    server_end, client_end = socket.socketpair()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server = warm.WarmServer(listener, warm.ServerDefaults())
    loads: list[object] = []
    server.model = lambda options, status: loads.append(options)  # type: ignore[method-assign]
    options = EditOptions(file=Path("mean.py"), instr="x", program=Path("fix.program"))
    request = {
        "cad": warm.PROTOCOL,
        "run": Run.program.value,
        "options": options.to_json(),
        "files": {"document": BEFORE, "program": format(oracle(BEFORE, AFTER))},
    }
    server.lock.acquire()
    worker = threading.Thread(target=server.handle, args=(server_end,))
    worker.start()
    client_end.sendall(json.dumps(request).encode() + b"\n")
    client_end.close()
    threading.Timer(0.5, server.lock.release).start()
    worker.join(timeout=30)
    assert not worker.is_alive() and loads == []
    listener.close()


def test_options_and_outcomes_cross_the_wire_unchanged() -> None:
    options = EditOptions(file=Path("a b.py"), instr="x", adapter=Path("/ad"), lines="2-3")
    assert EditOptions.from_json(json.loads(json.dumps(options.to_json()))) == options
    with pytest.raises(UserError):
        EditOptions.from_json({"file": "a.py"})
    files = EditFiles(document="x\n")
    assert EditFiles(**json.loads(json.dumps(files.__dict__))) == files
    assert warm.parse_server_address("2088") == ("127.0.0.1", 2088)
    assert warm.parse_server_address("/tmp/s.sock") == "/tmp/s.sock"
    with pytest.raises(UserError):
        warm.parse_server_address("host:99999")
