"""The persistent cache of compiled forwards (``--compile``): torch's portable compile
artifacts (``torch.compiler.save_cache_artifacts``: the AOT-autograd and inductor graphs,
generated kernels and autotuning results) kept in the cad cache folder, so a new process
loads what an earlier one compiled instead of compiling it again.

One file per key: torch's version, the device (GPU name and compute capability), the
compiler backend and the shape of the model's layers (what the regionally compiled parts
depend on; adapters included). It is written atomically after a forward that compiled
something, holding every artifact this process compiled or loaded and used; a file that
does not load (truncated, corrupt, from another build) is logged and rebuilt by the next
save. Compilation itself still traces each part once per process (dynamo), which the
regional parts keep to a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
from typing import Any

import torch

from cad.grammar.index_cache import read_cached, write_cached

log = logging.getLogger(__name__)

KIND = "compiled-forwards"
_TORCH_CACHE_LOGGER = "torch.compiler._cache"
_LOADED: set[str] = set()


def device_name(device: torch.device) -> str:
    """What compiled kernels depend on about ``device``: the GPU's name and compute
    capability, or the CPU's architecture."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"{torch.cuda.get_device_name(device)} sm{major}{minor}"
    return f"{device.type} {platform.machine()} {platform.processor()}".strip()


def model_shape(model: Any) -> dict[str, Any]:
    """The facts about a model that its compiled layer parts depend on."""
    network = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = network.config
    layer = network.model.layers[0]
    adapters = getattr(model, "peft_config", None) or {}
    return {
        "type": getattr(config, "model_type", "?"),
        "layer": type(layer).__name__,
        "hidden": config.hidden_size,
        "intermediate": config.intermediate_size,
        "heads": config.num_attention_heads,
        "kv_heads": config.num_key_value_heads,
        "head_dim": getattr(config, "head_dim", None),
        "dtype": str(network.get_input_embeddings().weight.dtype),
        "activation": getattr(config, "hidden_act", None),
        "adapters": sorted(
            json.dumps(adapter.to_dict(), sort_keys=True, default=str)
            for adapter in adapters.values()
        ),
    }


def cache_key(model: Any, device: torch.device, backend: Any) -> str:
    """The hex key of the artifact file for ``model`` compiled by ``backend`` (a name, or a
    backend function) on ``device``."""
    facts = {
        "torch": torch.__version__,
        "device": device_name(device),
        "backend": backend if isinstance(backend, str) else getattr(backend, "__name__", "?"),
        "model": model_shape(model),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def available() -> bool:
    """Whether this torch can save and load compile artifacts (torch 2.7 and later)."""
    return hasattr(torch.compiler, "save_cache_artifacts") and hasattr(
        torch.compiler, "load_cache_artifacts"
    )


def load(key: str) -> bool:
    """Hot-load the artifacts stored under ``key`` (once per process); whether they loaded.
    A file that does not load is left for the next save to replace."""
    if key in _LOADED:
        return True
    if not available():
        return False
    data = read_cached(KIND, key)
    if data is None:
        return False
    torch_log = logging.getLogger(_TORCH_CACHE_LOGGER)
    level = torch_log.level
    torch_log.setLevel(logging.ERROR)
    try:
        info = torch.compiler.load_cache_artifacts(data)
    except Exception as exc:
        log.info("the compiled-forward cache did not load (%s); rebuilding it", exc)
        return False
    finally:
        torch_log.setLevel(level)
    if info is None:
        log.info("the compiled-forward cache did not load; rebuilding it")
        return False
    _LOADED.add(key)
    return True


def save(key: str) -> bool:
    """Store this process's compile artifacts under ``key`` (atomically); whether there
    were any to store."""
    if not available():
        return False
    artifacts = torch.compiler.save_cache_artifacts()
    if artifacts is None:
        return False
    write_cached(KIND, key, artifacts[0])
    _LOADED.add(key)
    return True
