"""The family registry, source file discovery, and the driver that turns files into edits."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node

from cad.training.datasets import DatasetError, EditExample, content_id
from cad.training.synthetic.constants import change_constant
from cad.training.synthetic.docstrings import add_docstring
from cad.training.synthetic.parameters import add_parameter, remove_parameter
from cad.training.synthetic.renames import rename_local
from cad.training.synthetic.scopes import JS_DECLARATIONS
from cad.training.synthetic.statements import delete_statement, wrap_try
from cad.training.synthetic.syntax import Candidate, Unit, apply_splices, parse_unit, parses

EXTENSIONS = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript"}
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv"})
MAX_LINES = 200

_PY_TOP_LEVEL = frozenset({"function_definition", "class_definition", "decorated_definition"})
_JS_TOP_LEVEL = frozenset(
    {"function_declaration", "generator_function_declaration", "class_declaration"}
)


@dataclass(frozen=True)
class Family:
    """A kind of synthetic edit: its name, what it does, an example instruction, and the
    generator of its candidate edits in a unit."""

    name: str
    summary: str
    example: str
    generate: Callable[[Unit, random.Random], Iterator[Candidate]]


@dataclass(frozen=True)
class SyntheticEdit:
    """A generated edit and the family that made it."""

    family: str
    example: EditExample


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "rename-local",
            "rename a local variable at every use in one function",
            "Rename the local variable `total` to `subtotal` in `mean`.",
            rename_local,
        ),
        Family(
            "add-parameter",
            "add a parameter with a default value to a function",
            "Add a parameter `verbose=False` to `load`.",
            add_parameter,
        ),
        Family(
            "remove-parameter",
            "remove a parameter the function body never uses",
            "Remove the unused parameter `strict` from `parse`.",
            remove_parameter,
        ),
        Family(
            "add-docstring",
            "add a docstring (Python) or JSDoc comment (JavaScript) to an undocumented function",
            'Add the docstring "Return the mean." to `mean`.',
            add_docstring,
        ),
        Family(
            "change-constant",
            "change a number or string literal that occurs once in its scope",
            "Change the constant `3` to `5` in `retry`.",
            change_constant,
        ),
        Family(
            "delete-statement",
            "delete a one-line expression statement or assignment",
            "Delete the statement `print(total)` from `mean`.",
            delete_statement,
        ),
        Family(
            "wrap-try",
            "wrap a statement of a function body in try/except (Python) or try/catch (JS)",
            "Wrap `data = json.load(handle)` in `load` in a try/except that ignores `ValueError`.",
            wrap_try,
        ),
    )
}


def choose_families(names: Sequence[str] | None) -> list[Family]:
    """The families called ``names`` (all of them for ``None`` or an empty list); an unknown
    name raises ``DatasetError`` listing the known ones."""
    if not names:
        return list(FAMILIES.values())
    unknown = [name for name in names if name not in FAMILIES]
    if unknown:
        raise DatasetError(f"unknown edit family {unknown[0]!r} (families: {', '.join(FAMILIES)})")
    return [FAMILIES[name] for name in dict.fromkeys(names)]


def source_files(paths: Iterable[Path]) -> list[Path]:
    """The Python and JavaScript files named by ``paths``: files as given, folders searched
    recursively (skipping hidden folders, ``node_modules`` and the like), each once, sorted
    per folder. A missing path or a named file of another language raises ``DatasetError``."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                parts = file.relative_to(path).parts
                if (
                    file.suffix in EXTENSIONS
                    and file.is_file()
                    and not any(p.startswith(".") or p in SKIPPED_FOLDERS for p in parts[:-1])
                ):
                    found[file] = None
        elif path.is_file():
            if path.suffix not in EXTENSIONS:
                raise DatasetError(
                    f"{path}: not a Python or JavaScript file ({', '.join(EXTENSIONS)})"
                )
            found[path] = None
        else:
            raise DatasetError(f"{path}: no such file or folder")
    return list(found)


def units(text: str, language: str, max_lines: int = MAX_LINES) -> list[Unit]:
    """The texts edits are made in: the whole file when it has at most ``max_lines`` lines,
    else each whole top-level function or class (with the comments just above it) of at
    most ``max_lines`` lines. Texts that do not parse cleanly are left out."""
    if text.count("\n") <= max_lines:
        pieces = [text]
    else:
        whole = parse_unit(text, language)
        pieces = []
        for node in whole.tree.root_node.named_children:
            if not _top_level_definition(node, language):
                continue
            first = node
            while (
                (previous := first.prev_named_sibling) is not None
                and previous.type == "comment"
                and previous.end_point.row >= first.start_point.row - 1
                and previous.start_point.column == 0
            ):
                first = previous
            start = whole.line_start(first.start_byte)
            piece = whole.source[start : whole.line_end(node.end_byte)].decode("utf-8")
            if node.end_point.row - first.start_point.row < max_lines:
                pieces.append(piece)
    return [
        parse_unit(piece, language) for piece in pieces if parses(piece, language, compiles=True)
    ]


