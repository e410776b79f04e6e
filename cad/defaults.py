"""Defaults shared by the command line, the language server and the model runtime."""

from __future__ import annotations

DEFAULT_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
"""The model loaded when neither ``--model`` (the ``model`` setting) nor an adapter names one."""
