"""Reading user files strictly, and writing them so that a file holds its old bytes or its new
ones, exactly, whatever stops the write.

Reading checks that the path is a regular file of a bounded size before reading a byte, so
a device (``/dev/zero``), a pipe or a huge log cannot make a command read without end.

Writing goes through symbolic links to their target, keeps the file's mode, owner, extended
attributes and hard links, and refuses a file the user may not write. An error, SIGINT,
SIGTERM, SIGKILL or a crash of the machine at any point leaves the file with its old bytes or
its new ones:

* A file is replaced by a rename: the new text goes to a temporary file in the same folder,
  ``.NAME.PID.XXXXXXXX.cad-tmp``, which gets the file's owner, mode and extended attributes
  (those the user may set: ``user.*`` always, ``security.*`` and ``trusted.*`` with the
  privileges they need) and is flushed to disk before the rename.
* A file with several hard links, or one whose owner the user could not keep, is written in
  place instead (a rename would split the links or change the owner), through a journal: the
  new and the old bytes go to ``.NAME.cad-journal`` beside the file, flushed to disk, before
  the file is overwritten, and the journal is removed once the file is on disk. A journal
  left behind means the write was stopped: the next read or write of the file, and the next
  write of any file in its folder, finishes it (copies the new bytes in). If the file has
  changed since in any other way, its read or write refuses, naming the journal to remove,
  rather than overwrite that change. In a folder the user cannot write there is no room for
  the journal, so such a write is refused.
* SIGINT and SIGTERM are held back whenever a write creates, renames or removes a file, and
  let through only while the write can still be undone: then the temporary file is removed
  and the signal goes on (a handler the program installed runs; the default action still
  ends the process with the signal's status). One that arrives after that point waits until
  the write is complete. Handlers can only be set in the main thread: a write in another
  thread that a signal ends relies on the sweep below.
* A temporary file that a killed writer left behind is removed by the next write in its
  folder.

``write_files_atomic`` writes several files all or none: it stages every new text beside its
file, commits with a record of the write, then renames (details in its description).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import NoReturn

from cad.errors import UserError

MAX_TEXT_BYTES = 4 * 1024 * 1024
"""The largest text file read by default: far more than any model's context holds."""

MAX_CORPUS_BYTES = 1024 * 1024 * 1024
"""The largest edit corpus (JSONL) read at once."""

TEMP_SUFFIX = ".cad-tmp"
JOURNAL_SUFFIX = ".cad-journal"
_JOURNAL_FORMAT = 1
_LEGACY_TEMP_AGE_S = 3600.0
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
_TEMP_WITH_PID = re.compile(rf"\.(.+)\.(\d+)\.[A-Za-z0-9_]+{re.escape(TEMP_SUFFIX)}")
_TEMP_WITHOUT_PID = re.compile(rf"\..+\.[A-Za-z0-9_]{{8}}{re.escape(TEMP_SUFFIX)}")
_XATTR_NOT_KEPT = frozenset(
    {errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL, errno.ENODATA}
)
"""Why an extended attribute may be left out: the file system has none, or the user may not
set that namespace (``security.*``, ``trusted.*`` without privileges), or it went away."""


_COMPLETED: list[Path] = []
"""The files this process has written, in order (a signal held back during a write arrives
after it, and the message it leads to must not say that nothing was written)."""


