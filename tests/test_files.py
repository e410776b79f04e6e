"""Files on disk through the command line: ``--write`` goes through links and keeps owner,
mode, extended attributes and hard links, refuses what the user may not write, never leaves
a temporary file after SIGTERM and sweeps one that SIGKILL left; reads are bounded; every
refusal is one ``error:`` line. (``test_files_kill`` stops writes at every point.)"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cad.errors import UserError
from cad.files import check_writable, write_atomic, write_files_atomic
from cad.resolver import format, oracle
from tests.tiny_model import make_tiny_model

BEFORE = "def mean(values):\n    return sum(values) / len(values) + 1\n"
AFTER = "def mean(values):\n    return sum(values) / len(values)\n"
ROOT = os.geteuid() == 0
NOBODY = 65534


def cad(*args: str, cwd: Path, prelude: str = "") -> subprocess.Popen[bytes]:
    """Start the ``cad`` console entry point (after ``prelude``, Python run first)."""
    return subprocess.Popen(
        [sys.executable, "-c", f"{prelude}\nfrom cad.server.cli import main; main()", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The exit status and stderr of a finished ``cad``."""
    _, err = process.communicate(timeout=300)
    return process.returncode, err.decode()


def one_error_line(stderr: str, *parts: str) -> None:
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    for part in parts:
        assert part in stderr, stderr


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("files-model"), "qwen2")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "fix.program").write_text(format(oracle(BEFORE, AFTER)))
    return tmp_path


def write_edit(target: str, workspace: Path, model: Path, prelude: str = "") -> subprocess.Popen:
    """``cad edit TARGET --program fix.program --write`` with the tiny model."""
    return cad(
        "edit", target, "--instr", "drop + 1", "--model", str(model), "--program", "fix.program",
        "--write", cwd=workspace, prelude=prelude,
    )  # fmt: skip


def temporary_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".cad-tmp"))


def test_write_goes_through_links_and_keeps_hard_links_owner_and_mode(workspace, model) -> None:
    """The edited file has a hard link (so it is written in place); the stats file has one
    link (so it is replaced by a rename); both are reached through symbolic links."""
    shared = workspace / "shared.py"
    shared.write_text(BEFORE)
    os.link(shared, workspace / "twin.py")
    (workspace / "shared-link.py").symlink_to("shared.py")
    stats = workspace / "stats.json"
    stats.write_text("{}")
    (workspace / "stats-link.json").symlink_to("stats.json")
    for path, mode in ((shared, 0o640), (stats, 0o604)):
        path.chmod(mode)
        if ROOT:
            os.chown(path, NOBODY, NOBODY)
    inode = stats.stat().st_ino

    process = cad(
        "edit", "shared-link.py", "--instr", "drop + 1", "--model", str(model), "--program",
        "fix.program", "--write", "--stats-json", "stats-link.json", cwd=workspace,
    )  # fmt: skip
    code, stderr = finish(process)
    assert code == 0, stderr
    assert (workspace / "shared-link.py").is_symlink() and (
        workspace / "stats-link.json"
    ).is_symlink()
    assert shared.read_text() == (workspace / "twin.py").read_text() == AFTER
    assert '"copied_tokens"' in stats.read_text()
    for path, mode in ((shared, 0o640), (stats, 0o604)):
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == mode, path
        if ROOT:
            assert (info.st_uid, info.st_gid) == (NOBODY, NOBODY), path
    assert shared.stat().st_nlink == 2 and shared.samefile(workspace / "twin.py")
    assert stats.stat().st_ino != inode  # replaced by a rename: atomic
    assert temporary_files(workspace) == []


def test_a_read_only_file_is_refused_before_any_decoding(workspace, model) -> None:
    target = workspace / "frozen.py"
    target.write_text(BEFORE)
    target.chmod(0o444)
    code, stderr = finish(write_edit("frozen.py", workspace, model))
    assert code == 1
    one_error_line(stderr, "frozen.py: the file is read-only (mode 0444)", "nothing was written")
    assert target.read_text() == BEFORE


