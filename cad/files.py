"""Reading user files strictly and writing them atomically, as an editor does.

Reading checks that the path is a regular file of a bounded size before reading a byte, so
a device (``/dev/zero``), a pipe or a huge log cannot make a command read without end.
Writing goes through symbolic links to their target, keeps the file's mode, owner and hard
links, refuses a file the user may not write, and never leaves a half-written file: the new
text goes to a temporary file in the same folder that replaces the file by a rename. Only a
file with several hard links, or one whose owner the user could not keep, is overwritten in
place instead (a rename would split the links or change the owner), with SIGINT and SIGTERM
held back while it is written. A temporary file that a killed writer left behind is swept
by the next write of the same file.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cad.errors import UserError

MAX_TEXT_BYTES = 4 * 1024 * 1024
"""The largest text file read by default: far more than any model's context holds."""

MAX_CORPUS_BYTES = 1024 * 1024 * 1024
"""The largest edit corpus (JSONL) read at once."""

TEMP_SUFFIX = ".cad-tmp"
_LEGACY_TEMP_AGE_S = 3600.0


def describe_size(size: int) -> str:
    """A byte count for messages: ``512 bytes``, ``3.2 MB``."""
    if size < 1000:
        return f"{size} byte{'' if size == 1 else 's'}"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if size < scale * 1000 or unit == "GB":
            return f"{size / scale:.1f} {unit}"
    raise AssertionError("unreachable")


def read_text(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """Read a UTF-8 text file exactly (line endings and BOM kept). Refuses, with a
    ``UserError`` naming the file, anything but a regular file, a file over ``max_bytes``,
    a binary file and text that is not UTF-8."""
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path}: is a directory, expected a file")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: not a regular file (a device, pipe or socket); give a text file")
    if info.st_size > max_bytes:
        raise UserError(_too_large(path, info.st_size, max_bytes))
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise UserError(_too_large(path, len(data), max_bytes))
    if b"\x00" in data:
        raise UserError(f"{path}: looks like a binary file; only UTF-8 text can be edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not valid UTF-8 (byte {exc.start}); convert it to UTF-8 first"
        ) from None


def _too_large(path: Path, size: int, limit: int) -> str:
    return (
        f"{path}: the file is {describe_size(size)}, over the limit of {describe_size(limit)}; "
        "give a smaller file"
    )


def write_atomic(path: Path, text: str) -> None:
    """Replace the file at ``path`` (through symbolic links) with ``text`` in UTF-8, so that
    readers see the old file or the new one, never a part; a new file is created. Mode,
    owner and hard links are kept where the user may keep them. A ``UserError`` says why
    nothing was written: a read-only file, a folder the user cannot write, and so on."""
    target = Path(os.path.realpath(path))
    info = _existing(target, path)
    data = text.encode("utf-8")
    _sweep_stale_temp_files(target)
    if info is not None and info.st_nlink > 1:
        _overwrite_in_place(target, path, data)
        return
    try:
        _replace(target, data, info)
    except _OwnerNotKept:
        _overwrite_in_place(target, path, data)
    except PermissionError as exc:
        if info is None:
            raise UserError(
                f"{path}: cannot write in {target.parent} ({exc.strerror}); nothing was written"
            ) from None
        _overwrite_in_place(target, path, data)
    except FileNotFoundError:
        raise UserError(f"{path}: folder {target.parent} does not exist") from None
    except OSError as exc:
        raise UserError(
            f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
        ) from None


def check_writable(path: Path) -> None:
    """Raise the ``UserError`` that ``write_atomic(path, ...)`` would raise for the file
    itself or its folder, before any work is spent on what to write."""
    target = Path(os.path.realpath(path))
    if _existing(target, path) is None:
        if not target.parent.is_dir():
            raise UserError(f"{path}: folder {target.parent} does not exist")
        if not os.access(target.parent, os.W_OK | os.X_OK):
            raise UserError(f"{path}: cannot write in {target.parent} (Permission denied)")


def _existing(target: Path, path: Path) -> os.stat_result | None:
    """The status of the file to replace (``None`` when there is none yet), after checking
    that it is a regular file the user may write."""
    try:
        info = target.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: not a regular file; nothing was written")
    read_only = not os.access(target, os.W_OK)
    if os.geteuid() == 0:
        # Root may write anything; like an editor, it still respects a file nobody may write.
        read_only = read_only or not info.st_mode & 0o222
    if read_only:
        raise UserError(
            f"{path}: the file is read-only (mode {stat.S_IMODE(info.st_mode):04o}); nothing was "
            "written (make it writable first)"
        )
    return info


class _OwnerNotKept(Exception):
    """A replacement file would change the owner or group the user cannot set back."""


def _replace(target: Path, data: bytes, info: os.stat_result | None) -> None:
    """Write ``data`` to a temporary file beside ``target``, give it ``target``'s mode and
    owner, and rename it over ``target``."""
    fd, name = tempfile.mkstemp(
        prefix=f".{target.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=target.parent
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if info is None:
                os.fchmod(handle.fileno(), 0o666 & ~_umask())
            else:
                os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
                _keep_owner(handle.fileno(), info)
            os.fsync(handle.fileno())
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    _sync_folder(target.parent)


def _umask() -> int:
    """The process's file-creation mask (what a new file's mode leaves out)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _keep_owner(fd: int, info: os.stat_result) -> None:
    """Give the open file ``info``'s owner and group, or raise ``_OwnerNotKept``."""
    current = os.fstat(fd)
    if (current.st_uid, current.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except PermissionError:
        raise _OwnerNotKept from None


def _overwrite_in_place(target: Path, path: Path, data: bytes) -> None:
    """Write ``data`` into the existing file itself (the same inode), with SIGINT and
    SIGTERM held back until it is complete."""
    try:
        with _signals_held(), target.open("r+b") as handle:
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise UserError(
            f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
        ) from None


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back (they are delivered when the block ends)."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a file system that cannot is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _sweep_stale_temp_files(target: Path) -> None:
    """Remove the temporary files of earlier writes of ``target`` whose writer is gone
    (killed before it could clean up): ``.NAME.PID.XXXX.cad-tmp`` of a process that no
    longer runs, and ``.NAME.XXXX.cad-tmp`` (no process id) older than an hour."""
    name = re.escape(target.name)
    with_pid = re.compile(rf"\.{name}\.(\d+)\.[A-Za-z0-9_]+{re.escape(TEMP_SUFFIX)}")
    without_pid = re.compile(rf"\.{name}\.[A-Za-z0-9_]{{8}}{re.escape(TEMP_SUFFIX)}")
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        stale = False
        if (match := with_pid.fullmatch(entry.name)) is not None:
            stale = not _running(int(match.group(1)))
        elif without_pid.fullmatch(entry.name) is not None:
            with contextlib.suppress(OSError):
                stale = (
                    time.time() - entry.stat(follow_symlinks=False).st_mtime > _LEGACY_TEMP_AGE_S
                )
        else:
            continue
        if stale and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _running(pid: int) -> bool:
    """Whether a process with this id runs (one of another user counts as running)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