def completed_writes() -> tuple[Path, ...]:
    """The files this process has written so far, in the order they were written."""
    return tuple(_COMPLETED)


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
    a binary file and text that is not UTF-8. A stopped in-place write of the file is
    finished first, so what is read is never half old, half new."""
    _finish_stopped_write(Path(os.path.realpath(path)), path)
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
    the file holds its old bytes or the new ones whatever stops the write (see the module's
    description); a new file is created. Mode, owner, extended attributes and hard links are
    kept where the user may keep them. A ``UserError`` says why nothing was written: a
    read-only file, a folder the user cannot write, an earlier stopped write of the file
    that cannot be finished, and so on."""
    target = Path(os.path.realpath(path))
    _tidy_folder(target, path)
    info = _existing(target, path)
    data = text.encode("utf-8")
    if info is not None and info.st_nlink > 1:
        _write_in_place(target, path, data)
        return
    try:
        _replace(target, data, info)
    except _OwnerNotKept:
        _write_in_place(target, path, data)
    except PermissionError as exc:
        if info is None:
            raise UserError(
                f"{path}: cannot write in {target.parent} ({exc.strerror}); nothing was written"
            ) from None
        _write_in_place(target, path, data)
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
    info = _existing(target, path)
    if info is None:
        if not target.parent.is_dir():
            raise UserError(f"{path}: folder {target.parent} does not exist")
        if not os.access(target.parent, os.W_OK | os.X_OK):
            raise UserError(f"{path}: cannot write in {target.parent} (Permission denied)")
    elif info.st_nlink > 1 and not os.access(target.parent, os.W_OK | os.X_OK):
        raise UserError(_no_room_for_journal(path, target, "Permission denied"))


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
    """Write ``data`` to a temporary file beside ``target``, give it ``target``'s owner,
    mode and extended attributes, and rename it over ``target``. The temporary file is
    created with SIGINT and SIGTERM held, so it exists only where its removal is sure to
    run."""
    with _StopSignals() as stops:
        fd, name = _create_temp(target)
        try:
            try:
                with stops.let_through():
                    _write_all(fd, data)
                    if info is None:
                        os.fchmod(fd, 0o666 & ~_umask())
                    else:
                        _keep_owner(fd, info)
                        os.fchmod(fd, stat.S_IMODE(info.st_mode))
                        _copy_xattrs(target, fd)
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(name, target)
        except BaseException:
            _remove(Path(name))
            raise
        _COMPLETED.append(target)
    _sync_folder(target.parent)


def _create_temp(target: Path) -> tuple[int, str]:
    """A new, empty temporary file beside ``target`` (named after it and this process, so
    the sweep knows when its writer is gone): its descriptor and path."""
    return tempfile.mkstemp(
        prefix=f".{target.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=target.parent
    )


def _umask() -> int:
    """The process's file-creation mask (what a new file's mode leaves out)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _keep_owner(fd: int, info: os.stat_result) -> None:
    """Give the open file ``info``'s owner and group, or raise ``_OwnerNotKept``. Done
    before the mode is set: a change of owner clears the set-user-ID and set-group-ID bits."""
    current = os.fstat(fd)
    if (current.st_uid, current.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except PermissionError:
        raise _OwnerNotKept from None


def _copy_xattrs(source: Path, fd: int) -> None:
    """Give the open file ``fd`` the extended attributes of ``source``. One the user may not
    set, and all of them on a file system without extended attributes, are left out; any
    other failure is raised, since the rename would drop the attribute silently. A system
    without the calls (not Linux) has nothing to copy."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError as exc:
        if exc.errno in _XATTR_NOT_KEPT:
            return
        raise
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(source, name))
        except OSError as exc:
            if exc.errno not in _XATTR_NOT_KEPT:
                raise


