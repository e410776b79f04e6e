"""Edit datasets: one JSONL schema ``{id?, instruction, before, after}`` and its loaders.

Every corpus (HumanEvalPack-Fix, release diffs, training data) is a list of ``EditExample``;
files hold one JSON object per line. ``id`` may be left out on input: a hash of the row's
content stands in, so the same row always gets the same id and the same split.

An edit of several files is a ``MultiEditExample``: its row has ``files``, a list of
``{path, before, after}`` (``before`` null for a created file, ``after`` null for a deleted
one), in place of ``before`` and ``after``. ``load_examples`` reads both kinds; ``load_jsonl``
keeps reading single-file edits only, and names a multi-file row it meets.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol, TypeVar

from cad.files import write_atomic
from cad.resolver import path_problem

HUMANEVALPACK = resources.files("cad.training").joinpath("data", "humanevalpack")
"""The HumanEvalPack-Fix copies shipped in the package (``data/PROVENANCE.md`` says where
they come from)."""
HUMANEVALPACK_LANGUAGES = ("python", "js")
HEVAL_INSTRUCTION = "Fix the bug in {entry_point}."
FIELDS = ("instruction", "before", "after")
BUILTIN_DATA = {"heval-python": "python", "heval-js": "js"}


class DatasetError(ValueError):
    """A dataset file that cannot be read; the message is one line naming the file (and line)."""


@dataclass(frozen=True)
class EditExample:
    """One edit: ``before`` becomes ``after`` as ``instruction`` asks."""

    id: str
    instruction: str
    before: str
    after: str


@dataclass(frozen=True)
class FileChange:
    """One file of a multi-file edit: its relative path, and its text before and after
    (``None``: the file does not exist then; the same text: a file the edit only reads)."""

    path: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class MultiEditExample:
    """One edit of several files: ``files`` change as ``instruction`` asks."""

    id: str
    instruction: str
    files: tuple[FileChange, ...]

    @property
    def before_files(self) -> dict[str, str]:
        """The files before the edit, by path (file ``k`` of a program is the k-th)."""
        return {f.path: f.before for f in self.files if f.before is not None}

    @property
    def after_files(self) -> dict[str, str]:
        """The files after the edit, by path."""
        return {f.path: f.after for f in self.files if f.after is not None}


AnyExample = EditExample | MultiEditExample


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


Identified = TypeVar("Identified", bound=_Identified)


def as_multi(example: AnyExample, path: str = "document") -> MultiEditExample:
    """A single-file edit as the multi-file edit of one file at ``path`` (a multi-file edit
    as it is)."""
    if isinstance(example, MultiEditExample):
        return example
    change = FileChange(path, example.before, example.after)
    return MultiEditExample(example.id, example.instruction, (change,))


def content_id(instruction: str, before: str, after: str) -> str:
    """The id of a row that has none: 16 hex digits of a SHA-256 of its content, so it is
    stable across runs and machines."""
    digest = hashlib.sha256("\x00".join((instruction, before, after)).encode("utf-8"))
    return digest.hexdigest()[:16]


def files_content_id(instruction: str, files: Iterable[FileChange]) -> str:
    """The id of a multi-file row that has none, as ``content_id`` makes one."""
    encoded = json.dumps([instruction, [asdict(change) for change in files]])
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()[:16]


def parse_file_changes(value: object, where: str) -> tuple[FileChange, ...]:
    """The ``files`` of a multi-file row; anything else raises ``DatasetError`` naming
    ``where`` (``file:line``): a non-empty list of objects with a relative ``path`` no
    other entry has and ``before``/``after`` that are strings or null, not both null."""
    if not isinstance(value, list) or not value:
        raise DatasetError(f"{where}: 'files' must be a non-empty list")
    changes: list[FileChange] = []
    for number, entry in enumerate(value, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise DatasetError(f"{where}: file {number} must be an object with a string 'path'")
        texts = [entry.get(key) for key in ("before", "after")]
        if not all(text is None or isinstance(text, str) for text in texts) or texts == [
            None,
            None,
        ]:
            raise DatasetError(
                f"{where}: file {number} needs 'before' and 'after' that are strings or null, "
                "not both null"
            )
        if (problem := path_problem(entry["path"])) is not None:
            raise DatasetError(f"{where}: file {number}: {problem} is not a relative path")
        changes.append(FileChange(entry["path"], texts[0], texts[1]))
    if len({change.path for change in changes}) != len(changes):
        raise DatasetError(f"{where}: two files have the same path")
    return tuple(changes)


def json_rows(path: Path) -> Iterable[tuple[int, object]]:
    """``(line number, decoded value)`` for each non-blank line of a JSONL file.

    Lines are split on ``\\n`` only (not on the Unicode separators ``str.splitlines`` also
    honours), so raw U+2028 or U+0085 inside a JSON string cannot break a row."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            yield number, json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}:{number}: not UTF-8 (byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}: not JSON ({exc.msg})") from None


def _row_example(row: object, where: str, *, multi: bool) -> AnyExample:
    """The example one decoded row holds (a multi-file one only when ``multi``)."""
    if isinstance(row, dict) and "files" in row and "before" not in row:
        if not multi:
            raise DatasetError(
                f"{where}: a multi-file edit ('files'); expected a single-file edit with string "
                f"fields {', '.join(FIELDS)}"
            )
        if not isinstance(row.get("instruction"), str):
            raise DatasetError(f"{where}: expected a string field instruction")
        files = parse_file_changes(row["files"], where)
        identifier = row.get("id")
        if identifier is None:
            identifier = files_content_id(row["instruction"], files)
        elif not isinstance(identifier, str) or not identifier:
            raise DatasetError(f"{where}: 'id' must be a non-empty string")
        return MultiEditExample(identifier, row["instruction"], files)
    if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in FIELDS):
        raise DatasetError(f"{where}: expected string fields {', '.join(FIELDS)}")
    identifier = row.get("id")
    if identifier is None:
        identifier = content_id(row["instruction"], row["before"], row["after"])
    elif not isinstance(identifier, str) or not identifier:
        raise DatasetError(f"{where}: 'id' must be a non-empty string")
    return EditExample(identifier, row["instruction"], row["before"], row["after"])


