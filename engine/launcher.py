"""``cad-engine``: vLLM's OpenAI-compatible server with the copy-as-decode plugin switched on.

Every argument goes to vLLM as it is (``--model``, ``--port``, ``--tensor-parallel-size``,
``--pipeline-parallel-size``, ``--distributed-executor-backend ray``, ``--enable-lora
--lora-modules NAME=PATH``, ``--speculative-config ...``); ``cad-engine`` adds what the plugin
needs: ``VLLM_PLUGINS`` names the ``cad`` routes, and ``--logits-processors`` the program
processor unless a speculative configuration is given (vLLM cannot combine the two; such an
engine serves rewrite mode). ``--max-edits N`` caps the edits running at once (more are
answered 503 "overloaded").
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

PROCESSOR = "cad.engine.processor:ProgramLogitsProcessor"
PLUGIN = "cad"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
TORCH_EXTRAS = "torchvision torchaudio torchcodec"


class LaunchError(Exception):
    """The engine cannot start; the message says what to do."""


def _has(args: Sequence[str], *flags: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in args for flag in flags)


def _take_max_edits(args: list[str]) -> str | None:
    """Remove ``--max-edits N`` (ours, not vLLM's) from ``args``; its value."""
    for position, arg in enumerate(args):
        if arg == "--max-edits" and position + 1 < len(args):
            value = args[position + 1]
            del args[position : position + 2]
        elif arg.startswith("--max-edits="):
            value = arg.split("=", 1)[1]
            del args[position]
        else:
            continue
        if not value.isdigit() or int(value) < 1:
            raise LaunchError(f"--max-edits {value!r}: expected a positive number of edits")
        return value
    return None


def engine_arguments(args: Sequence[str]) -> list[str]:
    """vLLM's arguments with the program processor added (unless speculative decoding is
    configured, or the processor is already named)."""
    out = list(args)
    if _has(out, "--speculative-config", "-sc") or PROCESSOR in out:
        return out
    if "--logits-processors" in out:
        position = out.index("--logits-processors")
        out.insert(position + 1, PROCESSOR)
        return out
    return [*out, "--logits-processors", PROCESSOR]


def plugin_names(current: str | None) -> str:
    """``VLLM_PLUGINS`` with ``cad`` added to whatever the operator already allows."""
    names = [name for name in (current or "").split(",") if name]
    return ",".join([*names, PLUGIN] if PLUGIN not in names else names)


def check_vllm() -> None:
    """Import vLLM once, turning the known install problems into one line each."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise LaunchError(
            "vLLM is not installed: pip install 'copy-as-decode[vllm]' on a CPU machine, "
            "'copy-as-decode[vllm-cuda]' on a CUDA machine"
        ) from None
    except RuntimeError as exc:
        if "torchvision" in str(exc) or "torchaudio" in str(exc):
            raise LaunchError(
                "vLLM cannot import because CUDA builds of torchvision/torchaudio/torchcodec sit "
                f"beside the CPU torch; remove them: pip uninstall -y {TORCH_EXTRAS}"
            ) from None
        raise


def main(argv: Sequence[str] | None = None) -> None:
    """Start the engine; a problem found before vLLM starts is one ``error:`` line."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        max_edits = _take_max_edits(args)
        check_vllm()
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    if max_edits is not None:
        os.environ["CAD_ENGINE_MAX_EDITS"] = max_edits
    os.environ["VLLM_PLUGINS"] = plugin_names(os.environ.get("VLLM_PLUGINS"))
    sys.argv = [SERVER_MODULE, *engine_arguments(args)]
    runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)
