"""copy-as-decode: apply LLM code edits as programs of copies and generated text.

The installed packages live under this one namespace: ``cad.resolver`` (the program language),
``cad.grammar`` (the masking core), ``cad.selector`` (the model runtime), ``cad.server`` (the
command line and the language server) and ``cad.training`` (datasets, training, evaluation).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("copy-as-decode")
except PackageNotFoundError:
    __version__ = "0+unknown"

__all__ = ["__version__"]
