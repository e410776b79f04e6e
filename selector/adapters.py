"""Which model an adapter runs on: the base model ``cad train`` recorded in its config."""

from __future__ import annotations

import json
from pathlib import Path

from cad.defaults import DEFAULT_MODEL
from cad.selector.errors import ModelLoadError

ADAPTER_CONFIG = "adapter_config.json"


class AdapterBaseMismatch(ModelLoadError):
    """The model asked for is not the base model the adapter was trained on."""

    def __init__(self, adapter: str, base: str, model: str) -> None:
        super().__init__(f"adapter {adapter} was trained on {base}, not {model}")
        self.adapter, self.base, self.model = adapter, base, model


def adapter_base(adapter: str) -> str | None:
    """The base model recorded in ``adapter``'s config (``base_model_name_or_path``), with
    a relative folder resolved against the working folder or, failing that, the adapter's
    parent folder; ``None`` when none is recorded. A folder without a config is refused."""
    path = Path(adapter).expanduser() / ADAPTER_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelLoadError(
            f"adapter folder {adapter} has no {ADAPTER_CONFIG}; pass the folder cad train wrote"
        ) from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"adapter {adapter}: cannot read {ADAPTER_CONFIG} ({exc})") from None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(base, str) or not base:
        return None
    local = Path(base).expanduser()
    if not local.is_absolute() and not local.is_dir():
        beside = Path(adapter).expanduser().resolve().parent / local
        if beside.is_dir():
            return str(beside)
    return base


def same_model(first: str, second: str) -> bool:
    """Whether two model names (hub ids or folders) name the same model."""
    return _identity(first) == _identity(second)


def _identity(model: str) -> str:
    local = Path(model).expanduser()
    return str(local.resolve()) if local.is_dir() else model


def choose_model(model: str | None, adapter: str | None) -> str:
    """The model to load: ``model`` when given, else the adapter's recorded base, else the
    default model. A ``model`` that is not the adapter's base raises ``AdapterBaseMismatch``."""
    base = adapter_base(adapter) if adapter else None
    if not model:
        return base or DEFAULT_MODEL
    if base is not None and adapter is not None and not same_model(model, base):
        raise AdapterBaseMismatch(adapter, base, model)
    return model
