"""The on-disk cache of tables built once per tokenizer (such as the program token index).

Files live in the cad cache folder (:mod:`cad.cache`), named by what they hold and the vocabulary's fingerprint. Writes are atomic (a temporary file
renamed into place), so a reader never sees half a file; a file that does not load (corrupt,
truncated, written by another format version) is rebuilt by the caller and overwritten. A
cache folder that cannot be written is not an error: the table is simply rebuilt next time.

Files hold data only, which the callers check as they decode it. The reader refuses what is
not a plain file of bounded size before reading a byte: the file is opened without
following a symbolic link and without blocking (a FIFO cannot stall it), then ``fstat`` must
show a regular file no larger than the bound, and no more than that is read.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

from cad.cache import cache_folder

MAX_BYTES = 64 << 20
"""The largest cache file read unless a caller names its own bound."""

logger = logging.getLogger(__name__)


def cache_path(kind: str, key: str) -> Path:
    """The file for table ``kind`` under ``key`` (a hex fingerprint)."""
    return cache_folder() / f"{kind}-{key[:40]}.bin"


def read_cached(kind: str, key: str, *, max_bytes: int = MAX_BYTES) -> bytes | None:
    """The cached bytes, or None when there are none, they cannot be read, or the path is
    not a regular file of at most ``max_bytes`` (a link, a FIFO, a device: see the module
    docstring)."""
    path = cache_path(kind, key)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if not isinstance(error, FileNotFoundError):
            logger.debug("not reading %s: %s", path, error)
        return None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            logger.debug("not reading %s: not a regular file of at most %d bytes", path, max_bytes)
            return None
        chunks = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(handle, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            logger.debug("not reading %s: it grew past %d bytes", path, max_bytes)
            return None
        return b"".join(chunks)
    except OSError as error:
        logger.debug("could not read %s: %s", path, error)
        return None
    finally:
        os.close(handle)


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
