"""The ``/v1/cad`` routes as a vLLM endpoint plugin (entry point ``vllm.endpoint_plugins``,
name ``cad``; vLLM loads it when ``VLLM_PLUGINS`` names it, which ``cad-engine`` sets).

``POST /v1/cad/edit`` runs one edit (see :mod:`cad.engine.protocol`); ``GET /v1/cad/info``
says what the engine serves. A client that goes away aborts its edit in the engine: a
streamed answer notices on its next line (heartbeats every half second), a plain answer by
polling the connection.

Every request is bounded before it costs anything (:mod:`cad.engine.body`): a full engine is
refused before its body is read, the body is read in chunks up to a size limit, and decoding
and checking it, like every other CPU-heavy step of an edit, runs in a thread, so one large
request never stalls the event loop that answers the others and vLLM's own heartbeats.
"""

from __future__ import annotations

import asyncio
import json
import time
from argparse import Namespace
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import State
from starlette.requests import ClientDisconnect
from vllm.logger import init_logger

from cad.engine.body import decode_body, read_body
from cad.engine.protocol import EditError, EditRequest, ndjson, parse_edit_request
from cad.engine.service import EditService
from cad.selector import Progress

log = init_logger("vllm.cad")
HEARTBEAT_S = 0.5
router = APIRouter()


class CadEndpoints:
    """The endpoint plugin: vLLM calls ``attach_router`` while building the app and
    ``init_state`` once the engine is up."""

    name = "cad"
    required_tasks = ("generate",)

    def attach_router(self, app: FastAPI) -> None:
        """Add the ``/v1/cad`` routes."""
        app.include_router(router)

    async def init_state(self, engine_client: Any, state: State, args: Namespace) -> None:
        """Build the edit service for the engine (the tokenizer's program tables)."""
        if engine_client is None:
            return
        state.cad = await EditService.start(engine_client, state)
        log.info("cad: edit routes ready (%s)", json.dumps(state.cad.info()))


def _service(request: Request) -> EditService:
    service = getattr(request.app.state, "cad", None)
    if service is None:
        raise EditError(503, "starting", "the engine is still starting; try again in a moment")
    return service


def _error(error: EditError) -> JSONResponse:
    headers = {"Retry-After": "2"} if error.status == 503 else None
    return JSONResponse(error.to_json(), status_code=error.status, headers=headers)


@router.get("/v1/cad/info")
async def cad_info(request: Request) -> Response:
    """What this engine serves: model, adapters, modes, limits, running edits."""
    try:
        return JSONResponse(_service(request).info())
    except EditError as error:
        return _error(error)


@router.post("/v1/cad/edit")
async def cad_edit(request: Request) -> Response:
    """Run one edit: ``{program, text, stats}``, or NDJSON progress lines and a final result
    with ``"stream": true``."""
    try:
        service = _service(request)
        service.check_capacity()
        body = await read_body(request.stream(), request.headers.get("content-length"))
        edit = await asyncio.to_thread(_parse, body)
        lora = service.admit(edit)
    except EditError as error:
        return _error(error)
    except ClientDisconnect:
        return Response(status_code=499)
    except Exception as exc:  # the server answers every request, whatever a body holds
        log.exception("cad edit refused")
        return _error(_internal(exc))
    if edit.stream:
        return StreamingResponse(_streamed(service, edit, lora), media_type="application/x-ndjson")
    task = asyncio.create_task(service.edit(edit, lora))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=HEARTBEAT_S)
            if not task.done() and await request.is_disconnected():
                task.cancel()
                return Response(status_code=499)
        content = await asyncio.to_thread(_json, task.result())
        return Response(content, media_type="application/json")
    except EditError as error:
        return _error(error)
    except Exception as exc:  # the server answers every request, whatever an edit throws
        log.exception("cad edit failed")
        return _error(_internal(exc))
    finally:
        task.cancel()


def _parse(body: bytes) -> EditRequest:
    """The edit a body asks for (run in a thread: a body may hold megabytes of text)."""
    return parse_edit_request(decode_body(body))


def _json(result: dict[str, Any]) -> bytes:
    """A result as the JSON answer (run in a thread: the text may be megabytes)."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _streamed(service: EditService, edit: EditRequest, lora: Any) -> AsyncIterator[bytes]:
    """Progress lines while the edit runs (when an op completes, every 32 tokens, and at least
    every half second), a heartbeat in each quiet half second, then the result or the error.
    Closing this stream (the client left) cancels the edit."""
    events: asyncio.Queue[Progress] = asyncio.Queue()
    task = asyncio.create_task(service.edit(edit, lora, events.put_nowait))
    shown: Progress | None = None
    last = time.monotonic()
    try:
        while not task.done():
            getter = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait(
                {task, getter}, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED
            )
            if getter not in done:
                getter.cancel()
                if not done:
                    last = time.monotonic()
                    yield ndjson({"heartbeat": True})
                continue
            progress = getter.result()
            if _worth_showing(progress, shown) or time.monotonic() - last >= HEARTBEAT_S:
                shown, last = progress, time.monotonic()
                yield ndjson({"progress": _progress(progress)})
        try:
            yield await asyncio.to_thread(ndjson, {"result": task.result()})
        except EditError as error:
            yield ndjson(error.to_json())
        except Exception as exc:
            log.exception("cad edit failed")
            yield ndjson(_internal(exc).to_json())
    finally:
        task.cancel()


def _worth_showing(progress: Progress, shown: Progress | None) -> bool:
    """A new op, or 32 more tokens, since the progress last sent."""
    return (
        shown is None
        or progress.ops != shown.ops
        or progress.tokens_generated - shown.tokens_generated >= 32
    )


def _progress(progress: Progress) -> dict[str, int]:
    return {
        "ops": progress.ops,
        "lines_copied": progress.lines_copied,
        "lines_generated": progress.lines_generated,
        "tokens_generated": progress.tokens_generated,
    }


def _internal(exc: Exception) -> EditError:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return EditError(
        500,
        "internal",
        f"the edit failed in the engine ({type(exc).__name__}: {first}); the engine log has "
        "the details",
    )
