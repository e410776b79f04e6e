"""``torch.compile`` as the runtime uses it: one private compiled copy per owner, shapes
marked dynamic where they vary, and a logged fall-back to the eager function when compiling
fails."""

from __future__ import annotations

import logging
import types
from collections.abc import Mapping
from typing import Any

import torch

log = logging.getLogger(__name__)


def compiled_graphs() -> int:
    """How many graphs dynamo has compiled in this process so far: a call that raises it
    compiled something (what the persistent compile cache saves after)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class Compiled:
    """``function`` compiled by ``backend``; ``dynamic_args`` maps an argument's position to
    the dimension of it that varies between calls (marked dynamic before each call, so one
    graph serves every size, a size of 1 apart); ``dynamic`` is torch.compile's own switch.

    torch.compile keeps compiled code per code object, so every ``Compiled`` compiles its own
    copy of the function: its graphs then only ever see what their one owner passes (a
    runtime's one model). Guards stay on, so a module whose structure differs from the one a
    graph was compiled for (a layer with an adapter where others have none) gets a graph of
    its own. If compiling fails (an operation dynamo cannot capture, no C++ compiler), the
    failure is logged and the eager function runs from then on: results stay the same, only
    slower."""

    def __init__(
        self,
        function: Any,
        backend: str = "inductor",
        *,
        dynamic: bool | None = None,
        dynamic_args: Mapping[int, int] | None = None,
    ) -> None:
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 32)
        own = types.FunctionType(
            function.__code__.replace(),
            function.__globals__,
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )
        self.eager = function
        self.dynamic_args = dict(dynamic_args or {})
        self.compiled: Any = torch.compile(own, backend=backend, fullgraph=True, dynamic=dynamic)

    def __call__(self, *args: Any) -> Any:
        if self.compiled is not None:
            for position, dim in self.dynamic_args.items():
                torch._dynamo.maybe_mark_dynamic(args[position], dim)
            try:
                return self.compiled(*args)
            except torch._dynamo.exc.TorchDynamoException as exc:
                reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                log.warning(
                    "compiling %s failed (%s: %s); running it without compilation",
                    self.eager.__name__,
                    type(exc).__name__,
                    reason,
                )
                self.compiled = None
        return self.eager(*args)
