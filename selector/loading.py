"""Loading a causal LM (and optionally a LoRA adapter) from a local folder or a hub id."""

from __future__ import annotations

import contextlib
import io
import logging
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cad.defaults import DEFAULT_MODEL
from cad.selector.errors import ModelLoadError
from cad.selector.hub import download_hint, hub_options

UNSAFE_WEIGHTS = (
    "its weights are a pickle that holds more than tensors, which is never loaded "
    "(it could run code); use weights in safetensors format"
)
log = logging.getLogger(__name__)
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def pick_device(device: str = "auto") -> torch.device:
    """``auto`` means CUDA when present, else CPU; anything else is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise ModelLoadError(f"unknown device {device!r}; use auto, cpu or cuda[:N]") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            "device cuda was asked for but no CUDA GPU is visible; use --device cpu"
        )
    return chosen


def native_bfloat16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX): there a
    bfloat16 projection runs about twice as fast as a float32 one (packed weights, a 2-core
    AMD EPYC: see docs/compile.md); elsewhere bfloat16 is emulated and slower."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def pick_dtype(dtype: str, device: torch.device, *, training: bool = False) -> torch.dtype:
    """``auto`` means bfloat16 on a GPU that supports it, float16 on other GPUs; on a CPU,
    bfloat16 where it multiplies bfloat16 in hardware (:func:`native_bfloat16_cpu`), else
    float32. ``training`` keeps float32 on every CPU (adapter gradients and optimizer state
    in full precision; a CPU trains tiny models only)."""
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if not training and native_bfloat16_cpu():
            return torch.bfloat16
        return torch.float32
    if dtype not in _DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r}; use auto, {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


@dataclass
class LoadedModel:
    """A model ready for decoding: weights on ``device`` in ``dtype``, its tokenizer, its name."""

    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    name: str
    adapter: str | None = None

    @property
    def context_length(self) -> int:
        """The longest sequence the model accepts (prompt + program + copied text)."""
        config = self.model.config
        return int(getattr(config, "max_position_embeddings", None) or 32768)

    @property
    def vocab_size(self) -> int:
        """Width of the model's output logits (may exceed the tokenizer's vocabulary)."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def compiled(self) -> bool:
        """Whether a compiled static-cache runtime decodes this model (``--compile``)."""
        from cad.selector.runtime import installed

        runtime = installed(self.model)
        return runtime is not None and runtime.compiled

    @property
    def graphs(self) -> bool:
        """Whether this model's forwards replay as CUDA graphs (the default on a GPU)."""
        from cad.selector.runtime import installed

        runtime = installed(self.model)
        return runtime is not None and runtime.graphs is not None

    @property
    def packed(self) -> bool:
        """Whether this model decodes through the static runtime with its weights packed for
        oneDNN (the default on a CPU in float32)."""
        from cad.selector.runtime import installed

        runtime = installed(self.model)
        return runtime is not None and runtime.parts.packed

    @property
    def forward_path(self) -> str:
        """How this model's forwards run, in words (for logs and benchmark tables)."""
        if self.compiled:
            return "compiled static runtime"
        if self.graphs:
            return "static runtime, CUDA graphs"
        return "static runtime, packed weights" if self.packed else "eager forwards"

    def warm_up(self) -> None:
        """Pay for lazy initialisation before the first real edit: one tiny forward, or
        through the static runtime the common graphs and compiled parts (forwards of each
        kind, greedy token choice)."""
        from cad.selector.runtime import installed

        runtime = installed(self.model)
        if runtime is not None:
            from cad.selector.sampling import Sampling, TokenChooser

            runtime.warm_up()
            logits = torch.zeros(self.vocab_size, device=self.device)
            TokenChooser.for_model(self, Sampling()).choose(logits)
            runtime.persist()
            return
        ids = torch.tensor([[self.tokenizer.eos_token_id or 0]], device=self.device)
        with torch.inference_mode():
            self.model(input_ids=ids, use_cache=False)


def _quiet_from_pretrained(loader: Any, name: str, **kwargs: Any) -> Any:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with contextlib.redirect_stdout(io.StringIO()):
        return loader.from_pretrained(name, **kwargs)