def _top_level_definition(node: Node, language: str) -> bool:
    if language == "python":
        return node.type in _PY_TOP_LEVEL
    if node.type == "export_statement":
        return any(_top_level_definition(child, language) for child in node.named_children)
    if node.type in JS_DECLARATIONS:
        return any(
            (value := declarator.child_by_field_name("value")) is not None
            and value.type in ("arrow_function", "function_expression")
            for declarator in node.named_children
            if declarator.type == "variable_declarator"
        )
    return node.type in _JS_TOP_LEVEL


def _read(path: Path) -> str | None:
    """A source file's text; ``None`` for one that is not UTF-8 or ends lines with a lone
    CR (tree-sitter and the resolver would count its lines differently)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return None if "\r" in text.replace("\r\n", "") else text


def edit_file(
    text: str,
    language: str,
    *,
    per_file: int,
    rng: random.Random,
    families: Sequence[Family],
    max_lines: int = MAX_LINES,
) -> list[SyntheticEdit]:
    """Up to ``per_file`` valid edits of one source text, spread over the families: each
    family's candidates are shuffled and the families take turns (in shuffled order), so a
    family with many candidates cannot crowd out the others."""
    queues: list[tuple[Family, list[tuple[Unit, Candidate]]]] = []
    pieces = units(text, language, max_lines)
    for family in families:
        queue = [(unit, candidate) for unit in pieces for candidate in family.generate(unit, rng)]
        rng.shuffle(queue)
        if queue:
            queues.append((family, queue))
    rng.shuffle(queues)
    edits: list[SyntheticEdit] = []
    while queues and len(edits) < per_file:
        family, queue = queues.pop(0)
        edit = _first_valid(family, queue)
        if edit is not None:
            edits.append(edit)
        if queue:
            queues.append((family, queue))
    return edits


def _first_valid(family: Family, queue: list[tuple[Unit, Candidate]]) -> SyntheticEdit | None:
    while queue:
        unit, candidate = queue.pop()
        before = unit.source.decode("utf-8")
        after = apply_splices(unit.source, candidate.splices)
        if after != before and parses(after, unit.language, compiles=True):
            identifier = content_id(candidate.instruction, before, after)
            return SyntheticEdit(
                family.name, EditExample(identifier, candidate.instruction, before, after)
            )
    return None


def generate(
    paths: Iterable[Path],
    *,
    per_file: int = 5,
    seed: int = 0,
    families: Sequence[str] | None = None,
    max_lines: int = MAX_LINES,
) -> list[SyntheticEdit]:
    """Synthetic edits of the Python and JavaScript files under ``paths``, with the family
    of each. Deterministic: each file draws from ``random.Random`` seeded by ``seed`` and the
    file's content, so adding a file never changes the edits of the others. Files that are
    not UTF-8 or do not parse are skipped; edits with the same id are kept once."""
    if per_file < 1:
        raise ValueError("per_file must be at least 1")
    chosen = choose_families(families)
    edits: list[SyntheticEdit] = []
    seen: set[str] = set()
    for path in source_files(paths):
        text = _read(path)
        if text is None:
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        rng = random.Random(f"{seed}:{digest}")
        for edit in edit_file(
            text,
            EXTENSIONS[path.suffix],
            per_file=per_file,
            rng=rng,
            families=chosen,
            max_lines=max_lines,
        ):
            if edit.example.id not in seen:
                seen.add(edit.example.id)
                edits.append(edit)
    return edits


def synthesize(
    paths: Iterable[Path],
    *,
    per_file: int = 5,
    seed: int = 0,
    families: Sequence[str] | None = None,
    max_lines: int = MAX_LINES,
) -> list[EditExample]:
    """Synthetic warm-up edits of the files under ``paths`` (see ``generate``), as
    ``EditExample`` rows ready for ``write_jsonl``."""
    return [
        edit.example
        for edit in generate(
            paths, per_file=per_file, seed=seed, families=families, max_lines=max_lines
        )
    ]
