"""Synthetic edits from real code, for warm-up training of a span selector.

Each family finds places in a Python or JavaScript file where one kind of edit applies
(rename a local variable, add a parameter, ...) using tree-sitter, and writes the edit as
byte splices with a templated instruction that names the thing precisely. ``before`` is the
real file, or one whole top-level definition of it when the file is longer than
``max_lines``. Every ``after`` differs from ``before`` and parses without errors (Python:
also compiles with ``ast`` when ``before`` does), so the warm-up never teaches broken code.

Modules: ``syntax`` (parsed units, tree walking, splices), ``scopes`` (functions and the
names they bind), ``naming`` (fresh names, function summaries), one module per family group
(``renames``, ``parameters``, ``docstrings``, ``constants``, ``statements``), and ``build``
(the family registry, file discovery and the driver).
"""

from cad.training.synthetic.build import (
    EXTENSIONS,
    FAMILIES,
    MAX_LINES,
    SKIPPED_FOLDERS,
    Family,
    SyntheticEdit,
    choose_families,
    edit_file,
    generate,
    source_files,
    synthesize,
    units,
)
from cad.training.synthetic.constants import change_constant
from cad.training.synthetic.docstrings import add_docstring
from cad.training.synthetic.naming import MAX_NAMED_TEXT
from cad.training.synthetic.parameters import add_parameter, remove_parameter
from cad.training.synthetic.renames import rename_local
from cad.training.synthetic.scopes import Function, functions
from cad.training.synthetic.statements import delete_statement, wrap_try
from cad.training.synthetic.syntax import Candidate, Splice, Unit, parse_unit, parses

__all__ = [
    "EXTENSIONS",
    "FAMILIES",
    "MAX_LINES",
    "MAX_NAMED_TEXT",
    "SKIPPED_FOLDERS",
    "Candidate",
    "Family",
    "Function",
    "Splice",
    "SyntheticEdit",
    "Unit",
    "add_docstring",
    "add_parameter",
    "change_constant",
    "choose_families",
    "delete_statement",
    "edit_file",
    "functions",
    "generate",
    "parse_unit",
    "parses",
    "remove_parameter",
    "rename_local",
    "source_files",
    "synthesize",
    "units",
    "wrap_try",
]
