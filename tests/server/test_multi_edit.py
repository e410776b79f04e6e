"""``cad edit A B … --program PROG``: a multi-file program through the command line, no model."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cad.files import finish_stopped_file_writes
from cad.resolver import apply_changes, parse_multi, resolve_multi
from cad.server.multi_edit import FileResult, frame

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
FILES = {
    "app.py": "import os\n\ndef helper(x):\n    return x + 1\n\ndef main():\n    return helper(2)\n",
    "util.py": "X = 1\r\nY = 2",  # CRLF, no line break at the end
    "old.py": "gone\n",
    "ctx.py": "CTX = '😀 ==> \"x\" 3 bytes'\n",
}
PROGRAM = """<edit file="1">
<copy lines="1-2"/>
<gen>from util import helper
</gen>
<copy lines="5-7"/>
</edit>
<edit file="2">
<copy lines="1-1"/>
<copy file="1" lines="2-4"/>
<copy file="4" lines="1-1"/>
</edit>
<create path="pkg/helpers.py">
<copy file="1" lines="3-4"/>
</create>
<create path="empty.py">
</create>
<delete file="3"/>
</program>
"""
EDITED = ["app.py", "util.py", "old.py"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).write_bytes(text.encode())
    (tmp_path / "pkg").mkdir()
    (tmp_path / "edit.program").write_text(PROGRAM)
    return tmp_path


def cad(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CAD, *args], capture_output=True, cwd=cwd, input=stdin, timeout=120)


def expected() -> dict[str, str]:
    """Every file after the program (context file included)."""
    changes = resolve_multi(
        parse_multi(PROGRAM), [(name, FILES[name]) for name in [*EDITED, "ctx.py"]]
    )
    return apply_changes(FILES, changes)


def on_disk(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes().decode()
        for path in sorted(folder.rglob("*.py"))
        if ".git" not in path.parts
    }


def edit(*extra: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return cad(
        "edit",
        *EDITED,
        "--context",
        "ctx.py",
        "--program",
        "edit.program",
        *extra,
        cwd=cwd,
        stdin=stdin,
    )


def test_write_writes_every_file_creates_and_deletes(workspace: Path) -> None:
    result = edit("--write", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert on_disk(workspace) == expected()
    assert not (workspace / "old.py").exists()
    assert (workspace / "empty.py").read_bytes() == b""
    assert result.stderr.decode().startswith("wrote 2 files, created 2, deleted 1 (")
    assert [p.name for p in workspace.iterdir() if p.name.startswith(".")] == []


def test_the_diff_applies_with_git_apply_and_patch(workspace: Path, tmp_path_factory) -> None:
    result = edit(cwd=workspace)
    assert result.returncode == 0, result.stderr
    diff = result.stdout.decode()
    assert "--- /dev/null\n+++ b/pkg/helpers.py\n" in diff
    assert "--- a/old.py\n+++ /dev/null\n" in diff
    assert "diff --git a/empty.py b/empty.py\nnew file mode 100644\n" in diff
    assert "ctx.py" not in diff.split("+CTX")[0]  # the context file is not changed
    assert on_disk(workspace) == FILES  # a diff writes nothing
    for tool in ("git", "patch"):
        if shutil.which(tool) is None:
            continue
        copy = tmp_path_factory.mktemp(tool)
        for name, text in FILES.items():
            (copy / name).write_bytes(text.encode())
        (copy / "pkg").mkdir()
        command = ["git", "apply", "-"] if tool == "git" else ["patch", "-p1", "-s"]
        if tool == "git":
            subprocess.run(["git", "init", "-q", "."], cwd=copy, check=True)
        applied = subprocess.run(command, input=result.stdout, cwd=copy, capture_output=True)
        assert applied.returncode == 0, (tool, applied.stderr)
        after = expected()
        if tool == "patch":  # patch leaves an empty created file out only on old versions
            after = {name: text for name, text in after.items() if text or (copy / name).exists()}
        assert on_disk(copy) == after, tool


def test_files_under_a_folder_are_named_relative_to_the_current_one(workspace: Path) -> None:
    sub = workspace / "sub"
    sub.mkdir()
    (sub / "a.py").write_text("A = 1\n")
    program = '<edit file="1">\n<gen>A = 2\n</gen>\n</edit>\n<edit file="2">\n<copy file="1" lines="1-1"/>\n</edit>\n</program>\n'
    result = cad(
        "edit",
        "sub/a.py",
        str(workspace / "ctx.py"),
        "--program",
        "-",
        cwd=workspace,
        stdin=program.encode(),
    )
    assert result.returncode == 0, result.stderr
    diff = result.stdout.decode()
    assert "--- a/sub/a.py\n+++ b/sub/a.py\n" in diff
    assert "--- a/ctx.py\n+++ b/ctx.py\n" in diff


def test_stdout_frames_every_file_with_its_byte_length(workspace: Path) -> None:
    result = edit("--stdout", cwd=workspace)
    assert result.returncode == 0, result.stderr
    output, files = result.stdout, {}
    while output:
        header, output = output.split(b"\n", 1)
        assert header.startswith(b"==> ")
        line = header[4:].decode("ascii")
        path, end = json.JSONDecoder().raw_decode(line)
        rest = line[end:]
        if rest == " deleted":
            files[path] = None
            continue
        size = int(rest.removesuffix(" bytes"))
        files[path], output = output[:size].decode(), output[size:]
    changes = resolve_multi(
        parse_multi(PROGRAM), [(name, FILES[name]) for name in [*EDITED, "ctx.py"]]
    )
    assert files == changes
    assert list(files) == ["app.py", "util.py", "pkg/helpers.py", "empty.py", "old.py"]


def test_the_framing_holds_any_bytes() -> None:
    tricky = '==> "a" 3 bytes\n\r\n\u2028😀 no line break'
    results = (
        FileResult("a\nb.py", "a\nb.py", "x", tricky),
        FileResult("c.py", "c.py", "x", None),
    )
    framed = frame(results)
    header = f'==> "a\\nb.py" {len(tricky.encode())} bytes\n'.encode()
    assert framed == header + tricky.encode() + b'==> "c.py" deleted\n'


def test_json_gives_a_result_per_file(workspace: Path) -> None:
    result = edit("--json", cwd=workspace)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["changed"] is True and body["program"] == PROGRAM.rstrip("\n")
    statuses = [(item["file"], item["status"]) for item in body["files"]]
    assert statuses == [
        ("app.py", "modified"),
        ("util.py", "modified"),
        ("pkg/helpers.py", "created"),
        ("empty.py", "created"),
        ("old.py", "deleted"),
    ]
    after = expected()
    for item in body["files"]:
        assert item["text"] == after.get(item["file"])
        assert item["diff"].startswith(f"diff --git a/{item['file']} b/{item['file']}\n")
    assert body["stats"]["ops"] == parse_multi(PROGRAM).op_count


def test_one_file_with_a_program_that_creates_a_file(workspace: Path) -> None:
    program = '<create path="copy.py">\n<copy file="1" lines="1-1"/>\n</create>\n</program>\n'
    (workspace / "create.program").write_text(program)
    result = cad("edit", "ctx.py", "--program", "create.program", "--write", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert (workspace / "copy.py").read_text() == FILES["ctx.py"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["app.py", "util.py", "--program", "edit.program", "--mode", "rewrite"], "--mode rewrite writes files without a program"),
        (["app.py", "--context", "ctx.py", "--instr", " "], "the instruction is empty"),
        (["app.py", "util.py", "--instr", "x", "--syntax", "python"], "--syntax does not apply to an edit of several files"),
        (["app.py", "app.py", "--program", "edit.program"], "app.py: given twice;"),
        (["app.py", "--context", "pkg/../app.py", "--program", "edit.program"], "pkg/../app.py: given twice (also as app.py)"),
        (["app.py", "util.py", "--program", "edit.program", "--temperature", "0.5"], "--temperature does not apply"),
        (["app.py", "util.py", "--program", "edit.program", "--lines", "1-2"], "--lines does not apply"),
        (["app.py", "util.py", "--program", "edit.program", "--write", "--json"], "choose one of"),
        (["app.py", "util.py", "--program", "edit.program"], "expected a file from 1 to 2"),
        (["app.py", "util.py", "--context", "old.py", "--context", "ctx.py", "--program", "edit.program"], "is a --context file"),
        (["app.py", "util.py", "old.py", "--context", "ctx.py", "--program", "missing.program"], "missing.program: no such file"),
        (["app.py", "util.py", "--program", "-", "--instr", "-"], "cannot both read stdin"),
        (["app.py", "nothing.py", "--program", "edit.program"], "nothing.py: no such file"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_writes_nothing(
    workspace: Path, args: list[str], message: str
) -> None:
    result = cad("edit", *args, cwd=workspace)
    assert result.returncode != 0
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith("error: ") and message in line, line
    assert on_disk(workspace) == FILES


def test_a_created_path_that_exists_is_refused(workspace: Path) -> None:
    program = '<create path="ctx.py">\n</create>\n</program>\n'
    result = cad(
        "edit",
        "app.py",
        "util.py",
        "--program",
        "-",
        "--write",
        cwd=workspace,
        stdin=program.encode(),
    )
    assert result.returncode == 1
    assert "ctx.py already exists; give it as a file to edit" in result.stderr.decode()
    assert on_disk(workspace) == FILES


def test_a_write_that_cannot_finish_writes_nothing(workspace: Path) -> None:
    program = PROGRAM.replace("pkg/helpers.py", "nowhere/helpers.py")
    result = cad(
        "edit",
        *EDITED,
        "--context",
        "ctx.py",
        "--program",
        "-",
        "--write",
        cwd=workspace,
        stdin=program.encode(),
    )
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert "does not exist; nothing was written" in line
    assert on_disk(workspace) == FILES


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_write_stopped_at_any_moment_leaves_every_file_old_or_new(tmp_path: Path, how) -> None:
    """``cad edit A B --write`` stopped at spread-out moments: after SIGTERM every file is
    old or every file is new; after SIGKILL the same holds once the next multi-file write in
    the folder (here ``finish_stopped_file_writes``) has finished or undone what it left."""
    old = {"a.py": "".join(f"a{n} = {n}\n" for n in range(120_000)), "b.py": "b = 0\n" * 200_000}
    program = (
        '<edit file="1">\n<gen>first = 1\n</gen>\n<copy file="2" lines="1-200000"/>\n</edit>\n'
        '<edit file="2">\n<copy file="1" lines="1-120000"/>\n</edit>\n'
        '<create path="c.py">\n<copy file="1" lines="1-1000"/>\n</create>\n</program>\n'
    )
    new = apply_changes(old, resolve_multi(parse_multi(program), old))
    (tmp_path / "edit.program").write_text(program)
    rng = random.Random(how)
    seen = set()
    for _ in range(8):
        for name, text in old.items():
            (tmp_path / name).write_text(text)
        (tmp_path / "c.py").unlink(missing_ok=True)
        started = time.monotonic()
        process = subprocess.Popen(
            [*CAD, "edit", "a.py", "b.py", "--program", "edit.program", "--write"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 1.5))
        process.send_signal(how)
        process.wait(timeout=60)
        if how == signal.SIGKILL:
            finish_stopped_file_writes(tmp_path)
        state = {
            name: (tmp_path / name).read_text()
            for name in ("a.py", "b.py", "c.py")
            if (tmp_path / name).exists()
        }
        assert state in (old, new), f"{time.monotonic() - started:.2f}s: a mix of old and new files"
        seen.add("new" if state == new else "old")
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert seen  # which of the two depends on the machine's speed