SLOW_FSYNC = """
import os, pathlib, time
_fsync = os.fsync
def slow_fsync(fd):
    pathlib.Path("writing").touch()
    time.sleep(60)
    _fsync(fd)
os.fsync = slow_fsync
"""


def interrupted_write(workspace: Path, model: Path, how: signal.Signals) -> tuple[int, str]:
    """``cad edit --write`` stopped by ``how`` while it writes its temporary file."""
    process = write_edit("mean.py", workspace, model, prelude=SLOW_FSYNC)
    deadline = time.monotonic() + 240
    while not (workspace / "writing").exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.05)
    (workspace / "writing").unlink()
    process.send_signal(how)
    return finish(process)


TERM_AT_RENAME = """
import os, signal
_replace = os.replace
def replace_after_term(source, target, **kwargs):
    if str(target).endswith("mean.py"):
        os.kill(os.getpid(), signal.SIGTERM)
    _replace(source, target, **kwargs)
os.replace = replace_after_term
"""


def test_a_sigterm_held_back_while_the_file_is_renamed_says_it_was_written(workspace, model):
    target = workspace / "mean.py"
    target.write_text(BEFORE)
    code, stderr = finish(write_edit("mean.py", workspace, model, prelude=TERM_AT_RENAME))
    assert code == 128 + signal.SIGTERM
    one_error_line(stderr, f"terminated; it had written {target.resolve()}")
    assert target.read_text() != BEFORE and temporary_files(workspace) == []


