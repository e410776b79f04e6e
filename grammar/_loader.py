"""Loads the compiled core, ``cad.grammar._native``, before anything else of the package.

There is no slower fallback to run without it: a missing, broken or stale build stops the
first import with one line that names the rebuild."""

from __future__ import annotations

import importlib
from types import ModuleType

from cad.errors import NativeCoreError

NATIVE_ABI = 7
"""The ``ABI_VERSION`` of the compiled core these sources need."""

_FIX = (
    "rebuild it with `pip install -e .` in the source folder (needs g++ or another C++17 compiler)"
)


def load_native() -> ModuleType:
    """The compiled core ``cad.grammar._native``. Raises :class:`NativeCoreError` (one line
    naming the fix) when it is not built, does not load or is out of date."""
    try:
        native = importlib.import_module("cad.grammar._native")
    except ImportError as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise NativeCoreError(f"cad's native core does not load ({reason}); {_FIX}") from None
    built = getattr(native, "ABI_VERSION", None)
    if built != NATIVE_ABI:
        raise NativeCoreError(
            f"cad's native core is out of date (ABI {built}, these sources need {NATIVE_ABI}); "
            f"{_FIX}"
        )
    return native


load_native()
