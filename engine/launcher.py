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


def _value(args: Sequence[str], flag: str) -> str | None:
    """The value given to ``flag`` (``--flag V`` or ``--flag=V``), if any."""
    for position, arg in enumerate(args):
        if arg == flag and position + 1 < len(args):
            return args[position + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def model_head_size(model: str) -> int | None:
    """The attention head size in ``model``'s configuration; None where it cannot be read
    (vLLM then reports the problem itself)."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model).get_text_config()
        return int(
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
    except Exception:  # an unreadable configuration is vLLM's to report
        return None


def cpu_head_sizes() -> list[int] | None:
    """The head sizes vLLM's CPU attention takes when vLLM runs on the CPU; None on other
    platforms or where this vLLM does not say."""
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return None
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        return list(CPUAttentionBackend.get_supported_head_sizes())
    except Exception:  # another vLLM layout: its own check applies
        return None


def check_head_size(args: Sequence[str]) -> None:
    """Refuse, before vLLM starts, a model whose attention head size vLLM's CPU attention
    cannot run (it would otherwise fail on the first request)."""
    model = _value(args, "--model")
    head = model_head_size(model) if model else None
    supported = cpu_head_sizes() if head is not None else None
    if supported and head not in supported:
        sizes = ", ".join(map(str, supported))
        raise LaunchError(
            f"model {model} has attention heads of size {head}, which vLLM's CPU attention "
            f"cannot run (it takes {sizes}); serve it with cad serve, or choose another model"
        )


def main(argv: Sequence[str] | None = None) -> None:
    """Start the engine; a problem found before vLLM starts is one ``error:`` line."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        max_edits = _take_max_edits(args)
        check_vllm()
        check_head_size(args)
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    if max_edits is not None:
        os.environ["CAD_ENGINE_MAX_EDITS"] = max_edits
    os.environ["VLLM_PLUGINS"] = plugin_names(os.environ.get("VLLM_PLUGINS"))
    sys.argv = [SERVER_MODULE, *engine_arguments(args)]
    runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)
