"""The native masking core is built by the package install and importable under ``cad``."""

from __future__ import annotations

from cad.grammar import _native


def test_native_core_is_built_into_the_grammar_package():
    assert _native.ABI_VERSION >= 1
    assert _native.__name__ == "cad.grammar._native"
