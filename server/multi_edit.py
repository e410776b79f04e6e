"""``cad edit A B … --instr TEXT`` or ``--program PROG``: one edit of several files.

The files given to edit are numbered from 1 in the order given, then the ``--context``
files, which the program may copy from but not write. With ``--instr`` the model decodes a
multi-file program (:class:`cad.selector.MultiDecoder`); a ``--program`` is resolved as it
is, without a model. The result is delivered as ``cad edit`` delivers one file's: a diff per file (``git apply``-able, creations and deletions
included), every file written or none (``--write``), the files on stdout in a framing that
holds any bytes (``--stdout``), or one JSON object with a result per file (``--json``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cad.cli_text import cli_console, plural, writing_stdout
from cad.errors import UserError
from cad.files import read_text, write_atomic, write_files_atomic
from cad.resolver import (
    CreateFile,
    DeleteFile,
    Gen,
    MultiProgram,
    ProgramError,
    format_multi,
    parse,
    parse_multi,
    resolve_multi,
    section_header,
)
from cad.server.diffs import colored, diff_lines, diff_path
from cad.server.edit_pipeline import EditOptions, sampling_of

PROGRAM_ONLY = (
    "baseline",
    "target",
    "grammar",
    "grammar_format",
    "ignore_unsupported",
    "lines",
    "draft_config",
    "syntax",
    "schema",
)
"""Options of ``cad edit`` that mean nothing to a multi-file edit, decoded or given: each is
refused when given."""

DECODING = (
    "model",
    "device",
    "dtype",
    "adapter",
    "compile",
    "graphs",
    "subline",
    "draft_budget",
    "max_new_tokens",
    "temperature",
    "top_p",
    "seed",
)
"""Options that shape decoding: refused with a given program, which is resolved without a
model."""


def has_sections(program: str) -> bool:
    """Whether ``program`` is a multi-file program with sections (``<edit>``, ``<create>``,
    ``<delete>``) rather than a single-file one: it is not a single-file program but parses
    as a multi-file one."""
    try:
        parse(program)
    except ProgramError:
        try:
            parse_multi(program)
        except ProgramError:
            return False
        return True
    return False


@dataclass(frozen=True)
class FileResult:
    """One file a multi-file program writes: its path (as ``cad edit`` was given it, or as
    the program names a created file), the name a diff gives it (relative to the current
    folder), its text before (``None``: created) and after (``None``: deleted), and its file
    mode before (``None``: created)."""

    path: str
    name: str
    before: str | None
    after: str | None
    mode: int | None = None

    @property
    def status(self) -> str:
        """``created``, ``deleted``, ``modified`` or ``unchanged``."""
        if self.before is None:
            return "created"
        if self.after is None:
            return "deleted"
        return "modified" if self.before != self.after else "unchanged"

    @property
    def changed(self) -> bool:
        return self.status != "unchanged"


@dataclass(frozen=True)
class MultiOutcome:
    """A resolved multi-file program: the program in canonical form, a result per section
    (in section order) and the stats."""

    program: str
    files: tuple[FileResult, ...]
    stats: dict[str, Any]


def read_program(path: Path, stdin_taken: bool) -> str:
    """The program text: the file at ``path``, or stdin for ``-``."""
    if str(path) != "-":
        return read_text(path)
    if stdin_taken:
        raise UserError("--instr and --program cannot both read stdin; give one of them as a file")
    from cad.files import MAX_TEXT_BYTES

    data = sys.stdin.buffer.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise UserError("the program on stdin is over the size limit; give a shorter one")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"the program on stdin is not valid UTF-8 (byte {exc.start}); give it as UTF-8 text"
        ) from None


def refuse_options(given: set[str], *, decoding: bool) -> None:
    """Refuse the options a multi-file edit cannot use: those of ``PROGRAM_ONLY`` always,
    those of ``DECODING`` with a given program (``decoding=False``)."""
    for name in PROGRAM_ONLY:
        if name in given:
            option = "--" + name.replace("_", "-")
            raise UserError(f"{option} does not apply to an edit of several files; leave it out")
    if decoding:
        return
    for name in DECODING:
        if name in given:
            option = "--" + ("no-graphs" if name == "graphs" else name.replace("_", "-"))
            raise UserError(
                f"{option} does not apply to a multi-file program, which is applied as given "
                "without a model; leave it out"
            )


def read_files(files: list[Path], context: list[Path]) -> dict[str, str]:
    """The text of every file by path, files to edit first, then the context files; a file
    given twice (under any name) is refused."""
    seen: dict[str, Path] = {}
    texts: dict[str, str] = {}
    for path in [*files, *context]:
        real = os.path.realpath(path)
        if real in seen:
            also = "" if str(seen[real]) == str(path) else f" (also as {seen[real]})"
            raise UserError(
                f"{path}: given twice{also}; give each file once, to edit or as --context"
            )
        seen[real] = path
        texts[str(path)] = read_text(path)
    return texts


def _check_sections(program: MultiProgram, paths: list[str], editable: int) -> None:
    """Refuse a section that writes a context file, and a created path that already exists
    (it would be overwritten without being read; give it as a file to edit instead)."""
    for section in program.sections:
        header = section_header(section)
        if isinstance(section, CreateFile):
            target = Path(section.path)
            if target.exists() or target.is_symlink():
                raise UserError(
                    f"{header}: {section.path} already exists; give it as a file to edit and "
                    "write an <edit> section for it"
                )
            continue
        if editable < section.file <= len(paths):
            raise UserError(
                f"{header}: file {section.file} ({paths[section.file - 1]}) is a --context "
                "file, which the program may copy from but not change; give it as a file to "
                "edit it"
            )


def resolve_files(program_text: str, texts: dict[str, str], editable: int) -> MultiOutcome:
    """Resolve a multi-file program against the files (the first ``editable`` of them may be
    written) and describe what it writes, file by file."""
    started = time.perf_counter()
    program = parse_multi(program_text)
    _check_sections(program, list(texts), editable)
    changes = resolve_multi(program, texts)
    stats = {"mode": "program", "wall_s": time.perf_counter() - started}
    return describe(program, changes, texts, stats, "no model (the program as given)")


def describe(
    program: MultiProgram,
    changes: dict[str, str | None],
    texts: dict[str, str],
    stats: dict[str, Any],
    decoded_by: str,
) -> MultiOutcome:
    """The outcome of ``program``, whose ``changes`` to ``texts`` are known, with its ops,
    files and copied and generated characters added to ``stats``."""
    generated = sum(
        len(op.text)
        for section in program.sections
        if not isinstance(section, DeleteFile)
        for op in section.ops
        if isinstance(op, Gen)
    )
    results = tuple(
        FileResult(
            path,
            diff_path(Path(path)),
            texts.get(path),
            after,
            os.stat(path).st_mode if path in texts else None,
        )
        for path, after in changes.items()
    )
    written = sum(len(result.after) for result in results if result.after is not None)
    described = {
        **stats,
        "ops": program.op_count,
        "files": len(results),
        "copied_chars": written - generated,
        "generated_chars": generated,
        "decoded_by": decoded_by,
    }
    return MultiOutcome(format_multi(program), results, described)


def rewrite_outcome(
    texts: dict[str, str], changes: dict[str, str], stats: dict[str, Any]
) -> MultiOutcome:
    """The outcome of rewriting files (no program): what each file becomes, with the
    decode's ``stats``."""
    results = tuple(
        FileResult(path, diff_path(Path(path)), texts[path], after, os.stat(path).st_mode)
        for path, after in changes.items()
    )
    described = {**stats, "files": len(results), "decoded_by": "this process"}
    return MultiOutcome("", results, described)