def test_sigterm_leaves_no_temporary_file_and_sigkill_leftovers_are_swept(workspace, model) -> None:
    target = workspace / "mean.py"
    target.write_text(BEFORE)
    code, stderr = interrupted_write(workspace, model, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM
    one_error_line(stderr, "terminated; nothing was written")
    assert temporary_files(workspace) == [] and target.read_text() == BEFORE

    code, _ = interrupted_write(workspace, model, signal.SIGKILL)
    assert code == -signal.SIGKILL
    (left,) = temporary_files(workspace)
    assert left.startswith(".mean.py.")
    alive = f".mean.py.{os.getpid()}.inuse.cad-tmp"  # a writer that still runs
    (workspace / alive).write_text("partial")
    code, stderr = finish(write_edit("mean.py", workspace, model))
    assert code == 0, stderr
    assert target.read_text() == AFTER
    assert temporary_files(workspace) == [alive]


def test_write_keeps_extended_attributes(tmp_path: Path, monkeypatch) -> None:
    """The replacement file gets the file's extended attributes; one the user may not set
    is left out, and a file system without them writes as before."""
    target = tmp_path / "attrs.py"
    target.write_text(BEFORE)
    try:
        os.setxattr(target, "user.origin", b"generated by hand")
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            pytest.skip(f"the file system of {tmp_path} has no user extended attributes")
        raise
    os.setxattr(target, "user.refused", b"not for this user")
    if ROOT:
        os.setxattr(target, "trusted.cad", b"set with privileges")
    inode = target.stat().st_ino
    set_xattr = os.setxattr

    def refusing_setxattr(fd: int, name: str, value: bytes) -> None:
        if name == "user.refused":
            raise PermissionError(errno.EPERM, "Operation not permitted")
        set_xattr(fd, name, value)

    monkeypatch.setattr(os, "setxattr", refusing_setxattr)
    write_atomic(target, AFTER)
    assert target.read_text() == AFTER and target.stat().st_ino != inode  # renamed over
    assert os.getxattr(target, "user.origin") == b"generated by hand"
    assert "user.refused" not in os.listxattr(target)
    if ROOT:
        assert os.getxattr(target, "trusted.cad") == b"set with privileges"

    def unsupported(path: Path) -> list[str]:
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(os, "listxattr", unsupported)
    write_atomic(target, BEFORE)
    assert target.read_text() == BEFORE
    assert temporary_files(tmp_path) == []


def test_a_linked_file_without_room_for_its_journal_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A file with several hard links is written in place through a journal beside it; a
    folder the user cannot write leaves no safe way, so nothing is written."""
    folder = tmp_path / "locked"
    folder.mkdir()
    target = folder / "shared.py"
    target.write_text(BEFORE)
    os.link(target, folder / "twin.py")
    if ROOT:  # root may write anywhere: the folder refuses it as it would refuse a user
        make_temp = tempfile.mkstemp

        def mkstemp(*args, dir=None, **kwargs):
            if dir is not None and Path(dir) == folder:
                raise PermissionError(errno.EACCES, "Permission denied")
            return make_temp(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    else:
        folder.chmod(0o555)
    try:
        with pytest.raises(UserError) as caught:
            write_atomic(target, AFTER)
        if not ROOT:
            with pytest.raises(UserError, match="cannot write in"):
                check_writable(target)
    finally:
        folder.chmod(0o755)
    message = str(caught.value)
    assert message.startswith(f"{target}: cannot write in {folder} (Permission denied)")
    assert message.endswith("nothing was written") and "\n" not in message
    assert target.read_text() == (folder / "twin.py").read_text() == BEFORE
    assert sorted(os.listdir(folder)) == ["shared.py", "twin.py"]


def test_an_unwritable_folder_is_one_line(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "shop.py").write_text("def price(n):\n    return n * 2\n\n\nTAX = 3\n")
    folder = tmp_path / "locked"
    folder.mkdir()
    prelude = ""
    if ROOT:  # root may write anywhere: the folder refuses it as it would refuse a user
        prelude = (
            "import tempfile\n_mkstemp = tempfile.mkstemp\n"
            "def mkstemp(*args, dir=None, **kwargs):\n"
            f"    if str(dir) == {str(folder)!r}:\n"
            "        raise PermissionError(13, 'Permission denied')\n"
            "    return _mkstemp(*args, dir=dir, **kwargs)\n"
            "tempfile.mkstemp = mkstemp\n"
        )
    else:
        folder.chmod(0o555)
    process = cad(
        "data", "synth", "src", "--out", "locked/edits.jsonl", cwd=tmp_path, prelude=prelude
    )
    code, stderr = finish(process)
    folder.chmod(0o755)
    assert code == 1
    one_error_line(stderr, f"cannot write in {folder} (Permission denied)")
    assert list(folder.iterdir()) == []

    code, stderr = finish(cad("data", "synth", "src", "--out", "edits.jsonl", cwd=tmp_path))
    assert code == 0, stderr
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "edits.jsonl").stat().st_mode) == 0o666 & ~umask


def test_devices_and_huge_files_are_refused_before_reading(tmp_path: Path) -> None:
    huge = tmp_path / "huge.py"
    with huge.open("wb") as handle:
        handle.truncate(20_000_000)
    for target, message in (
        ("/dev/zero", "/dev/zero: not a regular file"),
        ("huge.py", "huge.py: the file is 20.0 MB, over the limit of 4.2 MB"),
    ):
        code, stderr = finish(cad("edit", target, "--instr", "x", cwd=tmp_path))
        assert code == 1
        one_error_line(stderr, message)


def test_a_malicious_pickle_is_one_line_and_never_runs(tmp_path: Path, model: Path) -> None:
    evil = tmp_path / "evil"
    evil.mkdir()
    for item in model.iterdir():
        if item.suffix != ".safetensors":
            (evil / item.name).write_bytes(item.read_bytes())
    marker = tmp_path / "pwned"
    payload = (
        "import os, pickle\n"
        "class Evil:\n"
        f"    def __reduce__(self): return (os.system, ('touch {marker}',))\n"
        f"open({str(evil / 'pytorch_model.bin')!r}, 'wb').write(pickle.dumps(Evil()))\n"
    )
    subprocess.run([sys.executable, "-c", payload], check=True)
    (tmp_path / "mean.py").write_text(BEFORE)
    code, stderr = finish(cad("edit", "mean.py", "--instr", "x", "--model", "evil", cwd=tmp_path))
    assert code == 1
    one_error_line(stderr, "model evil: its weights are a pickle", "safetensors")
    assert not marker.exists()


def test_a_number_too_long_for_any_document_is_a_program_error(tmp_path: Path) -> None:
    (tmp_path / "doc.py").write_text(BEFORE)
    (tmp_path / "long.program").write_text(f'<copy lines="{"9" * 5000}-1"/>\n</program>')
    code, stderr = finish(cad("resolve", "long.program", "doc.py", cwd=tmp_path))
    assert code == 1
    one_error_line(stderr, "expected a line number of at most 18 digits")


MULTI_DRIVER = r"""
import json, os, signal, sys
from pathlib import Path
from cad.files import write_files_atomic

config = json.loads(sys.argv[1])
first, second = Path(config["first"]), Path(config["second"])
OLD, NEW = config["old"], config["new"]
signum = getattr(signal, config["signal"])
WATCHED = {
    "open", "close", "write", "pwrite", "truncate", "ftruncate", "flush", "fsync",
    "fchmod", "fchown", "setxattr", "flock", "link", "unlink", "rename", "replace",
}
KNOWN = {"a.py", "gone.py", "b.py", "new.py", "other.txt"}


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


def files(side):
    return {str(first / name if name in ("a.py", "gone.py") else second / name): text
            for name, text in side.items()}


def child(point):
    if config["handler"] == "raise":
        signal.signal(signum, terminate)
    elif signum == signal.SIGINT:  # Python's own action, even where the parent ignores it
        signal.signal(signum, signal.default_int_handler)
    sys.setprofile(hook_stopping_at(point))
    try:
        write_files_atomic({Path(p): t for p, t in files(NEW).items()})
    except Terminated:
        os._exit(128 + signum)
    except KeyboardInterrupt:
        os._exit(130)
    os._exit(0)


def each_file():
    found = {}
    for path, old in files(OLD).items():
        new = files(NEW)[path]
        data = Path(path).read_text() if os.path.exists(path) else None
        found[Path(path).name] = "old" if data == old else "new" if data == new else "torn"
    return found


def state():
    kinds = set(each_file().values())
    return kinds.pop() if len(kinds) == 1 else "mixed"


def left():
    return sorted(n for folder in (first, second) for n in os.listdir(folder) if n not in KNOWN)


def reset():
    for path, text in files(OLD).items():
        if text is None:
            if os.path.exists(path):
                os.unlink(path)
        else:
            Path(path).write_text(text)


for point in range(1, 400):
    reset()
    pid = os.fork()
    if pid == 0:
        try:
            child(point)
        finally:
            os._exit(99)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    stopped, files_at_stop, left_at_stop = state(), each_file(), left()
    folders = (first, second) if point % 2 else (second, first)
    write_files_atomic({folders[0] / "other.txt": f"written after stop {point}\n"})
    after_next_write = state()
    write_files_atomic({folders[1] / "other.txt": f"written after stop {point}\n"})
    print(json.dumps({
        "point": point, "code": code, "stopped": stopped, "files_at_stop": files_at_stop,
        "left_at_stop": left_at_stop, "after_next_write": after_next_write, "left": left(),
    }), flush=True)
    if code == 0:
        break
"""

OLD = "".join(f"old line {n}: {'x' * (n % 17)}\n" for n in range(1200))
NEW = "".join(f"new line {n}\n" for n in range(900))
OLD_FILES = {"a.py": OLD, "gone.py": "to be deleted\n", "b.py": OLD[::-1], "new.py": None}
NEW_FILES = {"a.py": NEW, "gone.py": None, "b.py": NEW + NEW, "new.py": "created\n"}


def stop_multi_file_write_everywhere(tmp_path: Path, how: str, handler: str) -> list[dict]:
    """Write ``NEW_FILES`` over ``OLD_FILES`` (two folders; files changed, created and
    deleted) once per stopping point, from the first until a write runs to its end; after
    each stop, a write of another file in one of the two folders (in turn) finishes or
    undoes what the stopped one left, and one in the other folder follows."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    config = {
        "first": str(first), "second": str(second), "old": OLD_FILES, "new": NEW_FILES,
        "signal": how, "handler": handler,
    }  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", MULTI_DRIVER, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert records[-1]["code"] == 0 and records[-1]["stopped"] == "new", records[-1]
    assert records[-1]["left_at_stop"] == [], records[-1]
    assert len(records) >= 20, records  # the hook reached the write's calls
    return records


