"""Edits through a shared engine: ``cad serve --engine URL`` (the ``engine`` setting).

The language server sends the region's text to the engine's ``POST /v1/cad/edit`` (a vLLM
server started with ``cad-engine``) and reads its streamed answer: progress lines, heartbeats
and the result. Everything around the decode stays in the language server: snapping, the
version check, minimal edits, progress and cancel. Cancelling closes the connection, which
aborts the edit in the engine. Every failure is one line that names the next step.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

EDIT_PATH = "/v1/cad/edit"
INFO_PATH = "/v1/cad/info"
QUIET_LIMIT_S = 60.0
START_HINT = "start it with cad-engine --model MODEL --port PORT, or fix cad.engine"


class EngineError(Exception):
    """The engine could not do the edit; the message is one line with the next step."""


class EngineBudgetSpent(EngineError):
    """The model used its whole token budget in the engine."""


class EngineContextTooLong(EngineError):
    """The region does not fit the engine model's context."""


@dataclass(frozen=True)
class RemoteProgress:
    """A progress line from the engine, shaped like ``cad.selector.Progress``."""

    ops: int
    lines_copied: int
    lines_generated: int
    tokens_generated: int


@dataclass(frozen=True)
class RemoteResult:
    """The engine's answer: the program (empty in rewrite mode), the new text, the stats."""

    program: str
    text: str
    stats: dict[str, Any]


def check_url(url: str) -> str:
    """``url`` without a trailing slash; :class:`EngineError` unless it is an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EngineError(
            f"cad.engine is {url!r}; set it to the engine's URL, e.g. http://127.0.0.1:8000"
        )
    return url.rstrip("/")


def engine_info(url: str, timeout: float = 10.0) -> dict[str, Any]:
    """``GET /v1/cad/info``: the model, adapters and modes the engine serves."""
    try:
        with urllib.request.urlopen(check_url(url) + INFO_PATH, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise _http_error(url, exc) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _unreachable(url, exc) from None


def remote_edit(
    url: str,
    region: str,
    instruction: str,
    *,
    mode: str,
    max_new_tokens: int,
    model: str | None = None,
    adapter: str | None = None,
    on_progress: Callable[[RemoteProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> RemoteResult | None:
    """Edit ``region`` in the engine at ``url``; ``None`` when ``cancel`` was set (the
    connection is closed, so the engine aborts the edit)."""
    body = {
        "document": region,
        "instruction": instruction,
        "mode": mode,
        "max_new_tokens": max_new_tokens,
        "stream": True,
    }
    if model is not None:
        body["model"] = model
    if adapter is not None:
        body["adapter"] = adapter
    request = urllib.request.Request(
        check_url(url) + EDIT_PATH,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Accept": "application/x-ndjson"},
    )
    try:
        response = urllib.request.urlopen(request, timeout=QUIET_LIMIT_S)
    except urllib.error.HTTPError as exc:
        raise _http_error(url, exc, model) from None
    except (urllib.error.URLError, OSError) as exc:
        raise _unreachable(url, exc) from None
    with response:
        while True:
            if cancel is not None and cancel.is_set():
                return None
            try:
                line = response.readline()
            except (OSError, http.client.HTTPException) as exc:
                raise _unreachable(url, exc, during=True) from None
            if not line:
                raise EngineError(
                    f"the engine at {url} closed the connection before the edit finished; "
                    "run the edit again (the engine log says why)"
                )
            item = json.loads(line)
            if "progress" in item and on_progress is not None:
                on_progress(RemoteProgress(**item["progress"]))
            elif "result" in item:
                result = item["result"]
                return RemoteResult(result["program"], result["text"], result["stats"])
            elif "error" in item:
                raise _edit_error(url, item["error"], model)


def _unreachable(url: str, exc: BaseException, during: bool = False) -> EngineError:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.timeout | TimeoutError):
        what = "stopped answering" if during else "did not answer"
        return EngineError(
            f"the engine at {url} {what} within {QUIET_LIMIT_S:.0f} s; check that it is "
            "running, or run the edit again"
        )
    detail = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return EngineError(f"cannot reach the engine at {url} ({detail}); {START_HINT}")


def _http_error(url: str, exc: urllib.error.HTTPError, model: str | None = None) -> EngineError:
    try:
        error = json.loads(exc.read()).get("error", {})
    except (ValueError, AttributeError, OSError):
        error = {}
    if not isinstance(error, dict) or "message" not in error:
        if exc.code == 404:
            return EngineError(
                f"{url} does not serve cad edits (HTTP 404 on {EDIT_PATH}); start the engine "
                "with cad-engine, which enables the cad routes"
            )
        return EngineError(f"the engine at {url} answered HTTP {exc.code} ({exc.reason})")
    return _edit_error(url, error, model)


def _edit_error(url: str, error: dict[str, Any], model: str | None) -> EngineError:
    code, message = error.get("code", ""), error.get("message", "")
    if code == "overloaded":
        return EngineError(f"the engine at {url} is overloaded: {message}")
    if code == "model_mismatch":
        return EngineError(
            f"the engine at {url} serves another model than cad.model {model!r} ({message}); set "
            "cad.model to the engine's model, or back to its default to use whatever it serves"
        )
    if code == "budget_spent":
        return EngineBudgetSpent(f"{message}; nothing was applied (raise cad.maxNewTokens)")
    if code == "context_too_long":
        return EngineContextTooLong(message)
    if code == "mode_unavailable":
        return EngineError(f"{message} (or set cad.mode to rewrite)")
    return EngineError(f"the engine at {url}: {message}")
