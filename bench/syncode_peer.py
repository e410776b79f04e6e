"""SynCode beside the Python grammar: the same prefixes, one process, one thread.

SynCode (PyPI ``syncode``) constrains generation by its own Lark grammar of Python: an
incremental LALR parser over the text so far, a DFA mask store built offline per tokenizer,
grammar and mode, and indentation constraints at line starts. For every prefix of the
HEvalFix-Py after-files (token by token, the end-of-sequence token last) both engines run
interleaved, timed on the thread CPU clock:

* ours: fill the packed bitmask (the token is accepted afterwards, timed apart), masks built
  on first use as in a real decode; then a second pass alone, every mask built (SynCode
  builds all of its store ahead, offline);
* SynCode: what its logits processor does per step before it masks the scores: decode the
  prefix, parse it incrementally, look the mask up.

Agreement: at every prefix, whether each engine allows the gold next token (the after-files
parse, so refusing one is a false rejection); at sampled prefixes, the allowed sets
compared, with examples of tokens one engine allows and the other forbids. Each example is
judged by the interpreter: a *witness* is a short suffix after which ``ast.parse`` accepts
the prefix plus the token, and proves the token viable; without one the token is most likely
not viable (the search is bounded, so this is not a proof).

SynCode's mask store takes minutes to build the first time and is cached under
``$SYNCODE_CACHE`` (default ``~/.cache/syncode/``); nothing is downloaded (Hugging Face
stays offline). SynCode pins transformers 4.x and an unpinned torch, so it is installed
beside the project without its dependencies (docs/syntax.md).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from itertools import product
from pathlib import Path
from typing import Any, Protocol

import torch

from bench.syntax import RUNNING, percentile, python_parses
from cad.grammar import allocate_token_bitmask, unpack_bitmask
from cad.grammar.syntax import SyntaxMatcher
from cad.grammar.syntax.languages import PythonMachine
from cad.grammar.syntax.machine import DEAD
from cad.grammar.syntax.python_syntax import PythonSyntax, python_syntax
from cad.grammar.vocab import Vocabulary

MODES = ("grammar_mask", "grammar_strict")
CACHE = Path.home() / ".cache" / "syncode"
_PIECES = (
    "\n", ")", "]", "}", "'", '"', "'''", '"""', "0", " 0", "x", ":", ",", " pass",
    "\n    pass", " in x", " else 0", "=0", " import x", "(", " x", ":\n    pass",
)  # fmt: skip
"""Suffix pieces a witness is made of."""
_GOLD_KEYS = {
    (True, True): "both", (True, False): "ours_only", (False, True): "syncode_only",
    (False, False): "neither",
}  # fmt: skip


def syncode_missing() -> str | None:
    """Why the SynCode arm cannot run here (None when it can)."""
    try:
        import syncode  # noqa: F401
    except ImportError as error:
        return f"syncode is not installed ({error}); docs/syntax.md says how to install it"
    return None


