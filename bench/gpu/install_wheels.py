"""Install the wheels of a folder whose package is missing here or older than the wheel,
offline and without dependencies (``bench/gpu/run.sh``; the folder is filled by
``bench/gpu/fetch_wheels.sh``). Packages already present at the wheel's version or newer are
left alone, so the machine's own torch stack is never replaced.

    python3 bench/gpu/install_wheels.py .whl [--dry-run]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path


def version_key(version: str) -> tuple[int, ...]:
    """A comparable form of a release version (its leading numbers: ``5.19.0`` → (5, 19, 0));
    enough for the pinned releases the folder holds."""
    numbers = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in numbers.group(0).split(".")) if numbers else ()


def wheel_name(wheel: Path) -> tuple[str, str]:
    """The distribution name and version a wheel's file name gives."""
    name, version = wheel.name.split("-")[:2]
    return name, version


def needed(folder: Path) -> list[Path]:
    """The wheels in ``folder`` whose package is not installed, or installed older."""
    chosen = []
    for wheel in sorted(folder.glob("*.whl")):
        name, version = wheel_name(wheel)
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            chosen.append(wheel)
            continue
        if version_key(installed) < version_key(version):
            chosen.append(wheel)
    return chosen


def main(argv: list[str] | None = None) -> int:
    """Install what is needed; prints one line saying what."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="list, do not install")
    args = parser.parse_args(argv)
    if not args.folder.is_dir() or not any(args.folder.glob("*.whl")):
        print(
            f"error: no wheels in {args.folder}; run bench/gpu/fetch_wheels.sh where there is "
            "network access first",
            file=sys.stderr,
        )
        return 1
    wheels = needed(args.folder)
    names = ", ".join("==".join(wheel_name(w)) for w in wheels) or "nothing"
    if wheels and not args.dry_run:
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
        done = subprocess.run([*command, *map(str, wheels)], check=False)
        if done.returncode:
            print(f"error: pip could not install {names}", file=sys.stderr)
            return done.returncode
    print(f"{'would install' if args.dry_run else 'installed'}: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
