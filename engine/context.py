"""What an edit may put into the model's context, counted before anything reaches vLLM.

vLLM checks a plain request's prompt and ``max_tokens`` against ``--max-model-len``, but a
streaming-input session is checked one chunk at a time, while its KV cache holds every chunk
so far: a chunk that carries the session past the model's length breaks the engine core, and
with it every request on the engine. So the front end counts every token a session holds —
the prompt, each copy's text, the forced literals and the model's decisions — and refuses an
edit that cannot fit before it starts (``context_too_long``):

- any edit: a prompt that cannot hold the document (and, in program mode, a copy of it and
  :data:`MIN_DECISIONS` decisions); a lower bound from the text's length refuses a document
  far too large before it is tokenized;
- a forced program: the exact tokens following it appends (copied text, forced literals,
  decisions), after a bound on its output that never builds text beyond what could fit.

While decoding, :class:`ContextWindow` keeps every chunk within the room left: a model that
copies more than fits stops there, cleanly, instead of the engine failing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cad.grammar import ProgramTokenIndex
from cad.resolver import Document, Program, ProgramError, op_text
from cad.selector import ContextTooLongError
from cad.selector.tape import follow_program

MIN_DECISIONS = 16
"""The fewest decisions a program-mode edit starts with room for (the in-process rule)."""

NEXT_STEP = "edit a smaller range or use a longer-context model"


def too_long(needed: int, limit: int, parts: str, *, at_least: bool = False) -> ContextTooLongError:
    """The refusal for an edit that needs ``needed`` tokens (made of ``parts``) in a context of
    ``limit``."""
    amount = f"at least {needed}" if at_least else str(needed)
    return ContextTooLongError(
        f"the edit needs {amount} tokens ({parts}) but the model's context is {limit} tokens; "
        f"{NEXT_STEP}"
    )


def check_text_fits(characters: int, longest_token: int, limit: int) -> None:
    """Refuse, without tokenizing, text of ``characters`` characters that cannot fit: no token
    holds more than ``longest_token`` bytes, so the text is at least that many times fewer
    tokens than characters."""
    least = -(-characters // max(longest_token, 1))
    if least + MIN_DECISIONS > limit:
        raise too_long(least, limit, "the document and instruction alone", at_least=True)


def decision_budget(limit: int, prompt: int, document: int, wanted: int) -> int:
    """The decisions a program-mode edit may spend: ``wanted``, capped by the room left after
    the prompt and a copy of the whole document (``document`` tokens)."""
    room = limit - prompt - document
    if room < MIN_DECISIONS:
        parts = f"a prompt of {prompt}, a copy of the range {document}, {MIN_DECISIONS} decisions"
        raise too_long(prompt + document + MIN_DECISIONS, limit, parts)
    return min(wanted, room)


def program_output_bound(program: Program, document: Document, limit: int) -> int:
    """The characters ``program`` writes, counted op by op and stopping once past ``limit``
    (the result is then over it): a program that copies a large document many times is
    measured without ever building its output. Raises :class:`ProgramError` for an op out of
    the document's range."""
    total = 0
    for position, op in enumerate(program.ops):
        total += len(op_text(op, document, position))
        if total > limit:
            break
    return total


def check_program_fits(
    index: ProgramTokenIndex,
    encode: Callable[[str], list[int]],
    document: Document,
    program: Program,
    *,
    prompt: int,
    limit: int,
    subline: bool,
) -> None:
    """Refuse a forced program whose session cannot fit ``limit`` tokens after a prompt of
    ``prompt``: first by a bound on its output (no token holds more than the longest token's
    bytes), then exactly, by following it as the engine will."""
    longest = max(index.vocabulary.longest_token, 1)
    room = limit - prompt
    written = program_output_bound(program, document, room * longest)
    if written > room * longest:
        least = prompt + -(-written // longest)
        parts = f"a prompt of {prompt} and the program's output of over {written} characters"
        raise too_long(least, limit, parts, at_least=True)
    try:
        tape = follow_program(index, encode, document, program, subline=subline)
    except RuntimeError as exc:
        raise ProgramError(f"{exc} with this model's tokens") from None
    if prompt + len(tape.tokens) > limit:
        stats = tape.stats
        parts = (
            f"a prompt of {prompt}, {stats.copied_tokens} copied, {stats.forced_tokens} forced, "
            f"{stats.generated_tokens} decided"
        )
        raise too_long(prompt + len(tape.tokens), limit, parts)


@dataclass
class ContextWindow:
    """The tokens a streaming-input session holds in the engine, against the model's length.

    vLLM keeps every chunk's tokens and each chunk's sampled tokens but the last (the next
    chunk starts with that one); a chunk fits when what the session holds, the chunk and the
    most it may sample stay within ``limit``."""

    limit: int
    held: int = 0

    def room(self, chunk: int) -> int:
        """The most tokens a chunk of ``chunk`` tokens may sample (below 1: it cannot run)."""
        return self.limit - self.held - chunk

    def add(self, chunk: int, sampled: int) -> None:
        """Count a chunk of ``chunk`` tokens that sampled ``sampled``."""
        self.held += chunk + sampled - 1
