"""Rewrite mode in the engine: the model writes the new text of the region, and vLLM's
speculative decoding drafts it from the prompt, which holds the document (``ngram``: prompt
lookup; ``suffix``: suffix trees over the prompt and the output so far). vLLM's rejection
sampling keeps the output exactly what plain decoding would write; an engine started without
speculative decoding still answers, one token per forward.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from vllm import SamplingParams
from vllm.engine.protocol import EngineClient
from vllm.inputs import TokensPrompt
from vllm.sampling_params import RequestOutputKind

from cad.engine.context import MIN_DECISIONS, check_text_fits, too_long
from cad.engine.program_mode import EditTokenizer, sampling_options
from cad.engine.protocol import EditRequest, splice
from cad.resolver import Document
from cad.selector import DecodeResult, DecodeStats, Progress
from cad.selector.prompt import rewrite_prompt
from cad.selector.rewrite import extract_file

ProgressCallback = Callable[[Progress], None]


async def decode_rewrite(
    tokens: EditTokenizer,
    engine: EngineClient,
    request: EditRequest,
    request_id: str,
    *,
    lora_request: Any = None,
    on_progress: ProgressCallback | None = None,
) -> DecodeResult:
    """Rewrite the request's range (or the whole document); the result is the whole new
    document (the range's final line break kept, as :func:`~cad.engine.protocol.splice` says). ``stats.forwards`` counts engine steps after the prompt's, each of which may
    accept several drafted tokens."""
    start = time.perf_counter()
    before, part, after = await asyncio.to_thread(request.region)
    prompt, room = await asyncio.to_thread(rewrite_room, tokens, request)
    params = SamplingParams(
        max_tokens=min(request.max_new_tokens, room),
        output_kind=RequestOutputKind.DELTA,
        detokenize=False,
        **sampling_options(request.sampling),
    )
    stats = DecodeStats(mode="rewrite", prefill_tokens=len(prompt))
    output: list[int] = []
    steps = lines = 0
    finish = stop_reason = None
    async for result in engine.generate(
        TokensPrompt(prompt_token_ids=prompt), params, request_id, lora_request=lora_request
    ):
        completion = result.outputs[0]
        if completion.token_ids:
            if steps == 0:
                stats.prefill_s = time.perf_counter() - start
            steps += 1
            output.extend(completion.token_ids)
            lines += _decode(tokens, list(completion.token_ids)).count("\n")
        finish, stop_reason = completion.finish_reason, completion.stop_reason
        if on_progress is not None:
            on_progress(Progress(max(steps - 1, 0), 0, lines, len(output)))
    if finish == "abort":
        raise RuntimeError("the engine aborted the edit")
    if finish == "stop" and stop_reason is None and output:
        output.pop()  # the end-of-sequence token
    stats.truncated = finish == "length"
    stats.generated_tokens = len(output)
    stats.forwards = max(steps - 1, 0)
    final_newline = part.endswith(("\n", "\r")) or not part
    text = await asyncio.to_thread(_reply, tokens, output, final_newline)
    stats.lines_generated = text.count("\n")
    stats.wall_s = time.perf_counter() - start
    stats.decode_s = stats.wall_s - stats.prefill_s
    return DecodeResult(None, splice(before, part, text, after), stats)


def rewrite_room(tokens: EditTokenizer, request: EditRequest) -> tuple[list[int], int]:
    """The rewrite prompt and the most tokens the reply may take in the model's context;
    refused with ``ContextTooLongError`` when the prompt leaves less than
    :data:`~cad.engine.context.MIN_DECISIONS`. Tokenizes the document: the caller runs it
    off the event loop."""
    limit = tokens.context_length
    check_text_fits(len(request.document) + len(request.instruction), tokens.longest_token, limit)
    prompt = rewrite_prompt(
        tokens.tokenizer, Document(request.document), request.instruction, request.lines
    )
    room = limit - len(prompt)
    if room < MIN_DECISIONS:
        needed = len(prompt) + MIN_DECISIONS
        raise too_long(needed, limit, f"a prompt of {len(prompt)}, {MIN_DECISIONS} to reply")
    return prompt, room


def _reply(tokens: EditTokenizer, output: list[int], final_newline: bool) -> str:
    """The new text of the range in the model's reply."""
    return extract_file(_decode(tokens, output), final_newline)


def _decode(tokens: EditTokenizer, ids: list[int]) -> str:
    return tokens.tokenizer.decode(ids, clean_up_tokenization_spaces=False)