def _write_in_place(target: Path, path: Path, data: bytes) -> None:
    """Overwrite the existing file itself (the same inode) with ``data`` through a journal
    (``_commit_journal``), then remove the journal. SIGINT and SIGTERM stop the write only
    before the journal is committed; after that they wait until the file is complete."""
    journal = _journal_path(target)
    with _StopSignals() as stops:
        try:
            fd, name = _create_temp(target)
        except PermissionError as exc:
            raise UserError(_no_room_for_journal(path, target, exc.strerror)) from None
        except OSError as exc:
            raise UserError(
                f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
            ) from None
        try:
            handle = os.open(target, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            os.close(fd)
            _remove(Path(name))
            raise UserError(
                f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
            ) from None
        try:
            old = _commit_journal(stops, fd, Path(name), handle, target, path, data)
            _overwrite_committed(handle, path, journal, new=data, old=old)
            _COMPLETED.append(target)
        finally:
            os.close(handle)
            os.close(fd)


def _commit_journal(
    stops: _StopSignals, fd: int, temp: Path, handle: int, target: Path, path: Path, new: bytes
) -> bytes:
    """Record the open file ``handle``'s old bytes and ``new`` in the temporary file ``fd``
    (at ``temp``), flush it to disk and link it as ``target``'s journal: the commit point;
    the link fails while another writer's journal is there. The journal stays locked while
    this process works on it, which tells readers its writer is alive. Returns the old
    bytes; the temporary file's name is gone either way."""
    journal = _journal_path(target)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with stops.let_through():
            old = _read_all(handle)
            _write_journal(fd, target.name, new=new, old=old)
            os.fsync(fd)
        os.link(temp, journal)
    except FileExistsError:
        _remove(temp)
        raise UserError(
            f"{path}: another cad process is writing this file (its journal {journal} is "
            "there); nothing was written"
        ) from None
    except OSError as exc:
        _remove(temp)
        raise UserError(
            f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
        ) from None
    except BaseException:
        _remove(temp)
        raise
    _remove(temp)
    _sync_folder(journal.parent)
    return old


def _overwrite_committed(handle: int, path: Path, journal: Path, new: bytes, old: bytes) -> None:
    """Overwrite the open file ``handle`` with ``new`` once its journal is committed, and
    remove the journal. When that fails, the old bytes are put back; when even that fails,
    the journal stays for the next read or write to finish the write."""
    try:
        _overwrite(handle, new)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        try:
            _overwrite(handle, old)
        except OSError:
            raise UserError(
                f"{path}: cannot write ({reason}); the write stays unfinished until the next "
                f"cad command that reads or writes the file (its journal is {journal})"
            ) from None
        _remove_journal(journal)
        raise UserError(f"{path}: cannot write ({reason}); nothing was written") from None
    _remove_journal(journal)


def _remove_journal(journal: Path) -> None:
    """Remove the journal of a file that holds whole bytes again. Should that fail, the
    next read or write finds the file whole and removes it then."""
    with contextlib.suppress(OSError):
        os.unlink(journal)


def _no_room_for_journal(path: Path, target: Path, reason: str | None) -> str:
    return (
        f"{path}: cannot write in {target.parent} ({reason}), where a file with several hard "
        "links or another owner keeps the journal that makes its write safe; nothing was "
        "written"
    )


def _overwrite(fd: int, data: bytes) -> None:
    """Make the open file hold exactly ``data`` and flush it to disk."""
    _write_all(fd, data, offset=0)
    os.ftruncate(fd, len(data))
    os.fsync(fd)


def _write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    """Write all of ``data`` at the file's position, or at ``offset`` when given."""
    view = memoryview(data)
    while view:
        if offset is None:
            written = os.write(fd, view)
        else:
            written = os.pwrite(fd, view, offset)
            offset += written
        view = view[written:]


def _read_all(fd: int) -> bytes:
    """The rest of the open file from its position."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _remove(path: Path) -> None:
    """Remove a file this module created, if it is still there."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _journal_path(target: Path) -> Path:
    return target.parent / f".{target.name}{JOURNAL_SUFFIX}"


@dataclass(frozen=True)
class _Journal:
    """What a journal records: the file's name in its folder, and its new and old bytes."""

    target: str
    new: bytes
    old: bytes


def _write_journal(fd: int, target: str, new: bytes, old: bytes) -> None:
    """A journal: one line of JSON (format, file name, and each part's size and SHA-256)
    followed by the new bytes and the old ones."""
    header = {
        "format": _JOURNAL_FORMAT,
        "target": target,
        "new_size": len(new),
        "new_sha256": hashlib.sha256(new).hexdigest(),
        "old_size": len(old),
        "old_sha256": hashlib.sha256(old).hexdigest(),
    }
    _write_all(fd, json.dumps(header).encode() + b"\n")
    _write_all(fd, new)
    _write_all(fd, old)


def _parse_journal(record: bytes) -> _Journal | None:
    """The journal in ``record``, or ``None`` when it is not one whole journal."""
    line, _, payload = record.partition(b"\n")
    try:
        header = json.loads(line)
        new_size, old_size = int(header["new_size"]), int(header["old_size"])
        target, format_ = header["target"], header["format"]
    except (ValueError, KeyError, TypeError):
        return None
    if (
        format_ != _JOURNAL_FORMAT
        or not isinstance(target, str)
        or len(payload) != new_size + old_size
    ):
        return None
    new, old = payload[:new_size], payload[new_size:]
    if (hashlib.sha256(new).hexdigest(), hashlib.sha256(old).hexdigest()) != (
        header.get("new_sha256"),
        header.get("old_sha256"),
    ):
        return None
    return _Journal(target, new, old)


class _Unfinished(Exception):
    """A stopped in-place write that cannot be finished now; the message says why and what
    to do, after the file's name."""


def _finish_stopped_write(target: Path, path: Path) -> None:
    """Finish the stopped in-place write of ``target`` that its journal records, if any,
    or raise the ``UserError`` that says why it cannot be finished."""
    journal = _journal_path(target)
    if not os.path.lexists(journal):
        return
    try:
        _finish(journal)
    except _Unfinished as exc:
        raise UserError(f"{path}: {exc}") from None
    except OSError as exc:
        raise UserError(
            f"{path}: cannot finish its stopped write ({exc.strerror or exc}); its journal is "
            f"{journal}"
        ) from None


def _finish(journal: Path) -> None:
    """Finish the in-place write that ``journal`` records, if its writer is gone: copy the
    new bytes in unless the file already holds them, then remove the journal. The file must
    hold what a stopped copy can leave (each byte old or new, the length old's, new's or one
    between); a file changed in any other way is left as it is (``_Unfinished``)."""
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _Unfinished(
                "another cad process is writing this file; try again when it is done"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(journal, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                _finish_locked(journal, fd)
    finally:
        os.close(fd)


def _finish_locked(journal: Path, fd: int) -> None:
    """``_finish`` once the journal ``fd`` is locked and still in place."""
    record = _parse_journal(_read_all(fd))
    if record is None or _journal_path(journal.parent / record.target) != journal:
        raise _Unfinished(f"its journal {journal} is damaged; remove it to keep the file as it is")
    with _StopSignals():
        try:
            handle = os.open(
                journal.parent / record.target, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except FileNotFoundError:
            os.unlink(journal)  # the file is gone: there is nothing left to finish
            return
        try:
            current = _read_all(handle)
            if current != record.new:
                if not _stopped_copy(current, old=record.old, new=record.new):
                    raise _Unfinished(
                        f"changed since a write of it by cad was stopped; remove {journal} "
                        "to keep the file as it is"
                    )
                _overwrite(handle, record.new)
        finally:
            os.close(handle)
        os.unlink(journal)


def _stopped_copy(current: bytes, old: bytes, new: bytes) -> bool:
    """Whether ``current`` can be ``old`` partly overwritten by ``new``: every byte is the
    old or the new one at its place, and the length is old's, new's or one between."""
    if not min(len(old), len(new)) <= len(current) <= max(len(old), len(new)):
        return False
    block = 1 << 16
    for start in range(0, len(current), block):
        piece = current[start : start + block]
        new_piece, old_piece = new[start : start + block], old[start : start + block]
        if piece in (new_piece, old_piece):
            continue
        for at, byte in enumerate(piece):
            in_new = at < len(new_piece) and new_piece[at] == byte
            if not in_new and not (at < len(old_piece) and old_piece[at] == byte):
                return False
    return True


class _Stopped(BaseException):
    """SIGINT or SIGTERM, whose action was to end the process, arrived while a write could
    still be undone; raised so that the write cleans up before the signal ends the process."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _StopSignals:
    """Holds SIGINT and SIGTERM back for a ``with`` block and lets them through only inside
    ``let_through()``, where whatever the write created can still be removed. There a signal
    unwinds the write as an exception: the program's own handler raises one (Ctrl-C's
    ``KeyboardInterrupt``, the command line's ``Terminated``); a signal whose action is to end
    the process raises ``_Stopped`` for the length of the block and is sent again when it
    ends, once the files are removed, so the process still ends with that signal's status.
    A signal that arrives while held is delivered when the block ends.

    The signals are blocked in the calling thread, and in the main thread a handler of the
    block's own stands in for the caller's: the kernel may hand a process-wide signal to any
    thread that has it unblocked (a library's worker thread), and Python then runs the
    handler in the main thread regardless of its mask. While held, that handler only notes
    the signal."""

    def __init__(self) -> None:
        self._outer: set[signal.Signals] = set()
        self._handlers: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}
        self._held: list[int] = []
        self._open = False

    def __enter__(self) -> _StopSignals:
        self._outer = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                self._handlers[signum] = signal.getsignal(signum)
                signal.signal(signum, self._arrived)
        return self

    def _arrived(self, signum: int, frame: FrameType | None) -> None:
        """Note a held signal; one let through acts as the caller's handler would."""
        if not self._open:
            self._held.append(signum)
            return
        handler = self._handlers[signum]
        if handler == signal.SIG_DFL:
            raise _Stopped(signum)
        if callable(handler):
            handler(signum, frame)

    @contextlib.contextmanager
    def let_through(self) -> Iterator[None]:
        """Let the signals through (as the caller had them) for the ``with`` block."""
        self._open = True
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._outer)
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            self._open = False

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        if isinstance(error, _Stopped):
            signal.raise_signal(error.signum)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._outer)
        for signum in dict.fromkeys(self._held):
            signal.raise_signal(signum)


def _sync_folder(folder: Path) -> None:
    """Make a rename or link in ``folder`` durable; a file system that cannot is left as it
    is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tidy_folder(target: Path, path: Path) -> None:
    """Before a write of ``target``: finish the stopped in-place writes whose journals are
    in its folder, and remove the temporary files of writers that are gone (killed before
    they could clean up): ``.NAME.PID.XXXX.cad-tmp`` of a process that no longer runs, and
    ``.NAME.XXXX.cad-tmp`` (no process id) older than an hour. A journal of ``target``
    itself that cannot be finished stops the write (``UserError``); those of other files
    wait for their own next read or write."""
    _finish_stopped_write(target, path)
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") and entry.name.endswith(JOURNAL_SUFFIX):
            with contextlib.suppress(_Unfinished, OSError):
                _finish(Path(entry.path))
        elif _stale_temp(entry, target) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _stale_temp(entry: os.DirEntry[str], target: Path) -> bool:
    """Whether ``entry`` is a temporary file whose writer is gone. One named after this
    process is stale only for ``target`` itself (it was left by an earlier process of the
    same id); for another file this process may be writing it now."""
    if (match := _TEMP_WITH_PID.fullmatch(entry.name)) is not None:
        pid = int(match.group(2))
        if pid == os.getpid():
            return match.group(1) == target.name
        return not _running(pid)
    if _TEMP_WITHOUT_PID.fullmatch(entry.name) is not None:
        with contextlib.suppress(OSError):
            return time.time() - entry.stat(follow_symlinks=False).st_mtime > _LEGACY_TEMP_AGE_S
    return False


def _running(pid: int) -> bool:
    """Whether a process with this id runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


STAGE_SUFFIX = ".cad-stage"
BACKUP_SUFFIX = ".cad-old"
RECORD_SUFFIX = ".cad-files"
_RECORD_FORMAT = 1
_RECORD_NAME = re.compile(rf"\.cad\.(\d+)\.[0-9a-f]+{re.escape(RECORD_SUFFIX)}")
_STAGED_NAME = re.compile(
    rf"\..+\.(\d+)\.[A-Za-z0-9_]+(?:{re.escape(STAGE_SUFFIX)}|{re.escape(BACKUP_SUFFIX)})"
)
_IN_FLIGHT: set[str] = set()
"""Names of the staged files, backups and records of this process's writes of several files
now under way, which a sweep in this process must leave alone."""


@dataclass
class _Entry:
    """One file of a write of several files: the path the caller named, its ``target``
    (links resolved), its new bytes (``None``: delete it), its status before (``None``: a
    new file), and the staged file and backup link the write makes for it."""

    path: Path
    target: Path
    data: bytes | None
    info: os.stat_result | None
    staged: Path | None = None
    backup: Path | None = None
    applied: bool = False


def write_files_atomic(changes: Mapping[Path, str | None]) -> None:
    """Write several files all or none: each path gets its text in UTF-8, or is deleted
    when its text is ``None``. Every new text is first staged beside its file
    (``.NAME.PID.XXXXXXXX.cad-stage``, with the file's owner, mode and extended attributes,
    flushed to disk) and every existing file kept as a hard link (``.cad-old``); then a
    record of the write (``.cad.PID.XXXXXXXXXXXXXXXX.cad-files``) goes into every folder,
    the one in the first folder last: that is the commit. Only then are the staged files
    renamed over their files and the deleted ones removed.

    An error before the commit, or SIGINT or SIGTERM, leaves every file as it was and
    removes what was staged; one after it waits until every file is written. When a rename
    fails, the files already renamed are put back from their backups. A process killed
    after the commit leaves its record: the next write of several files in any of its
    folders (or ``finish_stopped_file_writes``) carries it to its end, and one killed
    before the commit has its staged files removed, so the files are all old or all new.
    Files with several hard links, whose owner a rename would change, or in a folder that
    does not exist are refused before anything is written (``UserError``)."""
    named = [(Path(path), Path(os.path.realpath(path))) for path in changes]
    if len({target for _, target in named}) != len(named):
        raise UserError("two of the paths name the same file; nothing was written")
    for path, target in named:
        _tidy_folder(target, path)
    for folder in sorted({target.parent for _, target in named}):
        finish_stopped_file_writes(folder)
    entries = [_plan_entry(path, target, changes[path]) for path, target in named]
    if not entries:
        return
    records: list[Path] = []
    with _StopSignals() as stops:
        try:
            for entry in entries:
                _stage(entry, stops)
            _write_records(entries, records)
        except BaseException:
            _discard(entries, records)
            raise
        _apply(entries, records)


def _plan_entry(path: Path, target: Path, text: str | None) -> _Entry:
    """Check one file of a write of several files before anything is written."""
    info = _existing(target, path)
    if text is None and info is None:
        raise UserError(f"{path}: no such file to delete; nothing was written")
    if info is None and not target.parent.is_dir():
        raise UserError(f"{path}: folder {target.parent} does not exist; nothing was written")
    if text is not None and info is not None and info.st_nlink > 1:
        raise UserError(
            f"{path}: the file has {info.st_nlink} hard links, which a write of several files "
            "would split; write it on its own; nothing was written"
        )
    return _Entry(path, target, None if text is None else text.encode("utf-8"), info)


def _fail(path: Path, exc: OSError) -> UserError:
    return UserError(f"{path}: cannot write ({exc.strerror or exc}); nothing was written")


def _stage(entry: _Entry, stops: _StopSignals) -> None:
    """Keep the old file as a backup link and write the new bytes to a staged file beside
    it (created with the signals held, filled while they may stop the write)."""
    try:
        if entry.info is not None:
            entry.backup = _link_backup(entry.target)
        if entry.data is None:
            return
        fd, name = tempfile.mkstemp(
            prefix=f".{entry.target.name}.{os.getpid()}.", suffix=STAGE_SUFFIX,
            dir=entry.target.parent,
        )  # fmt: skip
        entry.staged = Path(name)
        _IN_FLIGHT.add(entry.staged.name)
        try:
            with stops.let_through():
                _fill(fd, entry.data, entry.target, entry.info)
        finally:
            os.close(fd)
    except _OwnerNotKept:
        raise UserError(
            f"{entry.path}: a rename would change the file's owner, which a write of several "
            "files needs; write it on its own; nothing was written"
        ) from None
    except OSError as exc:
        raise _fail(entry.path, exc) from None


def _fill(fd: int, data: bytes, target: Path, info: os.stat_result | None) -> None:
    """Write a staged file's bytes and give it its file's owner, mode and extended
    attributes (a new file's mode from the umask), flushed to disk."""
    _write_all(fd, data)
    if info is None:
        os.fchmod(fd, 0o666 & ~_umask())
    else:
        _keep_owner(fd, info)
        os.fchmod(fd, stat.S_IMODE(info.st_mode))
        _copy_xattrs(target, fd)
    os.fsync(fd)


def _link_backup(target: Path) -> Path:
    """A new hard link to ``target`` beside it, ``.NAME.PID.XXXXXXXX.cad-old``."""
    while True:
        name = f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}{BACKUP_SUFFIX}"
        backup = target.parent / name
        try:
            os.link(target, backup)
        except FileExistsError:
            continue
        _IN_FLIGHT.add(name)
        return backup


def _write_records(entries: list[_Entry], records: list[Path]) -> None:
    """Put the record of the write into every folder it writes in, the first folder's
    last (the commit); each copy is whole before it has its name."""
    folders = sorted({entry.target.parent for entry in entries})
    name = f".cad.{os.getpid()}.{os.urandom(8).hex()}{RECORD_SUFFIX}"
    copies = [folder / name for folder in folders]
    record = {
        "format": _RECORD_FORMAT,
        "primary": str(copies[0]),
        "copies": [str(copy) for copy in copies],
        "entries": [
            {
                "target": str(entry.target),
                "staged": None if entry.staged is None else str(entry.staged),
                "backup": None if entry.backup is None else str(entry.backup),
            }
            for entry in entries
        ],
    }
    data = json.dumps(record).encode()
    _IN_FLIGHT.add(name)
    for copy in [*copies[1:], copies[0]]:
        try:
            _place_record(copy, data)
        except OSError as exc:
            _IN_FLIGHT.discard(name)
            raise UserError(
                f"{copy.parent}: cannot write ({exc.strerror or exc}); nothing was written"
            ) from None
        except BaseException:
            _IN_FLIGHT.discard(name)
            raise
        records.append(copy)


def _place_record(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it, and rename it to
    ``path``."""
    fd, name = tempfile.mkstemp(prefix=f".cad.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(name, path)
    except BaseException:
        _remove(Path(name))
        raise
    _sync_folder(path.parent)


def _discard(entries: list[_Entry], records: list[Path]) -> None:
    """Undo a write stopped before its commit: remove its records, staged files and
    backups."""
    for record in records:
        _remove(record)
    for entry in entries:
        for made in (entry.staged, entry.backup):
            if made is not None:
                _remove(made)
                _IN_FLIGHT.discard(made.name)
    if records:
        _IN_FLIGHT.discard(records[0].name)


def _apply(entries: list[_Entry], records: list[Path]) -> None:
    """After the commit: rename every staged file over its file and remove the deleted
    ones; then remove the backups and the records. A rename that fails puts the files
    already written back."""
    try:
        for entry in entries:
            if entry.staged is None:
                os.unlink(entry.target)
            else:
                os.replace(entry.staged, entry.target)
            entry.applied = True
            _COMPLETED.append(entry.target)
    except OSError as exc:
        _roll_back(entries, records, exc)
    for folder in sorted({entry.target.parent for entry in entries}):
        _sync_folder(folder)
    _end_write(entries, records)


def _end_write(entries: list[_Entry], records: list[Path]) -> None:
    """Remove a finished write's backups, then its records (the commit's last)."""
    for entry in entries:
        if entry.backup is not None:
            _remove(entry.backup)
            _IN_FLIGHT.discard(entry.backup.name)
        if entry.staged is not None:
            _IN_FLIGHT.discard(entry.staged.name)
    for record in records:  # the first folder's, the commit, last
        _remove(record)
    if records:
        _IN_FLIGHT.discard(records[0].name)


def _roll_back(entries: list[_Entry], records: list[Path], exc: OSError) -> NoReturn:
    """Put back the files a failed write already renamed or removed, from their backups,
    remove what it staged and its records, and raise the ``UserError`` that says so."""
    failed = next(entry for entry in entries if not entry.applied)
    applied = [entry for entry in entries if entry.applied]
    try:
        for entry in reversed(applied):
            if entry.backup is not None:
                os.replace(entry.backup, entry.target)
            else:
                os.unlink(entry.target)
    except OSError as undo:
        for record in records:
            _remove(record)
        raise UserError(
            f"{failed.path}: cannot write ({exc.strerror or exc}), and putting back the files "
            f"written before it failed ({undo.strerror or undo}); their old bytes are in the "
            f"{BACKUP_SUFFIX} files beside them"
        ) from None
    if applied:
        del _COMPLETED[-len(applied) :]
    _discard(entries, [])
    _end_write(entries, records)
    raise _fail(failed.path, exc) from None


def finish_stopped_file_writes(folder: Path) -> None:
    """Carry a killed process's writes of several files with a record in ``folder`` to an
    end: a committed one (its first folder's record is there) is finished, renaming its
    staged files over their files and removing its deleted files; one stopped before its
    commit is undone. Then staged files and backups of processes that are gone are
    removed. A damaged record is left as it is."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _RECORD_NAME.fullmatch(name)
        if match is not None and _writer_gone(int(match.group(1)), name):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                _recover(folder / name)
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            match = _STAGED_NAME.fullmatch(name)
            if match is not None and _writer_gone(int(match.group(1)), name):
                _remove(folder / name)


def _writer_gone(pid: int, name: str) -> bool:
    """Whether the process that made the file ``name`` has stopped: another process that
    no longer runs, or this one when the file is not part of a write under way."""
    if pid == os.getpid():
        return name not in _IN_FLIGHT
    return not _running(pid)


def _recover(record_path: Path) -> None:
    """Finish or undo the write ``record_path`` records (see
    ``finish_stopped_file_writes``)."""
    record = json.loads(record_path.read_bytes())
    if record["format"] != _RECORD_FORMAT:
        return
    entries = record["entries"]
    copies = [Path(copy) for copy in record["copies"]]
    committed = os.path.lexists(record["primary"])
    with _StopSignals():
        for entry in entries:
            staged, backup, target = entry["staged"], entry["backup"], entry["target"]
            if committed and staged is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
            elif committed and os.path.lexists(staged):
                os.replace(staged, target)
            elif staged is not None:
                _remove(Path(staged))
            if backup is not None:
                _remove(Path(backup))
        for folder in sorted({Path(entry["target"]).parent for entry in entries}):
            _sync_folder(folder)
        for copy in [*copies[1:], *copies[:1]]:
            _remove(copy)
