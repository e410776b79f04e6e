"""Writes stopped at every point. A process writing a file is stopped before and after each
call that creates, writes, syncs, links, renames or removes a file (``write_atomic`` runs in
a forked child that a profile hook signals at its k-th such point, for every k). After
SIGKILL the file holds its old bytes or its new ones exactly once the next write in its
folder has run, and no temporary file or journal is left; after SIGTERM or SIGINT that holds
at once, and the process still ends with the signal's status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cad.errors import UserError
from cad.files import JOURNAL_SUFFIX, TEMP_SUFFIX, read_text, write_atomic

OLD = "".join(f"old line {n}: {'x' * (n % 17)}\n" for n in range(1200))
NEW = "".join(f"new line {n}\n" for n in range(900))  # over a buffered file's 8 KiB
ROOT = os.geteuid() == 0

DRIVER = r"""
import json, os, signal, sys
from pathlib import Path
from cad.files import write_atomic

config = json.loads(sys.argv[1])
target = Path(config["target"])
folder = target.parent
old, new = config["old"].encode(), config["new"].encode()
signum = getattr(signal, config["signal"])
WATCHED = {
    "open", "close", "write", "pwrite", "truncate", "ftruncate", "flush", "fsync",
    "fchmod", "fchown", "setxattr", "flock", "link", "unlink", "rename", "replace",
}


class Terminated(BaseException):
    pass


def terminate(signum, frame):
    raise Terminated


def hook_stopping_at(point):
    calls = 0

    def hook(frame, event, arg):
        nonlocal calls
        if event in ("c_call", "c_return") and getattr(arg, "__name__", "") in WATCHED:
            calls += 1
            if calls == point:
                os.kill(os.getpid(), signum)

    return hook


def refuse_chown(fd, uid, gid):
    raise PermissionError(1, "Operation not permitted")


def child(point):
    if config["handler"] == "raise":
        signal.signal(signum, terminate)
    elif signum == signal.SIGINT:  # Python's own action, even where the parent ignores it
        signal.signal(signum, signal.default_int_handler)
    if config["owner_not_kept"]:
        os.fchown = refuse_chown
    sys.setprofile(hook_stopping_at(point))
    try:
        write_atomic(target, config["new"])
    except Terminated:
        os._exit(128 + signum)
    except KeyboardInterrupt:
        os._exit(130)
    os._exit(0)


def state(data):
    return "old" if data == old else "new" if data == new else "torn"


def left(names=("target.py", "twin.py", "other.txt")):
    return sorted(entry for entry in os.listdir(folder) if entry not in names)


for point in range(1, 200):
    with target.open("r+b") as handle:
        handle.write(old)
        handle.truncate()
    if config["owner_not_kept"]:
        os.chown(target, 65534, 65534)
    pid = os.fork()
    if pid == 0:
        try:
            child(point)
        finally:
            os._exit(99)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    stopped, left_at_stop = state(target.read_bytes()), left()
    write_atomic(folder / "other.txt", f"written after stop {point}\n")
    twin = folder / "twin.py"
    print(json.dumps({
        "point": point,
        "code": code,
        "stopped": stopped,
        "left_at_stop": left_at_stop,
        "after_next_write": state(target.read_bytes()),
        "left": left(),
        "links_kept": not twin.exists() or (twin.samefile(target) and twin.read_bytes() == target.read_bytes()),
    }), flush=True)
    if code == 0:
        break