def load_model(
    model: str = DEFAULT_MODEL,
    *,
    device: str = "auto",
    dtype: str = "auto",
    adapter: str | None = None,
    compile: bool = False,
    graphs: bool | None = None,
    triton: bool = False,
    on_phase: Callable[[str], None] | None = None,
) -> LoadedModel:
    """Load ``model`` (folder or hub id) and its tokenizer, plus a LoRA ``adapter`` folder.
    On a GPU it decodes through the static-cache runtime with CUDA graphs
    (:mod:`cad.selector.runtime`) unless ``graphs=False`` (with ``triton``, through fused
    kernels); ``compile`` adds compiled layers (and on a CPU decodes through the compiled
    runtime). See :func:`use_runtime`.
    ``on_phase`` hears each phase's name as it ends: ``tokenizer``, ``weights`` (read, or
    mapped, on the host), ``device`` (moved to the target device) and ``runtime``.

    Failures become :class:`ModelLoadError` with one line saying what to do."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    phase = on_phase or (lambda _: None)

    target = pick_device(device)
    torch_dtype = pick_dtype(dtype, target)
    local = Path(model).expanduser()
    if (model.startswith((".", "/", "~")) or local.exists()) and not local.is_dir():
        raise ModelLoadError(
            f"model folder {model} does not exist; pass --model with a folder or hub id"
        )
    options = hub_options(model)
    try:
        tokenizer = _quiet_from_pretrained(AutoTokenizer, model, **options)
        phase("tokenizer")
        network = _quiet_from_pretrained(AutoModelForCausalLM, model, dtype=torch_dtype, **options)
    except pickle.UnpicklingError:
        raise ModelLoadError(f"model {model}: {UNSAFE_WEIGHTS}") from None
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"cannot load model {model!r} ({first[:160]}); {download_hint(model)}"
        ) from None
    if adapter is not None:
        network = _attach_adapter(network, adapter)
    phase("weights")
    network.to(target)
    network.eval()
    if target.type == "cuda":
        torch.cuda.synchronize(target)
    phase("device")
    loaded = LoadedModel(network, tokenizer, target, torch_dtype, model, adapter)
    use_runtime(loaded, compile=compile, graphs=graphs, triton=triton)
    phase("runtime")
    return loaded


def use_runtime(
    loaded: LoadedModel, *, compile: bool = False, graphs: bool | None = None, triton: bool = False
) -> LoadedModel:
    """Choose how ``loaded`` decodes from now on, and return it.

    By default (``graphs`` not False) a model decodes through the static-cache runtime where
    that is faster than transformers' eager forward: on a GPU with every forward replayed as
    a CUDA graph, on a CPU in float32 or bfloat16 with its weights packed for oneDNN
    (:mod:`cad.selector.cpu_packing`; about twice the eager speed where measured). Elsewhere,
    or with ``graphs=False``, transformers' eager forward and dynamic cache decode.
    ``compile`` adds regionally compiled layers (anywhere); ``triton`` runs a GPU's graphed
    forwards through the fused kernels of :mod:`cad.selector.gpu_kernels`. An architecture
    the runtime does not know is a :class:`ModelLoadError` with ``compile`` and falls back to
    the eager forward (logged) otherwise."""
    from cad.selector.runtime import UnsupportedModel, install, uninstall
    from cad.selector.static_forward import ModelParts

    uninstall(loaded.model)
    wants_graphs = loaded.device.type == "cuda" and graphs is not False
    if compile:
        enable_compile(loaded, graphs=graphs)
    elif wants_graphs:
        try:
            install(loaded.model, loaded.device, compile=False, graphs=True, triton=triton)
        except UnsupportedModel as exc:
            log.warning("CUDA graphs are off: %s", exc)
    elif loaded.device.type == "cpu" and graphs is not False:
        if ModelParts.would_pack(loaded.model):
            install(loaded.model, loaded.device, compile=False, graphs=False)
        else:
            log.info("the static runtime is off: it is faster on a CPU with packed weights only")
    return loaded


def enable_compile(loaded: LoadedModel, *, graphs: bool | None = None) -> None:
    """Decode ``loaded`` through a compiled static-cache runtime from now on (with CUDA
    graphs on a GPU unless ``graphs=False``); an architecture the runtime does not know is a
    :class:`ModelLoadError` saying to run without it."""
    from cad.selector.runtime import UnsupportedModel, install

    try:
        install(loaded.model, loaded.device, graphs=graphs)
    except UnsupportedModel as exc:
        raise ModelLoadError(f"--compile: {exc}; run without --compile") from None


def _attach_adapter(network: Any, adapter: str) -> Any:
    from peft import PeftModel

    if not (Path(adapter) / "adapter_config.json").is_file():
        raise ModelLoadError(
            f"adapter folder {adapter} has no adapter_config.json; pass the folder cad train wrote"
        )
    try:
        return PeftModel.from_pretrained(network, adapter)
    except pickle.UnpicklingError:
        raise ModelLoadError(f"adapter {adapter}: {UNSAFE_WEIGHTS}") from None
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(
            f"adapter {adapter} does not fit this model ({str(exc).splitlines()[0][:160]}); "
            "use the base model it was trained on"
        ) from None
