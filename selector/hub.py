"""Hub models without a minute of retries: a model in the local cache loads offline, and a
model that is not there fails at once, naming the command that downloads it, when the hub
cannot be reached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cad.selector.errors import ModelLoadError

PROBE_TIMEOUT_S = 5.0


def download_hint(model: str) -> str:
    """What to do about a model that cannot be loaded: for a local folder, what it lacks;
    for a hub id, download it first."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            return "not a model folder: no config.json (give the folder a model was saved to)"
        return (
            "check that the folder holds a whole model (config.json, the tokenizer files and "
            "safetensors weights)"
        )
    if model.startswith(("/", "./", "../", "~")) or folder.exists():
        return "no such model folder; give the folder a model was saved to, or a hub id"
    return f"download it first (hf download {model}) or pass --model PATH to a local model folder"


def hub_options(model: str) -> dict[str, Any]:
    """The ``from_pretrained`` options for ``model``: ``local_files_only`` when it is a hub
    id in the local cache (no network needed), none when it must be downloaded and the hub
    answers. Raises ``ModelLoadError`` at once when it must be downloaded but the hub cannot
    be reached, or ``HF_HUB_OFFLINE`` forbids it."""
    if Path(model).expanduser().exists():
        return {}
    from huggingface_hub import constants, get_session, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model, "config.json")
    except ValueError:  # not a hub id; from_pretrained reports it
        return {}
    if isinstance(cached, str):
        return {"local_files_only": True}
    if constants.HF_HUB_OFFLINE:
        raise ModelLoadError(
            f"model {model} is not in the local cache and HF_HUB_OFFLINE is set; "
            + download_hint(model)
        )
    try:
        get_session().head(constants.ENDPOINT, timeout=PROBE_TIMEOUT_S)
    except Exception as exc:  # any failure to reach the hub means: do not try to download
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise ModelLoadError(
            f"model {model} is not in the local cache and {constants.ENDPOINT} cannot be "
            f"reached ({reason}); " + download_hint(model)
        ) from None
    return {}
