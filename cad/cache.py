"""Where cad keeps what it builds once and reuses: token tables, compiled forwards, the warm
server's socket and log.

The folder is ``$CAD_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/cad``, else ``~/.cache/cad``.
This module imports nothing heavy, so a command that only needs the path stays quick.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CAD_CACHE_DIR"


def cache_folder() -> Path:
    """The cad cache folder (see the module docstring)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cad"
