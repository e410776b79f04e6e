"""The ``cad`` command line and the language server."""
