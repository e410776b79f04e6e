"""The ``/v1/cad`` HTTP protocol: requests, results, progress and errors as JSON.

``POST /v1/cad/edit`` takes ``{document, instruction, mode, range?, program?, ...}`` and
answers ``{program, text, stats}``; with ``"stream": true`` it answers NDJSON lines instead:
``{"progress": {...}}`` while the edit runs, ``{"heartbeat": true}`` while it waits, and one
final ``{"result": {...}}`` or ``{"error": {...}}``. Every error is ``{"error": {"code",
"message"}}`` with a message that names the next step. Nothing here imports vLLM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cad.resolver import Document, Program, ProgramError, parse
from cad.selector import Sampling

MODES = ("program", "rewrite")
DEFAULT_MAX_NEW_TOKENS = 2048


class EditError(Exception):
    """A request the engine refuses: HTTP ``status``, a stable ``code`` and a message that
    says what to do."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def to_json(self) -> dict[str, Any]:
        """The error object clients read (``details`` beside the code and message)."""
        return {"error": {**self.details, "code": self.code, "message": self.message}}


def bad_request(message: str, code: str = "invalid_request") -> EditError:
    """An HTTP 400 error."""
    return EditError(400, code, message)


@dataclass(frozen=True)
class EditRequest:
    """A validated ``POST /v1/cad/edit`` body. ``lines`` is the 1-based inclusive line range
    to edit (``None``: the whole document); a given ``program`` counts its line numbers from
    the range's first line."""

    document: str
    instruction: str
    mode: str
    lines: tuple[int, int] | None = None
    program: Program | None = None
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    subline: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    model: str | None = None
    adapter: str | None = None
    stream: bool = False

    def region(self) -> tuple[str, str, str]:
        """``(before, range text, after)``: the document split around the edited lines."""
        if self.lines is None:
            return "", self.document, ""
        first, last = self.lines
        lines = Document(self.document).lines
        return "".join(lines[: first - 1]), "".join(lines[first - 1 : last]), "".join(lines[last:])


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    """``body[name]`` checked against ``kind`` (``None`` or absent: ``default``); a bool is
    never taken for a number."""
    value = body.get(name)
    if value is None:
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise bad_request(f"'{name}' must be {names}, not {type(value).__name__}")
    return value


def parse_edit_request(body: Any) -> EditRequest:
    """Validate a request body; every problem is an HTTP 400 naming the field."""
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object {document, instruction, mode, ...}")
    document = body.get("document")
    if not isinstance(document, str):
        raise bad_request("'document' must be the text to edit")
    mode = _field(body, "mode", str, "program")
    if mode not in MODES:
        raise bad_request(f"'mode' is {mode!r}; use one of {', '.join(MODES)}")
    program_text = _field(body, "program", str, None)
    instruction = _field(body, "instruction", str, "")
    if program_text is None and not instruction.strip():
        raise bad_request("'instruction' must say what to change (or give a 'program')")
    if program_text is not None and mode != "program":
        raise bad_request("a 'program' is followed in program mode only; set 'mode' to program")
    lines = _lines(body.get("range"), Document(document).n_lines)
    program = None
    if program_text is not None:
        try:
            program = parse(program_text)
        except ProgramError as exc:
            raise bad_request(f"{exc}; fix the program", "invalid_program") from None
    budget = _field(body, "max_new_tokens", int, DEFAULT_MAX_NEW_TOKENS)
    if budget < 1:
        raise bad_request("'max_new_tokens' must be a positive number of tokens")
    temperature = float(_field(body, "temperature", (int, float), 0.0))
    top_p = float(_field(body, "top_p", (int, float), 1.0))
    if temperature < 0 or not 0 < top_p <= 1:
        raise bad_request("'temperature' must be >= 0 and 'top_p' in (0, 1]")
    return EditRequest(
        document=document,
        instruction=instruction,
        mode=mode,
        lines=lines,
        program=program,
        max_new_tokens=budget,
        subline=_field(body, "subline", bool, False),
        sampling=Sampling(temperature, top_p, _field(body, "seed", int, 0)),
        model=_field(body, "model", str, None) or None,
        adapter=_field(body, "adapter", str, None) or None,
        stream=_field(body, "stream", bool, False),
    )


def _lines(value: Any, n_lines: int) -> tuple[int, int] | None:
    """``range``: ``[first, last]`` line numbers, 1-based and inclusive."""
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise bad_request("'range' must be [first, last]: 1-based line numbers, inclusive")
    first, last = value
    if not 1 <= first <= last <= n_lines:
        raise bad_request(f"'range' is {first}-{last} but the document has {n_lines} lines")
    return first, last


def splice(before: str, old: str, new: str, after: str) -> str:
    """The document with the range ``old`` replaced by ``new``. When more lines follow and
    the new text lacks the line break that ended the range, that line break is kept, so the
    lines after the range stay lines of their own."""
    if after and new and not new.endswith(("\n", "\r")):
        new += old[len(old.rstrip("\r\n")) :]
    return before + new + after


def ndjson(item: dict[str, Any]) -> bytes:
    """One line of a streamed answer."""
    return (json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8")