def _load(path: Path, *, multi: bool) -> list[AnyExample]:
    examples: list[AnyExample] = []
    seen: dict[str, int] = {}
    for number, row in json_rows(path):
        example = _row_example(row, f"{path}:{number}", multi=multi)
        if example.id in seen:
            raise DatasetError(
                f"{path}:{number}: duplicate id {example.id!r} (first on line {seen[example.id]})"
            )
        seen[example.id] = number
        examples.append(example)
    if not examples:
        raise DatasetError(f"{path}: no rows")
    return examples


def load_jsonl(path: str | Path) -> list[EditExample]:
    """Read a file of single-file edits; a bad row, a multi-file row, a duplicate id or an
    empty file raises ``DatasetError`` naming ``file:line``, so a broken corpus never yields
    silently wrong numbers."""
    return _load(Path(path), multi=False)  # type: ignore[return-value]


def load_examples(path: str | Path) -> list[AnyExample]:
    """Read a file of single-file and multi-file edits, checked as ``load_jsonl`` checks
    them (ids are unique across both kinds)."""
    return _load(Path(path), multi=True)


def example_row(example: AnyExample) -> dict[str, object]:
    """The JSON object of one example, in the schema above."""
    return asdict(example)


def write_jsonl(path: str | Path, examples: Iterable[AnyExample]) -> None:
    """Write one row per example (single-file or multi-file), atomically
    (``cad.files.write_atomic``; a missing folder is created). Non-ASCII text is escaped,
    so any line splitter reads the file back correctly."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps(example_row(e)) + "\n" for e in examples))


def load_humanevalpack(path_or_language: str | Path) -> list[EditExample]:
    """HumanEvalPack-Fix as edits: ``declaration + buggy_solution`` becomes ``declaration +
    canonical_solution``, id = ``task_id``, instruction ``Fix the bug in <entry_point>.``.

    ``path_or_language`` is ``python`` or ``js`` (the copies shipped in the package) or the
    path of a ``humanevalpack.jsonl`` file of the same format."""
    if str(path_or_language) in HUMANEVALPACK_LANGUAGES:
        path = Path(str(HUMANEVALPACK.joinpath(f"{path_or_language}.jsonl")))
    else:
        path = Path(path_or_language)
    if not path.is_file():
        raise DatasetError(
            f"{path}: no such HumanEvalPack file (languages: {', '.join(HUMANEVALPACK_LANGUAGES)})"
        )
    keys = ("task_id", "entry_point", "declaration", "buggy_solution", "canonical_solution")
    examples = []
    for number, row in json_rows(path):
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in keys):
            raise DatasetError(f"{path}:{number}: expected string fields {', '.join(keys)}")
        examples.append(
            EditExample(
                id=row["task_id"],
                instruction=HEVAL_INSTRUCTION.format(entry_point=row["entry_point"]),
                before=row["declaration"] + row["buggy_solution"],
                after=row["declaration"] + row["canonical_solution"],
            )
        )
    return examples


def load_edits(data: str | Path) -> list[EditExample]:
    """``heval-python`` / ``heval-js`` (the HumanEvalPack-Fix copies) or a JSONL edit file:
    what ``--data`` names in ``cad train``, ``cad eval`` and ``cad calibrate``."""
    if str(data) in BUILTIN_DATA:
        return load_humanevalpack(BUILTIN_DATA[str(data)])
    return load_jsonl(data)


def load_any_edits(data: str | Path) -> list[AnyExample]:
    """As :func:`load_edits`, but a JSONL file may also hold multi-file edits: what ``cad
    train`` and ``cad eval`` read."""
    if str(data) in BUILTIN_DATA:
        return list(load_humanevalpack(BUILTIN_DATA[str(data)]))
    return load_examples(data)


def select_split(
    edits: list[Identified], split: str, valid: float = 0.1, test: float = 0.1
) -> list[Identified]:
    """The ``split`` part (``train``, ``valid`` or ``test`` of ``split_by_id``) of ``edits``,
    or all of them for ``all``: the part ``cad train`` used, for evaluation and benchmarks."""
    if split == "all":
        return edits
    parts = dict(zip(("train", "valid", "test"), split_by_id(edits, valid, test), strict=True))
    return parts[split]


def split_by_id(
    examples: Iterable[Identified], valid: float = 0.1, test: float = 0.1
) -> tuple[list[Identified], list[Identified], list[Identified]]:
    """``(train, valid, test)`` chosen by a hash of each id: deterministic, independent of row
    order, and stable as a corpus grows (an example never moves between parts). Any example
    with an ``id`` (single-file or multi-file) can be split."""
    if valid < 0 or test < 0 or valid + test > 1:
        raise ValueError("valid and test must be non-negative fractions summing to at most 1")
    train_part: list[Identified] = []
    valid_part: list[Identified] = []
    test_part: list[Identified] = []
    for example in examples:
        bucket = int(hashlib.sha256(example.id.encode("utf-8")).hexdigest()[:8], 16) / 2**32
        if bucket < test:
            test_part.append(example)
        elif bucket < test + valid:
            valid_part.append(example)
        else:
            train_part.append(example)
    return train_part, valid_part, test_part
