"""What a loaded model does the first time it meets each forward shape, said in words before
the first forward, so a long first edit is not a silent one."""

from __future__ import annotations

from typing import Any


def first_use_notice(loaded: Any) -> str | None:
    """One line saying that forwards are compiled (``--compile``) or captured as CUDA graphs
    at the first use of each shape, which shapes those are, what that costs, and that
    compiled code is kept for the next run; ``None`` for eager forwards."""
    from cad.cache import cache_folder
    from cad.selector.runtime import BUCKETS

    shapes = ", ".join(str(size) for size in BUCKETS)
    if loaded.compiled:
        return (
            f"compiling the forwards at the first use of each shape ({shapes} tokens): the "
            "first edit takes minutes on a cold cache; compiled code is kept in "
            f"{cache_folder()} for the next run"
        )
    if loaded.graphs:
        return (
            f"capturing CUDA graphs at the first use of each shape ({shapes} tokens), a "
            "fraction of a second each"
        )
    return None
