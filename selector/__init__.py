"""Model runtime: loading, prompts, constrained program decoding, parallel-prefill copies, and
rewrite mode with calibrated draft graphs (``selector.rewrite``)."""

from selector.baselines import prompt_lookup, regenerate
from selector.decoder import Decoder, decode_forced
from selector.draft_config import DraftConfig, DraftConfigError, load_draft_config
from selector.errors import Cancelled, ContextTooLongError, ModelLoadError
from selector.generate import generate_constrained
from selector.loading import DEFAULT_MODEL, LoadedModel, load_model
from selector.sampling import Sampling
from selector.stats import DecodeResult, DecodeStats, Progress
from selector.tape import ProgramTape, follow_program

__all__ = [
    "DEFAULT_MODEL",
    "Cancelled",
    "ContextTooLongError",
    "DecodeResult",
    "DecodeStats",
    "Decoder",
    "DraftConfig",
    "DraftConfigError",
    "LoadedModel",
    "ModelLoadError",
    "ProgramTape",
    "Progress",
    "Sampling",
    "decode_forced",
    "follow_program",
    "generate_constrained",
    "load_draft_config",
    "load_model",
    "prompt_lookup",
    "regenerate",
]
