"""Edits from a git history: only single-file modifications, subject as instruction."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cad.resolver import apply_changes, format_multi, oracle_multi, parse_multi, resolve_multi
from cad.training import DatasetError, load_jsonl
from cad.training.datasets import MultiEditExample, load_examples
from cad.training.git_history import history_edits

ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
CLOCK = itertools.count(1_700_000_000)


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Git reads no user or system config, and never looks above the test folder."""
    for name, value in ISOLATED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo``, one second later than the previous call (so history order is
    the order commits were made in)."""
    date = f"{next(CLOCK)} +0000"
    env = {**os.environ, **ISOLATED, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str | bytes | None]) -> str:
    """Write (or, for ``None``, delete) files and commit them all; the new commit's hash."""
    for name, content in files.items():
        path = repo / name
        if content is None:
            git(repo, "rm", "-q", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        git(repo, "add", name)
    git(repo, "commit", "-q", "--allow-empty-message", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A history with every kind of commit; returns the repository and the hashes of the
    commits that must come out."""
    repo = tmp_path_factory.mktemp("history") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test Author")
    git(repo, "config", "user.email", "author@example.com")
    kept: dict[str, str] = {}
    commit(repo, "Start the shop", {"shop.py": "PRICE = 1\n", "cart.js": "let n = 0;\n"})
    kept["fix"] = commit(repo, "Raise the price", {"shop.py": "PRICE = 2\n"})
    commit(repo, "Touch two files", {"shop.py": "PRICE = 3\n", "cart.js": "let n = 1;\n"})
    commit(repo, "Add the readme", {"README.md": "# Shop\n"})
    git(repo, "checkout", "-q", "-b", "feature")
    kept["branch"] = commit(repo, "Count from one", {"cart.js": "let n = 1;\nn += 1;\n"})
    git(repo, "checkout", "-q", "main")
    kept["docs"] = commit(repo, "Describe the shop", {"README.md": "# Shop\n\nSells things.\n"})
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
    commit(repo, "Merge branch 'hotfix' into main", {"shop.py": "PRICE = 4\n"})
    commit(repo, "", {"shop.py": "PRICE = 5\n"})
    commit(repo, "Add a logo", {"logo.bin": b"\x89PNG\x00\x01"})
    commit(repo, "Redraw the logo", {"logo.bin": b"\x89PNG\x00\x02"})
    git(repo, "mv", "README.md", "ABOUT.md")
    commit(repo, "Rename the readme", {})
    commit(repo, "Drop the cart", {"cart.js": None})
    kept["last"] = commit(repo, "Round the price", {"shop.py": "PRICE = 5.0\n"})
    return repo, kept


def test_only_single_file_modifications_come_out(repo: tuple[Path, dict[str, str]]) -> None:
    path, kept = repo
    edits = history_edits(path)
    assert [(e.id, e.instruction) for e in edits] == [
        (f"{kept['last'][:12]}:shop.py", "Round the price"),
        (f"{kept['docs'][:12]}:README.md", "Describe the shop"),
        (f"{kept['branch'][:12]}:cart.js", "Count from one"),
        (f"{kept['fix'][:12]}:shop.py", "Raise the price"),
    ]
    by_subject = {e.instruction: e for e in edits}
    assert by_subject["Raise the price"].before == "PRICE = 1\n"
    assert by_subject["Raise the price"].after == "PRICE = 2\n"
    assert by_subject["Round the price"].before == "PRICE = 5\n"
    assert by_subject["Count from one"].before == "let n = 1;\n"
    assert by_subject["Count from one"].after == "let n = 1;\nn += 1;\n"


def test_include_globs_and_max_commits(repo: tuple[Path, dict[str, str]]) -> None:
    path, _ = repo
    assert [e.instruction for e in history_edits(path, include=["*.py"])] == [
        "Round the price",
        "Raise the price",
    ]
    assert [e.instruction for e in history_edits(path, include=[".js", "*.md"])] == [
        "Describe the shop",
        "Count from one",
    ]
    assert [e.instruction for e in history_edits(path, max_commits=1)] == ["Round the price"]
    assert history_edits(path, max_commits=3) == history_edits(path)[:1]


def test_size_bound_skips_large_files(repo: tuple[Path, dict[str, str]]) -> None:
    path, _ = repo
    instructions = [e.instruction for e in history_edits(path, max_bytes=12)]
    assert instructions == ["Round the price", "Raise the price"]


def test_not_a_repository_is_a_one_line_error(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    with pytest.raises(DatasetError, match=r"plain: not a git repository$"):
        history_edits(folder)
    with pytest.raises(DatasetError, match=r"missing: no such folder$"):
        history_edits(tmp_path / "missing")


def cad(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``cad`` console entry point."""
    command = [sys.executable, "-c", "from cad.server.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_cad_data_git_writes_the_edits(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, _ = repo
    out = tmp_path / "history.jsonl"
    result = cad("data", "git", str(path), "--out", str(out), "--include", "*.py")
    assert result.returncode == 0, result.stderr
    assert load_jsonl(out) == history_edits(path, include=["*.py"])
    assert result.stderr == f"wrote 2 edits of 1 file to {out}\n"


@pytest.mark.parametrize(
    ("target", "extra", "message"),
    [
        ("plain", [], "error: {folder}: not a git repository\n"),
        ("repo", ["--include", "*.rs"], "error: {folder}: no commit modifies exactly one"),
    ],
)
def test_cad_data_git_errors_are_one_line(
    target: str,
    extra: list[str],
    message: str,
    repo: tuple[Path, dict[str, str]],
    tmp_path: Path,
) -> None:
    folder = repo[0] if target == "repo" else tmp_path / target
    folder.mkdir(exist_ok=True)
    out = tmp_path / "history.jsonl"
    result = cad("data", "git", str(folder), "--out", str(out), *extra)
    assert result.returncode == 1
    assert result.stderr.startswith(message.format(folder=folder))
    assert result.stderr.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    "rev", ["--output=written-by-git", "-p", "", "--all", "HEAD\n--output=x", "no-such-branch"]
)
def test_a_revision_is_never_taken_for_an_option(
    rev: str, repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, _ = repo
    out = tmp_path / "history.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", "from cad.server.cli import main; main()", "data", "git",
         str(path), f"--rev={rev}", "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    expected = "no commit" if rev == "no-such-branch" else "expected a revision"
    assert expected in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert not (path / "written-by-git").exists()


def test_a_revision_reads_the_history_it_names(repo: tuple[Path, dict[str, str]]) -> None:
    path, kept = repo
    assert [e.instruction for e in history_edits(path, rev=kept["docs"])] == [
        "Describe the shop",
        "Raise the price",
    ]


def test_multi_file_commits_are_kept_whole_when_asked(repo: tuple[Path, dict[str, str]]) -> None:
    """Adds, deletions and renames (a deletion and an addition) count; binary files, single
    added or deleted files and merges still do not."""
    path, _ = repo
    edits = history_edits(path, max_files=2)
    multi = [e for e in edits if isinstance(e, MultiEditExample)]
    assert [(e.instruction, [(c.path, c.before, c.after) for c in e.files]) for e in multi] == [
        ("Rename the readme", [
            ("ABOUT.md", None, "# Shop\n\nSells things.\n"),
            ("README.md", "# Shop\n\nSells things.\n", None),
        ]),
        ("Touch two files", [("cart.js", "let n = 0;\n", "let n = 1;\n"),
                             ("shop.py", "PRICE = 2\n", "PRICE = 3\n")]),
        ("Start the shop", [("cart.js", None, "let n = 0;\n"), ("shop.py", None, "PRICE = 1\n")]),
    ]  # fmt: skip
    assert all(len(e.id) == 12 for e in multi)
    single = [e for e in edits if not isinstance(e, MultiEditExample)]
    assert single == history_edits(path)
    assert history_edits(path, max_files=6) == edits
    assert [e.instruction for e in history_edits(path, max_files=2, include=["*.md"])] == [
        "Rename the readme",
        "Describe the shop",
    ]
    assert history_edits(path, max_files=2, max_bytes=12) == [
        e
        for e in edits
        if e.instruction not in ("Rename the readme", "Describe the shop", "Count from one")
    ]
    for edit in multi:
        before, after = edit.before_files, edit.after_files
        program = parse_multi(format_multi(oracle_multi(before, after, granularity="subline")))
        assert apply_changes(before, resolve_multi(program, before)) == after


def test_cad_data_git_writes_multi_file_edits(
    repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, _ = repo
    out = tmp_path / "history.jsonl"
    result = cad("data", "git", str(path), "--out", str(out), "--max-files", "3")
    assert result.returncode == 0, result.stderr
    assert load_examples(out) == history_edits(path, max_files=3)
    assert result.stderr == f"wrote 7 edits (3 multi-file) of 4 files to {out}\n"
    with pytest.raises(DatasetError, match="a multi-file edit"):
        load_jsonl(out)
