"""Model runtime: loading, prompts, constrained program decoding, parallel-prefill copies, and
rewrite mode with calibrated draft graphs (``cad.selector.rewrite``)."""

from cad.selector.baselines import prompt_lookup, regenerate
from cad.selector.decoder import Decoder, decode_forced
from cad.selector.draft_config import DraftConfig, DraftConfigError, load_draft_config
from cad.selector.errors import Cancelled, ContextTooLongError, ModelLoadError
from cad.selector.generate import generate_constrained
from cad.selector.loading import DEFAULT_MODEL, LoadedModel, load_model
from cad.selector.multi_decoder import MultiDecoder, MultiDecodeResult
from cad.selector.multi_tape import MultiProgramTape, follow_multi_program
from cad.selector.sampling import Sampling
from cad.selector.stats import DecodeResult, DecodeStats, Progress
from cad.selector.tape import ProgramTape, follow_program

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
    "MultiDecodeResult",
    "MultiDecoder",
    "MultiProgramTape",
    "ProgramTape",
    "Progress",
    "Sampling",
    "decode_forced",
    "follow_multi_program",
    "follow_program",
    "generate_constrained",
    "load_draft_config",
    "load_model",
    "prompt_lookup",
    "regenerate",
]
