"""The ``/v1/cad`` HTTP protocol: requests, results, progress and errors as JSON.

``POST /v1/cad/edit`` takes ``{document, instruction, mode, range?, program?, ...}`` and
answers ``{program, text, stats}``; with ``"stream": true`` it answers NDJSON lines instead:
``{"progress": {...}}`` while the edit runs, ``{"heartbeat": true}`` while it waits, and one
final ``{"result": {...}}`` or ``{"error": {...}}``. Every error is ``{"error": {"code",
"message"}}`` with a message that names the next step. Nothing here imports vLLM.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from cad.files import MAX_TEXT_BYTES, describe_size
from cad.resolver import Document, Program, ProgramError, parse
from cad.selector import Sampling

MODES = ("program", "rewrite")
DEFAULT_MAX_NEW_TOKENS = 2048
MAX_NEW_TOKENS = 2**31 - 1
"""Far beyond any model's context: the engine decides at most what the context leaves."""
MAX_DRAFT_BUDGET = 4096
"""The largest draft tree a forced program's forward may grow: drafting is host work that
grows with it, while what a forward feeds the engine is only the path the program follows."""
MAX_TEMPERATURE = 2.0
"""The hottest temperature vLLM samples at."""
MAX_SEED = 2**63 - 1
"""Seeds are 64-bit signed integers in vLLM's samplers."""
MAX_NAME_BYTES = 4096
"""A model or adapter name, or a folder path."""


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
    draft_budget: int | None = None
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


def _text(body: dict[str, Any], name: str, limit: int = MAX_TEXT_BYTES) -> str | None:
    """``body[name]`` as text of at most ``limit`` UTF-8 bytes (413 beyond: the engine never
    tokenizes more than the in-process editor reads), holding no lone UTF-16 surrogate (a
    model reads Unicode text, and the answer must encode as UTF-8)."""
    value = _field(body, name, str, None)
    if value is None:
        return None
    if len(value) > limit:  # never fewer bytes than characters
        raise _too_large(name, len(value.encode("utf-8", "surrogatepass")), limit)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        line = value.count("\n", 0, exc.start) + 1
        raise bad_request(
            f"'{name}' holds a lone UTF-16 surrogate on line {line}, which is not text; "
            "send valid Unicode"
        ) from None
    if size > limit:
        raise _too_large(name, size, limit)
    return value


def _too_large(name: str, size: int, limit: int) -> EditError:
    """The 413 answer for field ``name`` of ``size`` bytes."""
    return EditError(
        413,
        "too_large",
        f"'{name}' is {describe_size(size)}, over the engine's limit of {describe_size(limit)}; "
        "edit a smaller part of the file",
    )


def _number(body: dict[str, Any], name: str, default: float) -> float:
    """``body[name]`` as a finite number."""
    try:
        value = float(_field(body, name, (int, float), default))
    except OverflowError:  # an integer beyond any float
        value = math.inf
    if not math.isfinite(value):
        raise bad_request(f"'{name}' must be a finite number, not {value}")
    return value


def _count(body: dict[str, Any], name: str, default: int, low: int, high: int, what: str) -> int:
    """``body[name]`` as an integer from ``low`` to ``high``; ``what`` says what it counts."""
    value = _field(body, name, int, default)
    if not low <= value <= high:
        raise bad_request(f"'{name}' must be {what} from {low} to {high}, not {value}")
    return value


def parse_edit_request(body: Any) -> EditRequest:
    """Validate a request body; every problem is one line naming the field: HTTP 400, or
    413 for text over the size limit."""
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object {document, instruction, mode, ...}")
    if not isinstance(body.get("document"), str):
        raise bad_request("'document' must be the text to edit")
    document = _text(body, "document") or ""
    mode = _field(body, "mode", str, "program")
    if mode not in MODES:
        raise bad_request(f"'mode' is {mode[:40]!r}; use one of {', '.join(MODES)}")
    program_text = _text(body, "program")
    instruction = _text(body, "instruction") or ""
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
    budget = _count(
        body, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS, 1, MAX_NEW_TOKENS, "a number of tokens"
    )
    temperature = _number(body, "temperature", 0.0)
    top_p = _number(body, "top_p", 1.0)
    if not 0 <= temperature <= MAX_TEMPERATURE or not 0 < top_p <= 1:
        raise bad_request(
            f"'temperature' must be from 0 to {MAX_TEMPERATURE:g} and 'top_p' in (0, 1], not "
            f"{temperature:g} and {top_p:g}"
        )
    seed = _count(body, "seed", 0, 0, MAX_SEED, "an integer")
    draft_budget = None
    if body.get("draft_budget") is not None:
        if program is None:
            raise bad_request(
                "'draft_budget' applies to a given 'program' only: free decoding through the "
                "engine takes one decision per forward; leave it out"
            )
        draft_budget = _count(body, "draft_budget", 0, 0, MAX_DRAFT_BUDGET, "a number of tokens")
    return EditRequest(
        document=document,
        instruction=instruction,
        mode=mode,
        lines=lines,
        program=program,
        max_new_tokens=budget,
        draft_budget=draft_budget,
        subline=_field(body, "subline", bool, False),
        sampling=Sampling(temperature, top_p, seed),
        model=_text(body, "model", MAX_NAME_BYTES) or None,
        adapter=_text(body, "adapter", MAX_NAME_BYTES) or None,
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
