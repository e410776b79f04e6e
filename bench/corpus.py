"""Real-edit corpora: file-level diffs between consecutive PyPI sdist releases, and
HumanEvalPack-Fix, written in the edit schema.

    python -m bench.corpus releases --out releases.jsonl [--packages a,b] [--cache DIR]
    python -m bench.corpus heval --language python --out heval-py.jsonl

Sdists are downloaded with pip into a cache outside the repository and never committed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from rich.progress import Progress

from training.datasets import EditExample, load_humanevalpack, write_jsonl

DEFAULT_CACHE = Path.home() / ".cache" / "cad" / "releases"
RELEASES: dict[str, list[str]] = {
    "packaging": ["23.1", "23.2", "24.0", "24.1", "24.2"],
    "idna": ["3.6", "3.7", "3.8", "3.10"],
    "attrs": ["23.1.0", "23.2.0", "24.1.0", "24.2.0"],
    "click": ["8.1.5", "8.1.6", "8.1.7", "8.1.8"],
    "requests": ["2.31.0", "2.32.0", "2.32.2", "2.32.3"],
    "itsdangerous": ["2.1.0", "2.1.1", "2.1.2", "2.2.0"],
}
MAX_BYTES = 200_000
SUFFIXES = (".py",)


def download_sdist(package: str, version: str, cache: Path) -> Path:
    """The sdist archive of ``package==version`` in ``cache`` (downloaded once with pip)."""
    folder = cache / "sdists" / package / version
    existing = [p for p in folder.glob("*") if p.suffix in (".gz", ".zip")]
    if existing:
        return existing[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
         "-d", str(folder), f"{package}=={version}"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return next(p for p in folder.glob("*") if p.suffix in (".gz", ".zip"))


def read_sources(archive: Path) -> dict[str, str]:
    """Text source files of an sdist by path relative to its top folder (UTF-8, size-capped)."""
    members: dict[str, bytes] = {}
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as bundle:
            for name in bundle.namelist():
                members[name] = bundle.read(name) if not name.endswith("/") else b""
    else:
        with tarfile.open(archive) as bundle:
            for member in bundle.getmembers():
                if member.isfile():
                    handle = bundle.extractfile(member)
                    members[member.name] = handle.read() if handle else b""
    sources = {}
    for name, data in members.items():
        relative = name.split("/", 1)[1] if "/" in name else name
        if not relative.endswith(SUFFIXES) or len(data) > MAX_BYTES or b"\x00" in data:
            continue
        try:
            sources[relative] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return sources


def release_pairs(
    package: str, old_version: str, new_version: str, old: dict[str, str], new: dict[str, str]
) -> list[EditExample]:
    """One edit per source file present in both releases whose text changed."""
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


def build_releases(packages: list[str], cache: Path, max_pairs: int) -> list[EditExample]:
    """Edits across consecutive releases of ``packages`` (at most ``max_pairs`` in all)."""
    examples: list[EditExample] = []
    with Progress(transient=True) as progress:
        task = progress.add_task("releases", total=sum(len(RELEASES[p]) for p in packages))
        for package in packages:
            previous: tuple[str, dict[str, str]] | None = None
            for version in RELEASES[package]:
                progress.update(task, description=f"{package} {version}")
                sources = read_sources(download_sdist(package, version, cache))
                if previous is not None:
                    examples.extend(
                        release_pairs(package, previous[0], version, previous[1], sources)
                    )
                previous = (version, sources)
                progress.advance(task)
    return examples[:max_pairs] if max_pairs else examples


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    releases = commands.add_parser("releases", help="diffs between consecutive sdist releases")
    releases.add_argument("--out", type=Path, required=True)
    releases.add_argument("--packages", default=",".join(RELEASES))
    releases.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    releases.add_argument("--max-pairs", type=int, default=0)
    heval = commands.add_parser("heval", help="HumanEvalPack-Fix in the edit schema")
    heval.add_argument("--language", choices=["python", "js"], default="python")
    heval.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "releases":
        unknown = set(args.packages.split(",")) - set(RELEASES)
        if unknown:
            parser.error(f"unknown packages {sorted(unknown)}; known: {', '.join(RELEASES)}")
        examples = build_releases(args.packages.split(","), args.cache, args.max_pairs)
    else:
        examples = load_humanevalpack(args.language)
    write_jsonl(args.out, examples)
    print(f"wrote {len(examples)} edits to {args.out}")


if __name__ == "__main__":
    main()
