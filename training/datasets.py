"""Edit datasets: one JSONL schema ``{id?, instruction, before, after}`` and its loaders."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "humanevalpack"
HEVAL_INSTRUCTION = "Fix the bug in {entry_point}."


class DatasetError(ValueError):
    """A dataset file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class EditExample:
    """One edit: ``before`` becomes ``after`` as ``instruction`` asks."""

    id: str
    instruction: str
    before: str
    after: str


def content_id(instruction: str, before: str, after: str) -> str:
    """A stable id for a row without one: a hash of its content."""
    digest = hashlib.sha256("\x00".join((instruction, before, after)).encode()).hexdigest()
    return digest[:16]


def load_jsonl(path: Path) -> list[EditExample]:
    """Rows of the edit schema; ``id`` is optional (a content hash stands in)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read ({exc})") from None
    examples = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}: not JSON ({exc.msg})") from None
        fields = ("instruction", "before", "after")
        if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in fields):
            raise DatasetError(f"{path}:{number}: expected string fields {', '.join(fields)}")
        identifier = row.get("id")
        if identifier is None:
            identifier = content_id(row["instruction"], row["before"], row["after"])
        examples.append(
            EditExample(str(identifier), row["instruction"], row["before"], row["after"])
        )
    if not examples:
        raise DatasetError(f"{path}: no rows")
    return examples


def write_jsonl(path: Path, examples: Iterable[EditExample]) -> None:
    """Write rows atomically (temporary file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for example in examples:
                handle.write(json.dumps(asdict(example), ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_humanevalpack(language: str | Path) -> list[EditExample]:
    """HumanEvalPack-Fix as edits: declaration + buggy solution -> declaration + canonical
    solution, with the fixed instruction ``Fix the bug in <entry_point>.``; ``language`` is
    ``python``, ``js`` or a path to a ``humanevalpack.jsonl`` file."""
    path = Path(language) if str(language).endswith(".jsonl") else FIXTURES / f"{language}.jsonl"
    if not path.is_file():
        raise DatasetError(f"{path}: no such HumanEvalPack file (languages: python, js)")
    examples = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        examples.append(
            EditExample(
                id=row["task_id"],
                instruction=HEVAL_INSTRUCTION.format(entry_point=row["entry_point"]),
                before=row["declaration"] + row["buggy_solution"],
                after=row["declaration"] + row["canonical_solution"],
            )
        )
    return examples


def split_by_id(
    examples: list[EditExample], *, valid: float = 0.1, test: float = 0.1
) -> tuple[list[EditExample], list[EditExample], list[EditExample]]:
    """Deterministic train / validation / test split by a hash of each id."""
    parts: tuple[list[EditExample], list[EditExample], list[EditExample]] = ([], [], [])
    for example in examples:
        bucket = int(hashlib.sha256(example.id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        parts[2 if bucket < test else 1 if bucket < test + valid else 0].append(example)
    return parts
