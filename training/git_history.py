"""Edits from a git repository's history: each commit that modifies exactly one text file,
and, when asked, each commit that changes a few text files together.

A commit that touches one file is usually one coherent change, and its subject line says
what the change does: the subject becomes the instruction, the file at the parent commit
``before`` and the file at the commit ``after``. Merges, commits that add, delete, rename
or copy files, binary or non-UTF-8 files, symlinks, submodules and files over a size bound
are left out. With ``max_files`` above 1, a commit that changes from 2 to ``max_files``
text files (modified, added or deleted; a rename is a deletion and an addition) becomes a
multi-file edit of all of them. Everything is read with the ``git`` command: ``git log
--raw`` for the changes, one ``git cat-file --batch`` process for the file contents.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from cad.training.datasets import DatasetError, EditExample, FileChange, MultiEditExample

MAX_BYTES = 100_000
SHORT_HASH = 12
_FILE_MODES = frozenset({"100644", "100755"})
_MERGE_SUBJECT = re.compile(r"Merge (branch|branches|remote-tracking branch|pull request|tag) ")
_LOG_FORMAT = "%x1e%H%x1f%s"


@dataclass(frozen=True)
class FileDiff:
    """One file a commit changes: its path, how (``M``odified, ``A``dded, ``D``eleted, or
    another ``git log --raw`` status), its modes and its blob ids before and after (an
    absent side has mode ``000000``)."""

    path: str
    status: str
    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str

    @property
    def regular(self) -> bool:
        """Whether the file is a regular file on each side it exists on, modified, added
        or deleted (not a symlink, a submodule or a type change)."""
        if self.status == "M":
            return _FILE_MODES.issuperset((self.old_mode, self.new_mode))
        if self.status == "A":
            return self.new_mode in _FILE_MODES
        if self.status == "D":
            return self.old_mode in _FILE_MODES
        return False


@dataclass(frozen=True)
class Commit:
    """A non-merge commit with a subject: its id and the files it changes."""

    commit: str
    subject: str
    files: tuple[FileDiff, ...]


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


def commits(repo: Path, *, rev: str = "HEAD", max_commits: int | None = None) -> Iterator[Commit]:
    """The non-merge commits reachable from ``rev`` (newest first, at most ``max_commits``
    of them read) whose subject is neither empty nor a merge message, with the files each
    changes (renames and copies count as deletions and additions; paths that are not UTF-8
    leave the commit out)."""
    commit = resolve_revision(repo, rev)
    args = ["log", "--no-merges", "--no-renames", "--no-abbrev", "--raw", "-z", "--no-color"]
    args += ["--no-show-signature", f"--format={_LOG_FORMAT}"]
    if max_commits is not None:
        args.append(f"--max-count={max_commits}")
    output = _git(repo, *args, "--end-of-options", commit, "--")
    for record in output.split(b"\x1e")[1:]:
        header, _, raw = record.partition(b"\x00")
        commit_id, _, subject_bytes = header.partition(b"\x1f")
        subject = subject_bytes.decode("utf-8", "replace").strip()
        if not subject or _MERGE_SUBJECT.match(subject):
            continue
        fields = raw.lstrip(b"\x00\n").split(b"\x00")[:-1]
        files = _file_diffs(fields)
        if files is not None:
            yield Commit(commit_id.decode("ascii"), subject, files)


def _file_diffs(fields: list[bytes]) -> tuple[FileDiff, ...] | None:
    """The files of one commit's ``--raw -z`` fields (a meta field, then a path, per file);
    ``None`` when one is malformed or its path is not UTF-8."""
    if len(fields) % 2:
        return None
    files = []
    for meta_bytes, path in zip(fields[::2], fields[1::2], strict=True):
        meta = meta_bytes.decode("ascii", "replace").lstrip(":").split()
        if len(meta) != 5:
            return None
        try:
            name = path.decode("utf-8")
        except UnicodeDecodeError:
            return None
        files.append(FileDiff(name, meta[4], meta[0], meta[1], meta[2], meta[3]))
    return tuple(files)


def single_file_changes(
    repo: Path, *, rev: str = "HEAD", max_commits: int | None = None
) -> Iterator[Change]:
    """The non-merge commits reachable from ``rev`` (newest first, at most ``max_commits``
    of them read) whose only change is a modification of one regular file, with a subject
    that is neither empty nor a merge message."""
    for commit in commits(repo, rev=rev, max_commits=max_commits):
        if len(commit.files) != 1:
            continue
        (diff,) = commit.files
        if diff.status == "M" and diff.regular:
            yield Change(commit.commit, commit.subject, diff.path, diff.old_blob, diff.new_blob)


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


def _file_change(blobs: _Blobs, diff: FileDiff, max_bytes: int) -> FileChange | None:
    """One file of a multi-file edit, or ``None`` when a side is binary, not UTF-8 or over
    ``max_bytes``."""
    texts: list[str | None] = []
    for blob, present in ((diff.old_blob, diff.status != "A"), (diff.new_blob, diff.status != "D")):
        if not present:
            texts.append(None)
            continue
        text = _text(blobs.read(blob), max_bytes)
        if text is None:
            return None
        texts.append(text)
    return FileChange(diff.path, texts[0], texts[1])


def _multi_edit(blobs: _Blobs, commit: Commit, max_bytes: int) -> MultiEditExample | None:
    """The multi-file edit of a commit whose files all qualify, or ``None``."""
    changes = []
    for diff in commit.files:
        change = _file_change(blobs, diff, max_bytes)
        if change is None:
            return None
        changes.append(change)
    if all(change.before == change.after for change in changes):
        return None
    return MultiEditExample(commit.commit[:SHORT_HASH], commit.subject, tuple(changes))


def _shape_kept(commit: Commit, max_files: int, include: Sequence[str]) -> bool:
    """Whether a commit's files, before their contents are read, make an edit: one
    modified regular file, or 2 to ``max_files`` regular files modified, added or deleted;
    every path matching ``include``."""
    files = commit.files
    if not 1 <= len(files) <= max_files or not all(_included(f.path, include) for f in files):
        return False
    if len(files) == 1:
        return files[0].status == "M" and files[0].regular
    return all(diff.regular for diff in files)


def history_edits(
    repo: str | Path,
    *,
    rev: str = "HEAD",
    max_commits: int | None = None,
    include: Sequence[str] = (),
    max_bytes: int = MAX_BYTES,
    max_files: int = 1,
) -> list[EditExample | MultiEditExample]:
    """Edits from the commits of ``repo``, newest first: every single-file modification
    (see ``single_file_changes``; instruction = commit subject, ``before``/``after`` = the
    file at the parent and at the commit, id = ``<12-digit hash>:<path>``), and with
    ``max_files`` above 1 every commit that changes 2 to ``max_files`` files, each a
    regular text file modified, added or deleted (a ``MultiEditExample``, id = the
    12-digit hash). ``include`` globs (``*.py``, ``src/*``, ``.js``) must match every file
    a kept commit touches; files over ``max_bytes``, binary or not UTF-8 leave their commit
    out. A folder that is not a git repository raises ``DatasetError``."""
    if max_files < 1:
        raise DatasetError(f"max_files must be at least 1, not {max_files}")
    repo = Path(repo)
    check_repository(repo)
    kept = [
        commit
        for commit in commits(repo, rev=rev, max_commits=max_commits)
        if _shape_kept(commit, max_files, include)
    ]
    edits: list[EditExample | MultiEditExample] = []
    blobs = _Blobs(repo)
    try:
        for commit in kept:
            if len(commit.files) > 1:
                multi = _multi_edit(blobs, commit, max_bytes)
                if multi is not None:
                    edits.append(multi)
                continue
            (diff,) = commit.files
            before = _text(blobs.read(diff.old_blob), max_bytes)
            after = _text(blobs.read(diff.new_blob), max_bytes)
            if before is None or after is None or before == after:
                continue
            identifier = f"{commit.commit[:SHORT_HASH]}:{diff.path}"
            edits.append(EditExample(identifier, commit.subject, before, after))
    finally:
        blobs.close()
    return edits
