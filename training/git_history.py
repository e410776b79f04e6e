"""Edits from a git repository's history: each commit that modifies exactly one text file.

A commit that touches one file is usually one coherent change, and its subject line says
what the change does: the subject becomes the instruction, the file at the parent commit
``before`` and the file at the commit ``after``. Merges, commits that add, delete, rename
or copy files, binary or non-UTF-8 files, symlinks, submodules and files over a size bound
are left out. Everything is read with the ``git`` command: ``git log --raw`` for the
changes, one ``git cat-file --batch`` process for the file contents.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from cad.training.datasets import DatasetError, EditExample

MAX_BYTES = 100_000
SHORT_HASH = 12
_FILE_MODES = frozenset({"100644", "100755"})
_MERGE_SUBJECT = re.compile(r"Merge (branch|branches|remote-tracking branch|pull request|tag) ")
_LOG_FORMAT = "%x1e%H%x1f%s"


@dataclass(frozen=True)
class Change:
    """A commit that modified exactly one file: the blob ids of the file before and after."""

    commit: str
    subject: str
    path: str
    old_blob: str
    new_blob: str


def _git(repo: Path, *args: str) -> bytes:
    """Run ``git -C repo args``; a failure raises ``DatasetError`` with git's first line."""
    try:
        done = subprocess.run(
            ["git", "--no-pager", "-C", str(repo), *args], capture_output=True, check=False
        )
    except OSError as exc:
        raise DatasetError(f"cannot run git ({exc.strerror or exc})") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        message = lines[0] if lines else f"git {args[0]} failed"
        raise DatasetError(f"{repo}: {message.removeprefix('fatal: ')}")
    return done.stdout


def check_repository(repo: Path) -> None:
    """Raise ``DatasetError`` unless ``repo`` is a git repository (work tree or bare)."""
    if not repo.is_dir():
        raise DatasetError(f"{repo}: no such folder")
    try:
        _git(repo, "rev-parse", "--git-dir")
    except DatasetError:
        raise DatasetError(f"{repo}: not a git repository") from None


def resolve_revision(repo: Path, rev: str) -> str:
    """The commit id ``rev`` names in ``repo``. A revision that is empty, starts with ``-``
    (git would take it for an option) or names no commit raises ``DatasetError``."""
    if not rev or rev.startswith("-") or any(char in rev for char in "\x00\n\r"):
        raise DatasetError(f"--rev {rev!r}: expected a revision (a branch, tag or commit id)")
    try:
        output = _git(
            repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
        )
    except DatasetError:
        raise DatasetError(f"{repo}: no commit {rev!r}") from None
    return output.decode("ascii").strip()


def single_file_changes(
    repo: Path, *, rev: str = "HEAD", max_commits: int | None = None
) -> Iterator[Change]:
    """The non-merge commits reachable from ``rev`` (newest first, at most ``max_commits``
    of them read) whose only change is a modification of one regular file, with a subject
    that is neither empty nor a merge message."""
    commit = resolve_revision(repo, rev)
    args = ["log", "--no-merges", "--no-renames", "--no-abbrev", "--raw", "-z", "--no-color"]
    args += ["--no-show-signature", f"--format={_LOG_FORMAT}"]
    if max_commits is not None:
        args.append(f"--max-count={max_commits}")
    output = _git(repo, *args, "--end-of-options", commit, "--")
    for record in output.split(b"\x1e")[1:]:
        header, _, raw = record.partition(b"\x00")
        commit, _, subject_bytes = header.partition(b"\x1f")
        subject = subject_bytes.decode("utf-8", "replace").strip()
        fields = raw.lstrip(b"\x00\n").split(b"\x00")[:-1]
        if len(fields) != 2 or not subject or _MERGE_SUBJECT.match(subject):
            continue
        meta, path = fields[0].decode("ascii", "replace").lstrip(":").split(), fields[1]
        if len(meta) != 5 or meta[4] != "M" or not _FILE_MODES.issuperset(meta[:2]):
            continue
        try:
            name = path.decode("utf-8")
        except UnicodeDecodeError:
            continue
        yield Change(commit.decode("ascii"), subject, name, meta[2], meta[3])


def _included(path: str, include: Sequence[str]) -> bool:
    """Whether ``path`` matches one of the globs (against the whole path or its file name;
    ``.py`` means ``*.py``); everything matches when there are none."""
    if not include:
        return True
    name = PurePosixPath(path).name
    for pattern in include:
        glob = f"*{pattern}" if pattern.startswith(".") and "*" not in pattern else pattern
        if fnmatchcase(path, glob) or fnmatchcase(name, glob):
            return True
    return False


class _Blobs:
    """Blob contents by id, through one ``git cat-file --batch`` process."""

    def __init__(self, repo: Path) -> None:
        self.process = subprocess.Popen(
            ["git", "--no-pager", "-C", str(repo), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def read(self, blob: str) -> bytes:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(blob.encode("ascii") + b"\n")
        self.process.stdin.flush()
        header = self.process.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise DatasetError(f"git cat-file: cannot read blob {blob}")
        data = self.process.stdout.read(int(header[2]) + 1)
        return data[:-1]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def _text(data: bytes, max_bytes: int) -> str | None:
    if len(data) > max_bytes or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def history_edits(
    repo: str | Path,
    *,
    rev: str = "HEAD",
    max_commits: int | None = None,
    include: Sequence[str] = (),
    max_bytes: int = MAX_BYTES,
) -> list[EditExample]:
    """Edits from the single-file commits of ``repo`` (see ``single_file_changes``), newest
    first: instruction = commit subject, ``before``/``after`` = the file at the parent and at
    the commit, id = ``<12-digit hash>:<path>``. ``include`` globs (``*.py``, ``src/*``,
    ``.js``) keep only matching paths; files over ``max_bytes``, binary or not UTF-8 are
    skipped. A folder that is not a git repository raises ``DatasetError``."""
    repo = Path(repo)
    check_repository(repo)
    changes = [
        change
        for change in single_file_changes(repo, rev=rev, max_commits=max_commits)
        if _included(change.path, include)
    ]
    edits: list[EditExample] = []
    blobs = _Blobs(repo)
    try:
        for change in changes:
            before = _text(blobs.read(change.old_blob), max_bytes)
            after = _text(blobs.read(change.new_blob), max_bytes)
            if before is None or after is None or before == after:
                continue
            identifier = f"{change.commit[:SHORT_HASH]}:{change.path}"
            edits.append(EditExample(identifier, change.subject, before, after))
    finally:
        blobs.close()
    return edits
