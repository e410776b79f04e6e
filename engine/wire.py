"""What the front end tells the logits processor about one edit.

Every chunk of a program-mode session carries, in ``SamplingParams.extra_args["cad"]``, all
the processor needs to mask the next decisions: the edit's id, the document's line widths,
the program bytes accepted so far and, in forced-program mode, the target program. The
processor keeps a mirror of each edit's program FSM between chunks as a cache only; from any
chunk it can rebuild the mirror, so a restarted worker or an evicted mirror never gives a
wrong mask.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

KEY = "cad"


@dataclass(frozen=True)
class ProgramSpec:
    """One edit's program state as of the start of a chunk.

    ``program`` is the program text accepted so far (bytes: a token may end inside a UTF-8
    character); ``target`` is the canonical program to follow in forced-program mode.
    ``token``, for a forced program followed through drafts, is the token the chunk's one
    sample must be: the front end has walked the target through its own tape and knows it
    (where the program ended inside the chunk, the sample is not used), so the processor
    allows that token alone and consults no program FSM."""

    edit: str
    line_widths: tuple[int, ...]
    subline: bool
    program: bytes
    target: bytes | None = None
    token: int | None = None

    def to_args(self) -> dict[str, Any]:
        """``extra_args`` for the chunk's ``SamplingParams``."""
        return {
            KEY: {
                "edit": self.edit,
                "lines": list(self.line_widths),
                "subline": self.subline,
                "program": _encode(self.program),
                "target": None if self.target is None else _encode(self.target),
                "token": self.token,
            }
        }

    @classmethod
    def from_args(cls, extra_args: dict[str, Any] | None) -> ProgramSpec | None:
        """The spec inside ``extra_args``; ``None`` for requests that are not cad edits.
        Malformed specs raise ``ValueError``."""
        if not extra_args or KEY not in extra_args:
            return None
        raw = extra_args[KEY]
        try:
            lines = tuple(int(width) for width in raw["lines"])
            target = raw.get("target")
            token = raw.get("token")
            return cls(
                edit=str(raw["edit"]),
                line_widths=lines,
                subline=bool(raw.get("subline", False)),
                program=base64.b64decode(raw["program"], validate=True),
                target=None if target is None else base64.b64decode(target, validate=True),
                token=None if token is None else int(token),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"extra_args['{KEY}'] is not a program spec ({exc})") from None


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
