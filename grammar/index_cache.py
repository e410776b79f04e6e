"""The on-disk cache of tables built once per tokenizer (such as the program token index).

Files live in ``$CAD_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/cad``, else ``~/.cache/cad``,
named by what they hold and the vocabulary's fingerprint. Writes are atomic (a temporary file
renamed into place), so a reader never sees half a file; a file that does not load (corrupt,
truncated, written by another format version) is rebuilt by the caller and overwritten. A
cache folder that cannot be written is not an error: the table is simply rebuilt next time.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

CACHE_ENV = "CAD_CACHE_DIR"

logger = logging.getLogger(__name__)


def cache_folder() -> Path:
    """Where cached tables are kept (see the module docstring)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cad"


def cache_path(kind: str, key: str) -> Path:
    """The file for table ``kind`` under ``key`` (a hex fingerprint)."""
    return cache_folder() / f"{kind}-{key[:40]}.bin"


def read_cached(kind: str, key: str) -> bytes | None:
    """The cached bytes, or None when there are none (or they cannot be read)."""
    try:
        return cache_path(kind, key).read_bytes()
    except OSError:
        return None


def write_cached(kind: str, key: str, data: bytes) -> None:
    """Store ``data`` atomically; failures are logged, never raised."""
    path = cache_path(kind, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        logger.debug("could not write %s: %s", path, error)