class SyncodeMasks:
    """SynCode's Python constraint for one tokenizer, driven prefix by prefix."""

    def __init__(self, tokenizer: Any, mode: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import syncode.common
        from syncode import Grammar
        from syncode.grammar_mask.grammar_constrainer import GrammarConstrainer
        from syncode.mask_store.byte_tokenizer import ByteTokenizer

        # SynCode reads its cache folder once, at import, defaulting to the working directory
        syncode.common.SYNCODE_CACHE = os.path.join(os.environ.get("SYNCODE_CACHE") or CACHE, "")
        self.engine = GrammarConstrainer(
            grammar=Grammar("python"), tokenizer=tokenizer,
            byte_tokenizer=ByteTokenizer(tokenizer), use_cache=True, parse_output_only=False,
            batch_size=1, parser="lalr", mode=mode, indent=True,
        )  # fmt: skip

    def reset(self) -> None:
        """Start a new file (SynCode's parser caches the file read so far)."""
        self.engine.reset()

    def allowed(self, ids: list[int]) -> torch.Tensor | None:
        """The tokens SynCode allows after ``ids`` (bool, its vocabulary's width), or None
        where its parser fails on the prefix (it then leaves the step unconstrained)."""
        engine = self.engine
        input_ids = torch.tensor([ids], dtype=torch.long).reshape(1, len(ids))
        engine._set_start_from(input_ids)
        partial, remainder = engine._get_partial_outputs(input_ids)[0]
        result, failed = engine._parse_partial_output(0, partial, remainder, True)
        if failed:
            return None
        return engine.dfa_mask_store.get_accept_mask(result)


def witness(text: str, syntax: PythonSyntax, depth: int = 3) -> str | None:
    """A suffix of at most ``depth`` pieces after which ``ast.parse`` accepts ``text``,
    searched along the suffixes that keep the text a viable prefix of our grammar (cheap),
    or None if there is none among them."""
    start = syntax.feed(syntax.initial, text.encode())
    if start == DEAD or not syntax.is_viable(start):
        return None
    frontier = [("", start)]
    for _ in range(depth + 1):
        following: list[tuple[str, int]] = []
        for suffix, state in frontier:
            if python_parses(text + suffix):
                return suffix
            for piece in _PIECES:
                after = syntax.feed(state, piece.encode())
                if after != DEAD and syntax.is_viable(after):
                    following.append((suffix + piece, after))
        frontier = following[:4000]
    return None


def any_witness(text: str) -> str | None:
    """A suffix of at most two pieces after which ``ast.parse`` accepts ``text``, every
    combination tried (for tokens our grammar forbids, so it cannot guide the search)."""
    for count in range(3):
        for parts in product(_PIECES, repeat=count):
            if python_parses(text + "".join(parts)):
                return "".join(parts)
    return None


class Peer(Protocol):
    """What :func:`side_by_side` needs of the other engine (:class:`SyncodeMasks`)."""

    def reset(self) -> None: ...

    def allowed(self, ids: list[int]) -> torch.Tensor | None: ...


def side_by_side(
    vocabulary: Vocabulary,
    streams: list[list[int]],
    peer: Peer,
    samples_per_file: int,
    examples: int,
    log: Callable[[str], None],
    seed: int = 0,
) -> dict[str, Any]:
    """Mask time and agreement of ``peer`` and the Python grammar on every prefix of
    ``streams`` (token ids of whole files, see the module docstring)."""
    began = time.perf_counter()
    ours = PythonMachine(python_syntax(RUNNING), vocabulary)
    setup_s = time.perf_counter() - began
    syntax = python_syntax(RUNNING)
    rng = random.Random(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    fills: list[float] = []
    accepts: list[float] = []
    peer_times: list[float] = []
    gold = {"both": 0, "ours_only": 0, "syncode_only": 0, "neither": 0}
    gold_examples: list[dict[str, Any]] = []
    unconstrained = 0
    sets = {"prefixes": 0, "ours_allowed": 0, "syncode_allowed": 0, "only_ours": 0,
            "only_syncode": 0}  # fmt: skip
    set_examples: list[dict[str, Any]] = []
    try:
        for number, ids in enumerate(streams):
            matcher = SyntaxMatcher(ours)
            bitmask = allocate_token_bitmask(1, ours.vocab_size)
            peer.reset()
            sampled = set(rng.sample(range(len(ids)), min(samples_per_file, len(ids))))
            data, offset = b"".join(vocabulary.token_bytes[t] or b"" for t in ids), 0
            for position, token in enumerate(ids):
                clock = time.thread_time_ns()
                matcher.fill_next_token_bitmask(bitmask)
                fills.append((time.thread_time_ns() - clock) / 1e3)
                ours_ok = bool(int(bitmask[0, token >> 5]) >> (token & 31) & 1)
                clock = time.thread_time_ns()
                theirs = peer.allowed(ids[:position])
                peer_times.append((time.thread_time_ns() - clock) / 1e3)
                if theirs is None:
                    unconstrained += 1
                theirs_ok = theirs is None or (token < len(theirs) and bool(theirs[token]))
                gold[_GOLD_KEYS[ours_ok, theirs_ok]] += 1
                prefix = data[:offset]
                offset += len(vocabulary.token_bytes[token] or b"")
                if not (ours_ok and theirs_ok) and len(gold_examples) < examples:
                    gold_examples.append(
                        {
                            "file": number,
                            "position": position,
                            "tail": prefix[-60:].decode("utf-8", "replace"),
                            "token": _shown(vocabulary, token),
                            "ours": ours_ok,
                            "syncode": theirs_ok,
                        }
                    )
                if position in sampled and theirs is not None:
                    shown = prefix.decode("utf-8", "replace")
                    _compare(
                        vocabulary, syntax, bitmask, theirs, shown, sets, set_examples, examples
                    )
                clock = time.thread_time_ns()
                accepted = matcher.accept_token(token)
                accepts.append((time.thread_time_ns() - clock) / 1e3)
                if not accepted:
                    break
            log(f"  side by side: file {number + 1}/{len(streams)}")
        warm = _warm_fills(ours, streams)
    finally:
        torch.set_num_threads(threads)
    both = [f + a for f, a in zip(fills, accepts, strict=False)]
    return {
        "files": len(streams), "tokens": len(fills), "setup_s": setup_s,
        "ours": {"fill_p50_us": percentile(fills, 0.5), "fill_p99_us": percentile(fills, 0.99),
                 "fill_accept_p50_us": percentile(both, 0.5),
                 "fill_accept_p99_us": percentile(both, 0.99),
                 "warm_fill_p50_us": percentile(warm, 0.5),
                 "warm_fill_p99_us": percentile(warm, 0.99)},
        "syncode": {"mask_p50_us": percentile(peer_times, 0.5),
                    "mask_p99_us": percentile(peer_times, 0.99),
                    "unconstrained_steps": unconstrained},
        "gold": {**gold, "examples": gold_examples},
        "sets": {**sets, "examples": set_examples},
    }  # fmt: skip


def _warm_fills(ours: PythonMachine, streams: list[list[int]]) -> list[float]:
    """Our fill times on a second pass over ``streams``, every mask built (µs)."""
    times: list[float] = []
    bitmask = allocate_token_bitmask(1, ours.vocab_size)
    for ids in streams:
        matcher = SyntaxMatcher(ours)
        for token in ids:
            clock = time.thread_time_ns()
            matcher.fill_next_token_bitmask(bitmask)
            times.append((time.thread_time_ns() - clock) / 1e3)
            if not matcher.accept_token(token):
                break
    return times


def _compare(
    vocabulary: Vocabulary,
    syntax: PythonSyntax,
    bitmask: torch.Tensor,
    theirs: torch.Tensor,
    prefix: str,
    sets: dict[str, int],
    found: list[dict[str, Any]],
    examples: int,
) -> None:
    """Add one prefix's allowed sets to ``sets`` and judge up to two disagreements each way
    (``examples`` at most per way over the run)."""
    width = min(vocabulary.size, len(theirs))
    mine = unpack_bitmask(bitmask[0], vocabulary.size)[:width]
    other = theirs[:width].bool()
    sets["prefixes"] += 1
    sets["ours_allowed"] += int(mine.sum())
    sets["syncode_allowed"] += int(other.sum())
    for allowed_by_ours, only in ((True, mine & ~other), (False, other & ~mine)):
        ids = torch.nonzero(only).flatten().tolist()
        way = "ours" if allowed_by_ours else "syncode"
        sets[f"only_{way}"] += len(ids)
        texts = [text for text in (_text(vocabulary, token) for token in ids) if text]
        for text in random.Random(prefix).sample(texts, min(2, len(texts))):
            if sum(example["allowed_by"] == way for example in found) >= examples:
                break
            suffix = (
                witness(prefix + text, syntax) if allowed_by_ours else any_witness(prefix + text)
            )
            found.append(
                {"tail": prefix[-60:], "token": repr(text), "allowed_by": way, "witness": suffix}
            )


def _shown(vocabulary: Vocabulary, token: int) -> str:
    data = vocabulary.token_bytes[token]
    return "<eos>" if data is None else repr(data.decode("utf-8", "backslashreplace"))


def _text(vocabulary: Vocabulary, token: int) -> str | None:
    """A token's text, None for the end-of-sequence token and for bytes that are not UTF-8
    on their own."""
    data = vocabulary.token_bytes[token]
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None
