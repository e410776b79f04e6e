"""The edit service inside vLLM's API server: checks a request against the engine, runs it in
program or rewrite mode, and keeps the count of running edits.

One :class:`EditService` per API server, built by the endpoint plugin when the server starts.
Every edit is one vLLM request (a streaming-input session in program mode), so edits from
many clients batch in the engine like any other requests.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm.engine.protocol import EngineClient
from vllm.exceptions import VLLMClientError

from cad.engine.launcher import MAX_EDITS_VARIABLE, PROCESSOR
from cad.engine.program_mode import (
    EditTokenizer,
    EngineProtocolError,
    decode_program,
    sampling_options,
)
from cad.engine.protocol import EditError, EditRequest, bad_request, splice
from cad.engine.rewrite_mode import decode_rewrite
from cad.engine.session import EngineAborted, EngineSession
from cad.resolver import ProgramError, format_program
from cad.selector import (
    ContextTooLongError,
    DecodeResult,
    DraftConfig,
    Progress,
    load_draft_config,
)

ProgressCallback = Callable[[Progress], None]


def processor_loaded(logits_processors: Any) -> bool:
    """Whether the engine's ``--logits-processors`` hold the program processor."""
    from cad.engine.processor import ProgramLogitsProcessor

    return any(
        entry == PROCESSOR or entry is ProgramLogitsProcessor for entry in logits_processors or ()
    )


