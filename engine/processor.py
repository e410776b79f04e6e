"""The program FSM as a vLLM logits processor.

vLLM builds one instance per model runner (``--logits-processors
cad.engine.processor:ProgramLogitsProcessor``, which ``cad-engine`` passes) and calls
``update_state`` with the batch's changes before each step and ``apply`` on the step's
logits. Requests that carry a :class:`~cad.engine.wire.ProgramSpec` in
``SamplingParams.extra_args`` are masked by their program FSM; every other request passes
through untouched, so the same engine serves plain completions too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

from cad.engine.masking import BatchMasks
from cad.engine.wire import ProgramSpec

if TYPE_CHECKING:
    from vllm.config import VllmConfig

PARKED_MIRRORS = 1024


class ProgramLogitsProcessor(LogitsProcessor):
    """Masks each program edit's next token with its program FSM (packed bitmask path)."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Refuse a malformed program spec when the request arrives (HTTP 400), not mid-step."""
        ProgramSpec.from_args(sampling_params.extra_args)

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        model_config = vllm_config.model_config
        vocab_size = model_config.get_vocab_size()
        tokenizer_path = model_config.tokenizer
        revision = model_config.tokenizer_revision
        trust_remote_code = model_config.trust_remote_code

        def build_index():  # type: ignore[no-untyped-def]
            from transformers import AutoTokenizer

            from cad.grammar import ProgramTokenIndex

            tokenizer = AutoTokenizer.from_pretrained(
                tokenizer_path, revision=revision, trust_remote_code=trust_remote_code
            )
            return ProgramTokenIndex.for_tokenizer(tokenizer, vocab_size)

        self.masks = BatchMasks(
            build_index,
            vllm_config.scheduler_config.max_num_seqs,
            parked=PARKED_MIRRORS,
        )
        self.masks.prepare()

    def is_argmax_invariant(self) -> bool:
        """Masking changes the argmax: always applied, greedy requests included."""
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow the batch: removed rows first, then added, then moved (vLLM's order)."""
        if not batch_update:
            return
        for row in batch_update.removed:
            self.masks.remove(row)
        for row, params, _prompt, outputs in batch_update.added:
            spec = ProgramSpec.from_args(params.extra_args) if params is not None else None
            self.masks.add(row, spec, outputs)
        for source, destination, direction in batch_update.moved:
            self.masks.move(source, destination, direction == MoveDirectionality.SWAP)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask the program rows of the step's logits."""
        return self.masks.apply(logits)
