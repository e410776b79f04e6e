"""Edit datasets: one JSONL schema ``{id?, instruction, before, after}`` and its loaders.

Every corpus (HumanEvalPack-Fix, release diffs, training data) is a list of ``EditExample``;
files hold one JSON object per line. ``id`` may be left out on input: a hash of the row's
content stands in, so the same row always gets the same id and the same split.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from cad.files import write_atomic

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


def content_id(instruction: str, before: str, after: str) -> str:
    """The id of a row that has none: 16 hex digits of a SHA-256 of its content, so it is
    stable across runs and machines."""
    digest = hashlib.sha256("\x00".join((instruction, before, after)).encode("utf-8"))
    return digest.hexdigest()[:16]


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


def load_jsonl(path: str | Path) -> list[EditExample]:
    """Read an edit file; a bad row, a duplicate id or an empty file raises ``DatasetError``
    naming ``file:line``, so a broken corpus never yields silently wrong numbers."""
    path = Path(path)
    examples: list[EditExample] = []
    seen: dict[str, int] = {}
    for number, row in json_rows(path):
        if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in FIELDS):
            raise DatasetError(f"{path}:{number}: expected string fields {', '.join(FIELDS)}")
        identifier = row.get("id")
        if identifier is None:
            identifier = content_id(row["instruction"], row["before"], row["after"])
        elif not isinstance(identifier, str) or not identifier:
            raise DatasetError(f"{path}:{number}: 'id' must be a non-empty string")
        if identifier in seen:
            raise DatasetError(
                f"{path}:{number}: duplicate id {identifier!r} (first on line {seen[identifier]})"
            )
        seen[identifier] = number
        examples.append(EditExample(identifier, row["instruction"], row["before"], row["after"]))
    if not examples:
        raise DatasetError(f"{path}: no rows")
    return examples


def write_jsonl(path: str | Path, examples: Iterable[EditExample]) -> None:
    """Write one row per example, atomically (``cad.files.write_atomic``; a missing folder
    is created). Non-ASCII text is escaped, so any line splitter reads the file back
    correctly."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps(asdict(example)) + "\n" for example in examples))


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


def select_split(
    edits: list[EditExample], split: str, valid: float = 0.1, test: float = 0.1
) -> list[EditExample]:
    """The ``split`` part (``train``, ``valid`` or ``test`` of ``split_by_id``) of ``edits``,
    or all of them for ``all``: the part ``cad train`` used, for evaluation and benchmarks."""
    if split == "all":
        return edits
    parts = dict(zip(("train", "valid", "test"), split_by_id(edits, valid, test), strict=True))
    return parts[split]


def split_by_id(
    examples: Iterable[EditExample], valid: float = 0.1, test: float = 0.1
) -> tuple[list[EditExample], list[EditExample], list[EditExample]]:
    """``(train, valid, test)`` chosen by a hash of each id: deterministic, independent of row
    order, and stable as a corpus grows (an example never moves between parts)."""
    if valid < 0 or test < 0 or valid + test > 1:
        raise ValueError("valid and test must be non-negative fractions summing to at most 1")
    train_part: list[EditExample] = []
    valid_part: list[EditExample] = []
    test_part: list[EditExample] = []
    for example in examples:
        bucket = int(hashlib.sha256(example.id.encode("utf-8")).hexdigest()[:8], 16) / 2**32
        if bucket < test:
            test_part.append(example)
        elif bucket < test + valid:
            valid_part.append(example)
        else:
            train_part.append(example)
    return train_part, valid_part, test_part
