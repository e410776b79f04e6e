"""Reading user files strictly and writing them atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class UserError(Exception):
    """A problem with the user's input, reported as one line and a non-zero exit."""


def read_text(path: Path) -> str:
    """Read a UTF-8 text file exactly (line endings and BOM kept); refuses binaries."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    if b"\x00" in data:
        raise UserError(f"{path}: looks like a binary file; only UTF-8 text can be edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not valid UTF-8 (byte {exc.start}); convert it to UTF-8 first"
        ) from None


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` via a temporary file in the same folder and a rename,
    so readers see the old file or the new one, never a partial write. Keeps the mode."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cad-tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp_name, path.stat().st_mode & 0o7777)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