@dataclass
class EditService:
    """Everything the ``/v1/cad`` routes need: the engine, the tokenizer tables, the models
    and adapters it serves, why it cannot run program mode (``None``: it can), its
    speculative method, the edit limit, and the draft configuration given programs are
    followed with (the shipped one for the engine's device, as ``cad edit`` there uses)."""

    engine: EngineClient
    tokens: EditTokenizer
    models: tuple[str, ...]
    serving_models: Any
    program_refusal: str | None
    speculative: str | None
    max_edits: int
    draft_config: DraftConfig
    running: int = 0

    @classmethod
    async def start(cls, engine: EngineClient, state: Any) -> EditService:
        """Build the service for the API server's engine (tokenizer tables in a thread)."""
        from transformers import AutoTokenizer

        from cad.grammar import ProgramTokenIndex

        config = engine.vllm_config
        model_config = config.model_config

        def tables() -> EditTokenizer:
            tokenizer = AutoTokenizer.from_pretrained(
                model_config.tokenizer,
                revision=model_config.tokenizer_revision,
                trust_remote_code=model_config.trust_remote_code,
            )
            index = ProgramTokenIndex.for_tokenizer(tokenizer, model_config.get_vocab_size())
            return EditTokenizer(tokenizer, index, model_config.max_model_len)

        speculative = config.speculative_config
        method = getattr(speculative, "method", None) if speculative is not None else None
        refusal = None
        if speculative is not None:
            refusal = (
                f"this engine runs speculative decoding ({method}) for rewrite mode, and vLLM "
                "cannot combine it with the program logits processor; program mode needs an "
                "engine started with cad-engine and no --speculative-config"
            )
        elif not processor_loaded(model_config.logits_processors):
            refusal = (
                "this engine runs without the program logits processor; start it with "
                "cad-engine (or pass --logits-processors " + PROCESSOR + ")"
            )
        serving_models = state.openai_serving_models
        names = tuple(path.name for path in serving_models.base_model_paths)
        limit = int(os.environ.get(MAX_EDITS_VARIABLE, "0") or 0)
        return cls(
            engine=engine,
            tokens=await asyncio.to_thread(tables),
            models=names,
            serving_models=serving_models,
            program_refusal=refusal,
            speculative=method,
            max_edits=limit if limit > 0 else 4 * config.scheduler_config.max_num_seqs,
            draft_config=load_draft_config(
                device="cpu" if config.device_config.device_type == "cpu" else None
            ),
        )

    def info(self) -> dict[str, Any]:
        """``GET /v1/cad/info``: what this engine serves and how busy it is."""
        return {
            "model": self.models[0],
            "models": list(self.models),
            "adapters": sorted(self.serving_models.lora_requests),
            "modes": ["program", "rewrite"] if self.program_refusal is None else ["rewrite"],
            "speculative": self.speculative,
            "max_model_len": self.tokens.context_length,
            "max_edits": self.max_edits,
            "running_edits": self.running,
        }

    def check_capacity(self) -> None:
        """Refuse (503 ``overloaded``) while ``max_edits`` edits run: checked before a body is
        read, and again when the edit is admitted."""
        if self.running >= self.max_edits:
            raise EditError(
                503,
                "overloaded",
                f"the engine is running its limit of {self.max_edits} edits; try again in a "
                "few seconds (the operator can raise the limit: cad-engine --max-edits N)",
            )

    def admit(self, request: EditRequest) -> Any:
        """Check the request against this engine before it starts; the LoRA request of its
        adapter (``None``: the base model). Raises :class:`EditError`."""
        self.check_capacity()
        if request.mode == "program" and self.program_refusal is not None:
            raise bad_request(self.program_refusal, "mode_unavailable")
        if request.model is not None and not self._serves(request.model):
            raise EditError(
                400,
                "model_mismatch",
                f"this engine serves {self.models[0]!r}, not {request.model!r}; ask for "
                f"{self.models[0]!r} or leave the model out",
            )
        return self._lora(request.adapter)

    def _serves(self, model: str) -> bool:
        wanted = model.rstrip("/")
        paths = {p.model_path.rstrip("/") for p in self.serving_models.base_model_paths}
        return wanted in self.models or wanted in paths or _same_folder(wanted, paths)

    def _lora(self, adapter: str | None) -> Any:
        if adapter is None:
            return None
        loras = self.serving_models.lora_requests
        if adapter in loras:
            return loras[adapter]
        for lora in loras.values():
            if _same_folder(adapter, {lora.lora_path}):
                return lora
        served = ", ".join(sorted(loras)) or "none"
        raise bad_request(
            f"this engine serves no adapter {adapter!r} (it serves: {served}); start it with "
            "--enable-lora --lora-modules NAME=PATH, or leave the adapter out",
            "unknown_adapter",
        )

    async def edit(
        self, request: EditRequest, lora: Any, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Run one admitted edit; the result object ``{program, text, stats}``."""
        self.running += 1
        request_id = f"cad-{uuid.uuid4().hex}"
        try:
            result = await self._run(request, request_id, lora, on_progress)
        except ContextTooLongError as exc:
            raise bad_request(str(exc), "context_too_long") from None
        except ProgramError as exc:
            raise bad_request(f"{exc}; fix the program", "invalid_program") from None
        except VLLMClientError as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise bad_request(f"vLLM refused the edit ({first}); change that value") from None
        except EngineProtocolError as exc:
            raise EditError(500, "engine_protocol", str(exc)) from None
        except EngineAborted as exc:
            raise EditError(503, "aborted", f"{exc}; run the edit again") from None
        finally:
            self.running -= 1
        program = format_program(result.program) if result.program is not None else ""
        if result.stats.truncated:
            raise EditError(422, "budget_spent", self._spent(request, result), {"program": program})
        return {
            "program": program,
            "text": result.text,
            "stats": {**result.stats.to_dict(), "mode": request.mode},
        }

    def _spent(self, request: EditRequest, result: DecodeResult) -> str:
        """Why an edit stopped before it finished: its token budget, or the model's context."""
        if result.stats.generated_tokens >= request.max_new_tokens:
            return (
                f"the model used its whole budget of {request.max_new_tokens} tokens without "
                "finishing; nothing to apply (raise max_new_tokens or edit a smaller range)"
            )
        return (
            f"the edit filled the model's context of {self.tokens.context_length} tokens "
            "before the model finished; nothing to apply (edit a smaller range or use a "
            "longer-context model)"
        )

    async def _run(
        self,
        request: EditRequest,
        request_id: str,
        lora: Any,
        on_progress: ProgressCallback | None,
    ) -> DecodeResult:
        if request.mode == "rewrite":
            return await decode_rewrite(
                self.tokens,
                self.engine,
                request,
                request_id,
                lora_request=lora,
                on_progress=on_progress,
            )
        before, part, after = await asyncio.to_thread(request.region)
        async with EngineSession(
            self.engine, request_id, sampling_options(request.sampling), lora
        ) as session:
            result = await decode_program(
                self.tokens,
                session,
                part,
                request.instruction,
                program=request.program,
                subline=request.subline,
                max_new_tokens=request.max_new_tokens,
                config=self.draft_config,
                draft_budget=request.draft_budget,
                on_progress=on_progress,
                edit_id=request_id,
            )
        return DecodeResult(result.program, splice(before, part, result.text, after), result.stats)


def _same_folder(path: str, candidates: set[str]) -> bool:
    """Whether ``path`` names one of ``candidates`` as a folder on this machine."""
    try:
        resolved = Path(path).expanduser().resolve()
        return any(resolved == Path(c).expanduser().resolve() for c in candidates)
    except (OSError, RuntimeError, ValueError):  # unreadable, looping or not a path at all
        return False