def rewrite_several(
    loaded: Any,
    options: EditOptions,
    texts: dict[str, str],
    editable: int,
    report: Callable[[Any], None] | None = None,
) -> MultiOutcome:
    """Rewrite mode over several files: the model writes each file to edit in turn, drafted
    from every file (:func:`cad.selector.multi_rewrite.rewrite_files`). A file cut short by
    ``--max-new-tokens`` is refused: nothing is written."""
    from cad.selector import Cancelled, ContextTooLongError
    from cad.selector.multi_rewrite import rewrite_files

    try:
        result = rewrite_files(
            loaded,
            texts,
            options.instr,
            editable=editable,
            max_new_tokens=options.max_new_tokens,
            sampling=sampling_of(options),
            on_progress=report,
            draft_budget=options.draft_budget,
        )
    except (ContextTooLongError, Cancelled) as exc:
        raise UserError(str(exc)) from None
    if result.stats.truncated:
        raise UserError(
            f"the model spent its budget of {options.max_new_tokens:,} tokens before ending a "
            "file; nothing was written (raise --max-new-tokens)"
        )
    return rewrite_outcome(texts, result.changes, result.stats.to_dict())


def decode_files(
    loaded: Any,
    options: EditOptions,
    texts: dict[str, str],
    editable: int,
    report: Callable[[Any], None] | None = None,
) -> MultiOutcome:
    """Let ``loaded`` write a multi-file program for ``options.instr`` over the files (the
    first ``editable`` may be written) and describe what it writes. A created path that
    exists on disk, or a program cut short by ``--max-new-tokens``, is refused: nothing is
    written."""
    from cad.selector import Cancelled, ContextTooLongError, MultiDecoder

    decoder = MultiDecoder(
        loaded,
        max_new_tokens=options.max_new_tokens,
        subline=options.subline,
        sampling=sampling_of(options),
        draft_budget=options.draft_budget,
    )
    try:
        result = decoder.edit(texts, options.instr, editable=editable, on_progress=report)
    except ContextTooLongError as exc:
        raise UserError(str(exc)) from None
    except Cancelled as exc:
        raise UserError(str(exc)) from None
    if result.stats.truncated:
        if result.stats.generated_tokens < options.max_new_tokens:
            raise UserError(
                f"the model's context of {loaded.context_length:,} tokens ran out after "
                f"{result.stats.generated_tokens:,} tokens of the program; nothing was written "
                "(give fewer or smaller files, or use a longer-context model)"
            )
        raise UserError(
            f"the model spent its budget of {options.max_new_tokens:,} tokens before ending the "
            "program; nothing was written (raise --max-new-tokens)"
        )
    _check_sections(result.program, list(texts), editable)
    return describe(result.program, result.changes, texts, result.stats.to_dict(), "this process")


