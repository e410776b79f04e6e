"""Real-edit corpora in the edit schema: file-level diffs between consecutive PyPI sdist
releases of popular pure-Python packages, and HumanEvalPack-Fix.

    python -m bench.corpus releases --out releases.jsonl [--packages a,b] [--max-pairs N] \
        [--cache DIR]
    python -m bench.corpus heval --language python|js --out heval-py.jsonl

Sdists are downloaded once with pip and unpacked into a cache outside the repository
(``~/.cache/cad/releases`` unless ``--cache`` says otherwise); third-party code never enters
the repository. Every source file present in two consecutive releases whose text changed
becomes one edit, with id ``pkg/X->Y/path``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from rich.progress import Progress

from cad.training.datasets import EditExample, load_humanevalpack, write_jsonl

DEFAULT_CACHE = Path.home() / ".cache" / "cad" / "releases"
REPOSITORY = Path(__file__).resolve().parent.parent
# Consecutive releases (yanked ones left out), pinned so the corpus is the same on every run.
RELEASES: dict[str, tuple[str, ...]] = {
    "packaging": ("23.2", "24.0", "24.1", "24.2", "25.0"),
    "idna": ("3.7", "3.8", "3.9", "3.10"),
    "attrs": ("23.2.0", "24.1.0", "24.2.0", "24.3.0"),
    "click": ("8.1.5", "8.1.6", "8.1.7", "8.1.8"),
    "requests": ("2.31.0", "2.32.2", "2.32.3", "2.32.4"),
    "itsdangerous": ("2.1.0", "2.1.1", "2.1.2", "2.2.0"),
    "six": ("1.15.0", "1.16.0", "1.17.0"),
}
SUFFIXES = (".py",)
MAX_BYTES = 200_000
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".zip")


class CorpusError(Exception):
    """A corpus that cannot be built; reported as one line."""


def download_sdist(package: str, version: str, cache: Path) -> Path:
    """The sdist archive of ``package==version``, downloaded into ``cache`` by pip on first use."""
    folder = cache / "sdists" / package / version
    found = sorted(p for p in folder.glob("*") if p.name.endswith(ARCHIVES))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    command += ["--quiet", "--dest", str(folder), f"{package}=={version}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = sorted(p for p in folder.glob("*") if p.name.endswith(ARCHIVES))
    if done.returncode or not found:
        reason = (done.stderr.strip().splitlines() or ["no sdist downloaded"])[-1]
        raise CorpusError(f"pip download {package}=={version}: {reason}")
    return found[0]


def extract_sdist(archive: Path, destination: Path) -> Path:
    """Unpack ``archive`` into ``destination`` once (atomically, refusing paths that leave it)
    and return the source tree: the archive's single top folder, or ``destination`` itself."""
    if not destination.is_dir():
        partial = destination.with_name(f".{destination.name}.{os.getpid()}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        try:
            if archive.name.endswith(".zip"):
                with zipfile.ZipFile(archive) as bundle:
                    bundle.extractall(partial)
            else:
                with tarfile.open(archive) as bundle:
                    bundle.extractall(partial, filter="data")
            os.replace(partial, destination)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    entries = list(destination.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else destination


def read_sources(root: Path) -> dict[str, str]:
    """Source files under ``root`` by POSIX path relative to it: the suffixes in ``SUFFIXES``,
    at most ``MAX_BYTES`` bytes, valid UTF-8 without NUL bytes. Text is decoded byte for byte
    (no newline translation), so line endings survive into the corpus."""
    sources = {}
    for path in sorted(root.rglob("*")):
        if not path.name.endswith(SUFFIXES) or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if len(data) > MAX_BYTES or b"\x00" in data:
            continue
        try:
            sources[path.relative_to(root).as_posix()] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return sources


def release_pairs(
    package: str, old_version: str, new_version: str, old: dict[str, str], new: dict[str, str]
) -> list[EditExample]:
    """One edit per path present in both releases whose text differs, in path order."""
    return [
        EditExample(
            id=f"{package}/{old_version}->{new_version}/{path}",
            instruction=f"Update {path} from {package} {old_version} to {new_version}.",
            before=old[path],
            after=new[path],
        )
        for path in sorted(old.keys() & new.keys())
        if old[path] != new[path]
    ]


def check_cache(cache: Path) -> None:
    """Refuse a cache inside the repository, where third-party code could get committed."""
    if cache.resolve().is_relative_to(REPOSITORY):
        raise CorpusError(f"{cache}: the release cache must live outside {REPOSITORY}")


def build_releases(
    packages: list[str], cache: Path, max_pairs: int | None = None
) -> list[EditExample]:
    """Edits between consecutive pinned releases of ``packages``, in package then version
    order; at most ``max_pairs`` in all when given."""
    unknown = sorted(set(packages) - set(RELEASES))
    if unknown:
        raise CorpusError(f"unknown packages {', '.join(unknown)}; known: {', '.join(RELEASES)}")
    check_cache(cache)
    examples: list[EditExample] = []
    with Progress() as progress:
        task = progress.add_task("releases", total=sum(len(RELEASES[p]) for p in packages))
        for package in packages:
            previous: tuple[str, dict[str, str]] | None = None
            for version in RELEASES[package]:
                progress.update(task, description=f"{package} {version}")
                archive = download_sdist(package, version, cache)
                tree = extract_sdist(archive, cache / "trees" / package / version)
                sources = read_sources(tree)
                if previous is not None:
                    examples += release_pairs(package, previous[0], version, previous[1], sources)
                previous = (version, sources)
                progress.advance(task)
    return examples[:max_pairs] if max_pairs is not None else examples


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: build a corpus and write it as JSONL."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.corpus",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    releases = commands.add_parser("releases", help="diffs between consecutive sdist releases")
    releases.add_argument("--out", type=Path, required=True)
    releases.add_argument("--packages", default=",".join(RELEASES), help="comma-separated")
    releases.add_argument("--max-pairs", type=int, help="keep at most this many edits")
    releases.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    heval = commands.add_parser("heval", help="HumanEvalPack-Fix in the edit schema")
    heval.add_argument("--language", choices=["python", "js"], required=True)
    heval.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "releases":
            packages = [p for p in args.packages.split(",") if p]
            examples = build_releases(packages, args.cache.expanduser(), args.max_pairs)
        else:
            examples = load_humanevalpack(args.language)
    except (CorpusError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    write_jsonl(args.out, examples)
    print(f"wrote {len(examples)} edits to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
