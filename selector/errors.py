"""Errors the decoder reports to users: each message names the next step."""

from __future__ import annotations


class ModelLoadError(RuntimeError):
    """The model or adapter could not be loaded (missing, offline, incompatible)."""


class ContextTooLongError(ValueError):
    """The prompt plus the generation budget does not fit the model's context window."""


class Cancelled(Exception):
    """Decoding was cancelled by the caller; nothing was produced."""
