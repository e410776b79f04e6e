"""``cad-engine``: vLLM's OpenAI-compatible server with the copy-as-decode plugin switched on.

Every argument goes to vLLM as it is (``--model``, ``--port``, ``--tensor-parallel-size``,
``--pipeline-parallel-size``, ``--distributed-executor-backend ray``, ``--enable-lora
--lora-modules NAME=PATH``, ``--speculative-config ...``); ``cad-engine`` adds what the plugin
needs: ``VLLM_PLUGINS`` names the ``cad`` routes, and ``--logits-processors`` the program
processor unless a speculative configuration is given (vLLM cannot combine the two; such an
engine serves rewrite mode). ``--max-edits N`` caps the edits running at once (more are
answered 503 "overloaded"); it reaches the plugin as :data:`MAX_EDITS_VARIABLE`.

``cad-engine`` itself is a small supervisor (:func:`supervise`): it runs the API server
(``python -m cad.engine.launcher``, :func:`serve`) as its child in a process group of its own,
and when the server ends, however it ends (a crash, an OOM kill, SIGKILL), it ends every
process the server started (vLLM's engine core and workers) before it exits with the server's
status. On Linux it is the subreaper of everything below it, so even a process that left the
group comes back to it when its parent dies; and the server gets SIGTERM when the supervisor
dies. Stop signals (SIGINT, SIGTERM, SIGHUP) go on to the server, which shuts vLLM down in
order.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

PROCESSOR = "cad.engine.processor:ProgramLogitsProcessor"
PLUGIN = "cad"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
TORCH_EXTRAS = "torchvision torchaudio torchcodec"
MAX_EDITS_VARIABLE = "CAD_ENGINE_MAX_EDITS"
SERVER = (sys.executable, "-m", "cad.engine.launcher")
STOP_SIGNALS = {
    signal.SIGINT: signal.SIGINT,
    signal.SIGTERM: signal.SIGTERM,
    signal.SIGHUP: signal.SIGTERM,
}
STOP_GRACE_S = 30.0
"""How long a server asked to stop may take before it is killed."""
LEFTOVER_GRACE_S = 10.0
"""How long what a server left behind may take to end after SIGTERM before SIGKILL."""
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


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


def serve(argv: Sequence[str]) -> None:
    """Run vLLM's API server with the plugin in this process; a problem found before vLLM
    starts is one ``error:`` line."""
    args = list(argv)
    try:
        max_edits = _take_max_edits(args)
        check_vllm()
        check_head_size(args)
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    if max_edits is not None:
        os.environ[MAX_EDITS_VARIABLE] = max_edits
    os.environ["VLLM_PLUGINS"] = plugin_names(os.environ.get("VLLM_PLUGINS"))
    sys.argv = [SERVER_MODULE, *engine_arguments(args)]
    runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)


def _prctl() -> Callable[[int, int], int] | None:
    """Linux's ``prctl`` (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def _bound_to(parent: int, prctl: Callable[[int, int], int] | None) -> Callable[[], None]:
    """What the server runs between fork and exec: SIGTERM when ``parent`` dies, and an exit
    at once if it is already gone."""

    def bind() -> None:
        """Ask for SIGTERM on the parent's death; leave if that already happened."""
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return bind


def _process_table() -> list[tuple[int, str, int, int]]:
    """``(pid, state, parent, process group)`` of every process (Linux ``/proc``)."""
    table = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # ended while listed
            continue
        state, parent, group = stat.rsplit(")", 1)[1].split()[:3]
        table.append((int(entry.name), state, int(parent), int(group)))
    return table


def leftovers(group: int) -> list[int]:
    """Live processes in the server's process ``group`` or below this process: what must end
    before the supervisor does."""
    if not Path("/proc/self/stat").exists():
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [group]
    me = os.getpid()
    return [
        pid
        for pid, state, parent, in_group in _process_table()
        if state != "Z" and (in_group == group or parent == me)
    ]


def _signal_all(group: int, pids: Sequence[int], sig: int) -> None:
    """Send ``sig`` to the server's process ``group`` and to ``pids``."""
    for target, send in ((group, os.killpg), *((pid, os.kill) for pid in pids)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            send(target, sig)


def _reap() -> None:
    """Collect every child that has ended (orphans reparented here included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_leftovers(group: int) -> None:
    """End everything the server left: SIGTERM, then SIGKILL after :data:`LEFTOVER_GRACE_S`;
    returns once none is left."""
    _signal_all(group, leftovers(group), signal.SIGTERM)
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        _reap()
        left = leftovers(group)
        if not left:
            return
        if time.monotonic() > deadline:
            _signal_all(group, left, signal.SIGKILL)
        time.sleep(0.1)


def _wait(server: subprocess.Popen[bytes], stopping: list[float]) -> int:
    """The server's exit status (128 + N for signal N), killing it when it takes longer than
    :data:`STOP_GRACE_S` to stop after a stop signal (the time in ``stopping``)."""
    while True:
        try:
            code = server.wait(timeout=0.5)
            return 128 - code if code < 0 else code
        except subprocess.TimeoutExpired:
            if stopping and time.monotonic() - stopping[0] > STOP_GRACE_S:
                _signal_all(server.pid, (), signal.SIGKILL)


def supervise(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run the server ``command`` as a child in a process group of its own and stay until it
    and every process it started have ended; its exit status. Stop signals sent here go on to
    the server."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    server = subprocess.Popen(
        list(command),
        env=dict(env),
        start_new_session=True,
        preexec_fn=_bound_to(os.getpid(), prctl),
    )
    stopping: list[float] = []

    def forward(number: int, _frame: FrameType | None) -> None:
        """Pass a stop signal on to the server, noting when stopping began."""
        stopping.append(time.monotonic())
        if server.returncode is None:  # once reaped, its pid may be another process's
            with contextlib.suppress(ProcessLookupError):
                os.kill(server.pid, STOP_SIGNALS[signal.Signals(number)])

    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        status = _wait(server, stopping)
        end_leftovers(server.pid)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


HELP = """Usage: cad-engine --model MODEL [--max-edits N] [vLLM's options]

  The shared edit engine: vLLM's OpenAI-compatible server with the cad routes
  (POST /v1/cad/edit, GET /v1/cad/info) switched on. Every option but --max-edits
  is vLLM's own: --model, --port, --tensor-parallel-size, --enable-lora
  --lora-modules NAME=PATH, --speculative-config ... (see: vllm serve --help).

Options:
  --max-edits N  Edits running at once; more are answered 503 "overloaded".
                 [default: 4 x vLLM's --max-num-seqs]
  --help         Show this message and exit.

The engine runs in an environment of its own (docs/engine.md):
  python3 -m venv .venv-engine && .venv-engine/bin/pip install 'copy-as-decode[vllm]'
"""


def main(argv: Sequence[str] | None = None) -> None:
    """``cad-engine``: the API server (:func:`serve`, the same arguments) under a supervisor
    (:func:`supervise`), exiting with the server's status; ``--help`` says how to run it,
    whether or not vLLM is installed here."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--help" in args or "-h" in args:
        print(HELP, end="")
        try:
            check_vllm()
        except LaunchError as exc:
            print(f"\nIn this environment: {exc}.")
        sys.exit(0)
    sys.exit(supervise([*SERVER, *args], os.environ))


if __name__ == "__main__":
    serve(sys.argv[1:])
