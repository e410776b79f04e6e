"""A program edit as one streaming-input request of vLLM's ``AsyncLLM``.

Each :class:`~cad.engine.program_mode.Chunk` becomes a ``StreamingInput``: the scheduler
keeps the request's KV cache between chunks and prefills each new chunk in one forward. The
session ends when the front end closes its input stream; closing the output stream early
(cancellation, a client that went away) aborts the request in the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from vllm import SamplingParams
from vllm.engine.protocol import EngineClient, StreamingInput
from vllm.inputs import TokensPrompt
from vllm.sampling_params import RequestOutputKind

from cad.engine.program_mode import Chunk


class EngineAborted(RuntimeError):
    """The engine aborted the request (shut down, or preempted it beyond recovery)."""


class EngineSession:
    """A streaming-input session of one edit; use as an async context manager."""

    def __init__(
        self,
        engine: EngineClient,
        request_id: str,
        sampling: dict[str, Any],
        lora_request: Any = None,
    ) -> None:
        self.engine = engine
        self.request_id = request_id
        self.sampling = sampling
        self.lora_request = lora_request
        self._inputs: asyncio.Queue[StreamingInput | None] = asyncio.Queue()
        self._outputs: AsyncGenerator[Any, None] | None = None

    def params(self, chunk: Chunk) -> SamplingParams:
        """The chunk's sampling parameters: its length and stops, and the program spec that
        the logits processor masks with."""
        return SamplingParams(
            max_tokens=chunk.max_tokens,
            stop_token_ids=list(chunk.stop_token_ids),
            extra_args=chunk.spec.to_args(),
            output_kind=RequestOutputKind.DELTA,
            detokenize=False,
            skip_special_tokens=False,
            **self.sampling,
        )

    async def _stream(self) -> AsyncIterator[StreamingInput]:
        while (item := await self._inputs.get()) is not None:
            yield item

    async def run(self, chunk: Chunk) -> list[int]:
        """Prefill the chunk and sample; the sampled tokens, the one that stopped it last."""
        params = self.params(chunk)
        await self._inputs.put(
            StreamingInput(
                prompt=TokensPrompt(prompt_token_ids=chunk.tokens), sampling_params=params
            )
        )
        if self._outputs is None:
            self._outputs = self.engine.generate(
                self._stream(), params, self.request_id, lora_request=self.lora_request
            )
        sampled: list[int] = []
        async for output in self._outputs:
            completion = output.outputs[0]
            sampled.extend(completion.token_ids)
            if completion.finish_reason == "abort":
                raise EngineAborted("the engine aborted the edit")
            if completion.finish_reason is not None:
                return sampled
        raise EngineAborted("the engine ended the session before the edit was done")

    async def close(self) -> None:
        """End the session: finish the input stream and let the engine release the request."""
        if self._outputs is None:
            return
        await self._inputs.put(None)
        async for _ in self._outputs:
            pass
        self._outputs = None

    async def abort(self) -> None:
        """Abort the request in the engine (cancellation)."""
        outputs, self._outputs = self._outputs, None
        if outputs is not None:
            await outputs.aclose()

    async def __aenter__(self) -> EngineSession:
        return self

    async def __aexit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is None:
            await self.close()
        else:
            await self.abort()
