"""``torch.compile`` as the runtime uses it: one private compiled copy per owner, CUDA graphs
on request, and a logged fall-back to the eager function when compiling fails."""

from __future__ import annotations

import logging
import types
from typing import Any

import torch

log = logging.getLogger(__name__)


class Compiled:
    """``function`` compiled by ``backend``, with CUDA graphs (``reduce-overhead``) when
    ``graphs`` and shapes fixed unless ``dynamic`` is left to torch.

    torch.compile keeps compiled code per code object, so every ``Compiled`` compiles its own
    copy of the function: its graphs then only ever see what their one owner passes (a
    runtime's one model), and the guards on that model's modules, costly on every call, can
    be skipped. If compiling fails (an operation dynamo cannot capture, no C++ compiler), the
    failure is logged and the eager function runs from then on: results stay the same, only
    slower."""

    def __init__(
        self,
        function: Any,
        backend: str = "inductor",
        *,
        graphs: bool = False,
        dynamic: bool | None = None,
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
        options: dict[str, Any] = {
            "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe
        }
        if graphs and backend == "inductor":
            options["triton.cudagraphs"] = True
        self.eager = function
        self.compiled: Any = torch.compile(
            own, backend=backend, fullgraph=True, dynamic=dynamic, options=options
        )

    def __call__(self, *args: Any) -> Any:
        if self.compiled is not None:
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