def test_sigkill_at_any_point_of_a_multi_file_write_leaves_all_files_old_or_all_new(
    tmp_path: Path,
) -> None:
    """Right after the kill each file holds its old bytes or its new ones (renames tear
    nothing); once the next write in either folder has run, all are old or all are new; once
    each folder has had a write, nothing the stopped write made is left."""
    records = stop_multi_file_write_everywhere(tmp_path, "SIGKILL", "default")
    for record in records[:-1]:
        assert record["code"] == -signal.SIGKILL, record
        assert "torn" not in record["files_at_stop"].values(), record
        assert record["after_next_write"] in ("old", "new"), record
        assert record["left"] == [], record
    outcomes = {record["after_next_write"] for record in records[:-1]}
    assert outcomes == {"old", "new"}
    assert "mixed" in {record["stopped"] for record in records}  # killed between renames
    assert any(
        any(name.endswith(".cad-files") for name in record["left_at_stop"]) for record in records
    )


STOPS_FOR_MULTI_FILE_WRITES = [
    pytest.param("SIGTERM", "default", -signal.SIGTERM, id="sigterm-default-action"),
    pytest.param("SIGTERM", "raise", 128 + signal.SIGTERM, id="sigterm-handler-raises"),
    pytest.param("SIGINT", "default", 130, id="sigint-keyboard-interrupt"),
]


