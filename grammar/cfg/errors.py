"""The one error type the context-free masking core raises for bad or unsupported input."""

from __future__ import annotations


class GrammarError(ValueError):
    """A grammar or JSON Schema that cannot be compiled: a syntax error, an undefined rule,
    an empty language, or a JSON Schema keyword outside the supported subset (named in the
    message so the caller knows what to drop)."""
