"""``cad-engine`` leaves no process behind: when vLLM's API server is killed outright (as the
kernel's OOM killer does), the supervisor ends the engine core and every worker it started,
then exits with the server's status."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.engine.conftest import start_engine, stop_engine

pytestmark = [pytest.mark.engine, pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux")]


def children(pid: int) -> list[int]:
    """The live children of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    below = children(pid)
    return below + [grandchild for child in below for grandchild in descendants(child)]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_killed_api_server_takes_the_engine_core_with_it(engine_model, tmp_path) -> None:
    engine = start_engine(engine_model, tmp_path / "engine.log")
    try:
        [server] = children(engine.process.pid)
        below = descendants(server)
        assert below, "vLLM runs its engine core in a process of its own"
        os.kill(server, signal.SIGKILL)
        assert engine.process.wait(120) == 128 + signal.SIGKILL
        assert [pid for pid in [server, *below] if alive(pid)] == []
    finally:
        stop_engine(engine)