"""


def stop_everywhere(
    tmp_path: Path, how: str, handler: str, linked: bool, owner_not_kept: bool = False
) -> list[dict]:
    """Write ``NEW`` over ``OLD`` once per stopping point (from the first until a write runs
    to its end); one record per point."""
    folder = tmp_path / "work"
    folder.mkdir()
    target = folder / "target.py"
    target.write_text(OLD)
    if linked:
        os.link(target, folder / "twin.py")
    config = {
        "target": str(target), "old": OLD, "new": NEW, "signal": how, "handler": handler,
        "owner_not_kept": owner_not_kept,
    }  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert records[-1]["code"] == 0 and records[-1]["after_next_write"] == "new"
    assert len(records) >= 6, records  # the hook reached the write's calls
    return records


WRITES = [
    pytest.param(False, False, id="renamed"),
    pytest.param(True, False, id="hard-linked"),
    pytest.param(
        False, True, id="owner-not-kept",
        marks=pytest.mark.skipif(not ROOT, reason="giving the file another owner needs root"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("linked", "owner_not_kept"), WRITES)
def test_sigkill_at_any_point_leaves_old_or_new_bytes_and_nothing_else(
    tmp_path: Path, linked: bool, owner_not_kept: bool
) -> None:
    """A file written in place may be torn right after the kill; the next write in its
    folder finishes what the journal records."""
    records = stop_everywhere(tmp_path, "SIGKILL", "default", linked, owner_not_kept)
    for record in records[:-1]:
        assert record["code"] == -signal.SIGKILL, record
        assert record["after_next_write"] in ("old", "new"), record
        assert record["left"] == [] and record["links_kept"], record
        if not (linked or owner_not_kept):  # a rename leaves no torn file, even before
            assert record["stopped"] in ("old", "new"), record
    assert {record["after_next_write"] for record in records[:-1]} == {"old", "new"}
    if linked or owner_not_kept:  # written in place: some stops tore it, and left its journal
        assert "torn" in {record["stopped"] for record in records}
        assert any(f".target.py{JOURNAL_SUFFIX}" in record["left_at_stop"] for record in records)


STOPS = [
    pytest.param("SIGTERM", "default", -signal.SIGTERM, id="sigterm-default-action"),
    pytest.param("SIGTERM", "raise", 128 + signal.SIGTERM, id="sigterm-handler-raises"),
    pytest.param("SIGINT", "default", 130, id="sigint-keyboard-interrupt"),
]


@pytest.mark.parametrize("linked", [False, True], ids=["renamed", "hard-linked"])
@pytest.mark.parametrize(("how", "handler", "status"), STOPS)
def test_sigterm_and_sigint_at_any_point_leave_nothing_behind(
    tmp_path: Path, how: str, handler: str, status: int, linked: bool
) -> None:
    """The signal ends the process with its own status wherever it arrives; the file is old
    or new at once, and no temporary file or journal remains."""
    for record in stop_everywhere(tmp_path, how, handler, linked)[:-1]:
        assert record["code"] == status, record
        assert record["stopped"] in ("old", "new"), record
        assert record["left_at_stop"] == [] and record["links_kept"], record


KILL_BEFORE_TRUNCATE = """
import os, signal, sys
from cad.files import write_atomic
def killed(*args):
    os.kill(os.getpid(), signal.SIGKILL)
os.ftruncate = killed
write_atomic(sys.argv[1], sys.argv[2])
"""


def torn_write(folder: Path) -> Path:
    """A hard-linked ``target.py`` whose in-place write of ``NEW`` over ``OLD`` was killed
    after the new bytes went in and before the old tail was cut off."""
    folder.mkdir()
    target = folder / "target.py"
    target.write_text(OLD)
    os.link(target, folder / "twin.py")
    killed = subprocess.run(
        [sys.executable, "-c", KILL_BEFORE_TRUNCATE, str(target), NEW], timeout=60
    )
    assert killed.returncode == -signal.SIGKILL
    assert target.read_bytes() == (NEW + OLD[len(NEW) :]).encode()
    return target


def test_reading_a_torn_file_finishes_its_write_first(tmp_path: Path) -> None:
    target = torn_write(tmp_path / "work")
    (journal,) = [p for p in target.parent.iterdir() if p.name.endswith(JOURNAL_SUFFIX)]
    assert journal.name == f".target.py{JOURNAL_SUFFIX}"
    assert read_text(target) == NEW
    assert (tmp_path / "work" / "twin.py").read_text() == NEW and not journal.exists()
    write_atomic(target, OLD)  # the next write sweeps the killed writer's temporary file
    assert sorted(p.name for p in target.parent.iterdir()) == ["target.py", "twin.py"]
    assert not any(p.name.endswith(TEMP_SUFFIX) for p in target.parent.iterdir())


def test_a_torn_file_changed_since_is_refused_not_overwritten(tmp_path: Path) -> None:
    """Someone edited the file after the killed write: finishing it would undo their edit,
    so reads and writes of the file refuse, naming the journal to remove."""
    target = torn_write(tmp_path / "work")
    journal = target.parent / f".target.py{JOURNAL_SUFFIX}"
    with target.open("r+b") as handle:
        handle.write(b"# edited by hand\n" + handle.read())
    edited = target.read_bytes()
    write_atomic(target.parent / "other.txt", "another file of the folder\n")
    for attempt in (lambda: read_text(target), lambda: write_atomic(target, NEW)):
        with pytest.raises(UserError) as caught:
            attempt()
        message = str(caught.value)
        assert f"{target}: changed since" in message and str(journal) in message
        assert "\n" not in message
    assert target.read_bytes() == edited and journal.exists()
    journal.unlink()
    write_atomic(target, NEW)
    assert target.read_text() == (tmp_path / "work" / "twin.py").read_text() == NEW