def file_diff(result: FileResult) -> list[str]:
    """The unified diff of one file in git's form, line by line (each with its own line
    break, CR included): a ``diff --git`` line, ``new file mode`` or ``deleted file mode``
    for a created or deleted file, ``/dev/null`` on the side that does not exist; nothing
    for an unchanged file. ``git apply`` and ``patch -p1`` take it, empty created and
    deleted files included."""
    if not result.changed:
        return []
    name = result.name
    lines = [f"diff --git a/{name} b/{name}\n"]
    if result.before is None:
        lines.append("new file mode 100644\n")
    elif result.after is None:
        executable = result.mode is not None and result.mode & 0o111
        lines.append(f"deleted file mode {'100755' if executable else '100644'}\n")
    old = f"a/{name}" if result.before is not None else "/dev/null"
    new = f"b/{name}" if result.after is not None else "/dev/null"
    return lines + diff_lines(result.before or "", result.after or "", old, new)


def frame(results: tuple[FileResult, ...]) -> bytes:
    """The files on stdout (``--stdout``), in section order: per file a header line, then
    for a written file exactly its new bytes.

    ``==> "PATH" N bytes`` followed by the file's N bytes of UTF-8 (no separator after
    them: the next header starts right after the last byte), or ``==> "PATH" deleted``.
    PATH is a JSON string (ASCII, escapes for anything else), so the header is one line
    whatever the path holds, and N says where the file ends whatever bytes it holds."""
    out = bytearray()
    for result in results:
        path = json.dumps(result.name)
        if result.after is None:
            out += f"==> {path} deleted\n".encode("ascii")
            continue
        data = result.after.encode("utf-8")
        out += f"==> {path} {len(data)} bytes\n".encode("ascii")
        out += data
    return bytes(out)


def write_results(results: tuple[FileResult, ...]) -> tuple[int, int, int]:
    """Write every changed file, create the created ones, delete the deleted ones: all or
    none. Returns how many files were written, created and deleted."""
    changes: dict[Path, str | None] = {
        Path(result.path): result.after for result in results if result.changed
    }
    if len(changes) == 1 and next(iter(changes.values())) is not None:
        path, text = next(iter(changes.items()))
        assert text is not None
        write_atomic(path, text)
    elif changes:
        write_files_atomic(changes)
    created = sum(result.status == "created" for result in results)
    deleted = sum(result.status == "deleted" for result in results)
    written = sum(result.status == "modified" for result in results)
    return written, created, deleted


def deliver_multi(
    outcome: MultiOutcome,
    *,
    write: bool,
    stdout: bool,
    as_json: bool,
    stats_json: Path | None,
) -> None:
    """Deliver a multi-file edit: write the stats, then the files (all or none), the files
    on stdout, one JSON object, or a diff per file (the default)."""
    stats = outcome.stats
    if stats_json is not None:
        write_atomic(stats_json, json.dumps(stats, indent=2) + "\n")
    if write:
        written, created, deleted = write_results(outcome.files)
        steps = (
            plural(int(stats["ops"]), "op")
            if stats.get("mode") == "program"
            else plural(int(stats["forwards"]), "forward")
        )
        print(
            f"wrote {plural(written, 'file')}, created {created}, deleted {deleted} "
            f"({steps}, {float(stats['wall_s']):.2f}s)",
            file=sys.stderr,
        )
    elif stdout:
        with writing_stdout():
            sys.stdout.buffer.write(frame(outcome.files))
    elif as_json:
        files = [
            {
                "file": result.name,
                "status": result.status,
                "changed": result.changed,
                "text": result.after,
                "diff": "".join(file_diff(result)),
            }
            for result in outcome.files
        ]
        body = {
            "changed": any(result.changed for result in outcome.files),
            "files": files,
            "program": outcome.program,
            "stats": stats,
        }
        with writing_stdout():
            sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
    else:
        lines = [line for result in outcome.files for line in file_diff(result)]
        with writing_stdout():
            if sys.stdout.isatty():
                cli_console().print(colored(lines), end="")
            else:
                sys.stdout.buffer.write("".join(lines).encode("utf-8"))
