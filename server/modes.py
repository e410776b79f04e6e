"""How the model writes an edit: the one mode type of the command line and the server."""

from __future__ import annotations

from enum import StrEnum


class EditMode(StrEnum):
    """``program``: the model writes an edit program (copy and gen ops over numbered lines)
    under the program grammar. ``rewrite``: it writes the new text, which the decoder drafts
    from the document and verifies as calibrated draft graphs. ``auto``: program mode when
    something teaches or gives the model a program (an adapter, or a given program), rewrite
    mode otherwise."""

    auto = "auto"
    program = "program"
    rewrite = "rewrite"

    def resolved(self, *, program_given: bool) -> EditMode:
        """The mode to run: ``auto`` becomes ``program`` when ``program_given`` (an adapter
        or a program is given), else ``rewrite``; the others stay as they are."""
        if self is EditMode.auto:
            return EditMode.program if program_given else EditMode.rewrite
        return self
