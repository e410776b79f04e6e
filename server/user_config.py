"""Defaults a user sets once for every ``cad`` command: a TOML file.

The file is ``$CAD_CONFIG`` if set, else ``$XDG_CONFIG_HOME/cad/config.toml``, else
``~/.config/cad/config.toml``; it is optional. It may set::

    model = "~/models/coder"      # --model of cad edit, cad serve, cad eval, ...
    device = "cuda"               # --device
    dtype = "bfloat16"            # --dtype
    server = "127.0.0.1:2088"     # --server of cad edit

Each key is the default of the option of that name in every command that has one. A value on
the command line wins, then the environment (``CAD_MODEL``, ``CAD_DEVICE``, ``CAD_DTYPE``,
``CAD_SERVER``), then this file, then the built-in default. An unknown key or a value that is
not text is a one-line error naming the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from cad.errors import UserError
from cad.files import read_text

CONFIG_ENV = "CAD_CONFIG"
KEYS = ("model", "device", "dtype", "server")
MAX_CONFIG_BYTES = 64 * 1024


def config_path() -> Path:
    """Where the configuration file is looked for."""
    if explicit := os.environ.get(CONFIG_ENV):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "cad" / "config.toml"


def load_config(path: Path | None = None) -> dict[str, str]:
    """The settings of the configuration file (none when there is no file)."""
    path = path or config_path()
    if not path.exists():
        if os.environ.get(CONFIG_ENV):
            raise UserError(f"{path}: no such configuration file ({CONFIG_ENV} names it)")
        return {}
    try:
        values = tomllib.loads(read_text(path, max_bytes=MAX_CONFIG_BYTES))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    unknown = sorted(set(values) - set(KEYS))
    if unknown:
        raise UserError(f"{path}: unknown setting {unknown[0]!r}; it may set {', '.join(KEYS)}")
    for key, value in values.items():
        if not isinstance(value, str):
            raise UserError(f'{path}: {key} must be text, e.g. {key} = "..."')
    return {
        key: os.path.expanduser(value) if key == "model" else value for key, value in values.items()
    }


def default_map(command: Any, config: dict[str, str]) -> dict[str, Any]:
    """click's ``default_map`` for ``command`` and its subcommands: each setting as the
    default of every option of that name."""
    defaults: dict[str, Any] = {}
    for parameter in getattr(command, "params", []):
        if parameter.param_type_name == "option" and parameter.name in config:
            defaults[parameter.name] = config[parameter.name]
    for name, subcommand in getattr(command, "commands", {}).items():
        nested = default_map(subcommand, config)
        if nested:
            defaults[name] = nested
    return defaults