@pytest.mark.parametrize(("how", "handler", "status"), STOPS_FOR_MULTI_FILE_WRITES)
def test_sigterm_and_sigint_at_any_point_of_a_multi_file_write_leave_nothing_behind(
    tmp_path: Path, how: str, handler: str, status: int
) -> None:
    """The signal ends the process with its own status wherever it arrives; all files are
    old or all new at once, and nothing the write made remains."""
    for record in stop_multi_file_write_everywhere(tmp_path, how, handler)[:-1]:
        assert record["code"] == status, record
        assert record["stopped"] in ("old", "new"), record
        assert record["left_at_stop"] == [], record


def test_a_multi_file_write_keeps_modes_and_a_failed_rename_puts_every_file_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, gone = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "gone.py"
    first.write_text("a\n")
    first.chmod(0o640)
    second.write_text("b\n")
    gone.write_text("g\n")
    real_replace = os.replace

    def failing_replace(source: object, target: object) -> None:
        if str(target) == str(second):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    changes = {first: "A\n", gone: None, second: "B\n", tmp_path / "new.py": "N\n"}
    with pytest.raises(UserError, match=r"b\.py: cannot write \(Input/output error\); nothing"):
        write_files_atomic(changes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py", "gone.py"]
    assert (first.read_text(), second.read_text(), gone.read_text()) == ("a\n", "b\n", "g\n")
    monkeypatch.setattr(os, "replace", real_replace)
    write_files_atomic(changes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py", "new.py"]
    assert (first.read_text(), second.read_text()) == ("A\n", "B\n")
    assert stat.S_IMODE(first.stat().st_mode) == 0o640


@pytest.mark.parametrize(
    ("setup", "changes", "message"),
    [
        ("hard-link", {"a.py": "x"}, "a.py: the file has 2 hard links"),
        ("", {"missing/new.py": "x"}, "new.py: folder"),
        ("", {"absent.py": None}, "absent.py: no such file to delete"),
        ("symlink", {"a.py": "x", "link.py": "y"}, "two of the paths name the same file"),
        ("read-only", {"b.py": "x", "a.py": "y"}, "a.py: the file is read-only"),
    ],
)
def test_a_multi_file_write_refuses_before_writing_anything(
    tmp_path: Path, setup: str, changes: dict[str, str | None], message: str
) -> None:
    (tmp_path / "a.py").write_text("a\n")
    (tmp_path / "b.py").write_text("b\n")
    if setup == "hard-link":
        os.link(tmp_path / "a.py", tmp_path / "twin.py")
    if setup == "read-only":
        (tmp_path / "a.py").chmod(0o444)
    if setup == "symlink":
        (tmp_path / "link.py").symlink_to("a.py")
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    with pytest.raises(UserError, match=message) as caught:
        write_files_atomic({tmp_path / path: text for path, text in changes.items()})
    assert "\n" not in str(caught.value)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before
