"""Choosing tokens from logits: greedy, or temperature with nucleus (top-p), under a
grammar's packed bitmask or unconstrained, and the speculative rule for drafted tokens.

Everything vocabulary-sized stays on the logits' device: masks arrive as packed bitmasks
(``cad.grammar``), sampling is the exponential race (the token maximising ``p / E`` for
independent exponential noise ``E``, distributed exactly as ``p``) with noise from the
decode's seeded generator on that device, and the only value read back per choice is the
chosen token itself, or per draft chain the few numbers the acceptance rule needs. The race
is also what makes sampling reproducible across eager and compiled kernels: rounding
differences of 1e-7 in ``p`` cannot move an argmax whose runner-up is typically far behind,
while they do move the boundaries of a cumulative sum over a large vocabulary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from cad.grammar import (
    Matcher,
    allocate_token_bitmask,
    allowed_argmax,
    apply_token_bitmask_inplace,
    bit_values,
    masked_argmax,
)
from cad.selector.compiling import Compiled
from cad.selector.graphs import warm_and_record


@dataclass(frozen=True)
class Sampling:
    """``temperature == 0`` is greedy; otherwise softmax sampling restricted to ``top_p``."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


def new_generator(sampling: Sampling, device: torch.device | str = "cpu") -> torch.Generator:
    """The decode's random source on ``device``, seeded with ``sampling.seed``."""
    return torch.Generator(device=device).manual_seed(sampling.seed)


def exponential_noise(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Independent exponential draws (rate 1) on the generator's device, never zero."""
    noise = torch.empty(shape, device=generator.device).exponential_(generator=generator)
    return noise.clamp_min_(torch.finfo(noise.dtype).tiny)


def batched_reads(device: torch.device) -> bool:
    """Whether the choices along a draft path are made together on ``device`` and read back
    once (a GPU, where every read waits for the device), rather than one node at a time as
    acceptance reaches it (a CPU, where a read costs nothing and unreached nodes cost
    work)."""
    return torch.device(device).type == "cuda"


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device`` without making the host wait (pinned, asynchronous)."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def distribution(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Rows of ``logits`` ``(..., vocab)`` as sampling distributions: softmax at the
    temperature, restricted to the top-p nucleus and renormalised."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        outside = torch.cumsum(ordered, dim=-1) - ordered >= top_p
        outside[..., 0] = False
        probs = torch.zeros_like(probs).scatter(-1, order, ordered.masked_fill(outside, 0.0))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def race(probs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs`` ``(..., vocab)`` (not necessarily normalised), drawn
    with the exponential ``noise`` of the same shape: ``argmax(p / E)``, which picks token
    ``t`` with probability ``p(t) / sum(p)`` and never a token without mass."""
    return (probs / noise).argmax(dim=-1)


def masked_greedy(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """The best allowed token (0-d tensor); masks ``logits`` in place."""
    apply_token_bitmask_inplace(logits, bitmask)
    return logits.argmax()


def masked_sample(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    noise: torch.Tensor,
    temperature: float,
    top_p: float,
) -> torch.Tensor:
    """A sampled allowed token (0-d tensor) for the exponential ``noise`` ``(vocab,)``;
    masks ``logits`` in place."""
    apply_token_bitmask_inplace(logits, bitmask)
    return race(distribution(logits, temperature, top_p), noise)


def greedy_path(
    logits: torch.Tensor, bitmask: torch.Tensor | None, drafted: list[int]
) -> list[int]:
    """The greedy choices at the ``k`` nodes of a draft path, decided on the logits' device
    with one read: ``logits`` ``(k, vocab)`` (masked in place by ``bitmask`` ``(k, width)``
    when given), ``drafted[i]`` the token drafted after node ``i`` (the next node's; -1 for
    none). Acceptance stops at the first choice that differs from its draft; the choices up
    to and including that one (all ``k`` when every draft agrees) come back."""
    if bitmask is not None:
        apply_token_bitmask_inplace(logits, to_device(bitmask, logits.device))
    choices = logits.argmax(dim=-1)
    expected = to_device(torch.tensor(drafted, dtype=torch.long), logits.device)
    accepted = torch.cumprod((choices == expected).long(), dim=0).sum()
    read = torch.cat([accepted[None], choices]).tolist()
    return read[1 : 2 + read[0]]


class GraphedGreedy:
    """The greedy choice under a bitmask as one CUDA graph: the logits are copied into the
    graph's own buffer, the bitmask crosses in one asynchronous copy, and the masked argmax
    (:func:`cad.grammar.allowed_argmax`, four kernels) replays as one graph, so a choice
    costs three launches and one read whatever the number of kernels inside. Captured at
    the first call, again if the logits' shape or dtype or the bitmask's width changes."""

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._logits = torch.empty(0)
        self._mask = torch.empty(0, dtype=torch.int32)
        self._choice = torch.empty(0)

    def __call__(self, logits: torch.Tensor, bitmask: torch.Tensor) -> int:
        """The best token of ``logits`` ``(vocab,)`` that the host bitmask row ``bitmask``
        ``(width,)`` (pinned) allows; ``logits`` are left as they are."""
        stale = self._logits.shape != logits.shape or self._logits.dtype != logits.dtype
        if self._graph is None or stale or self._mask.shape != bitmask.shape:
            self._capture(logits, bitmask)
        self._logits.copy_(logits)
        self._mask.copy_(bitmask, non_blocking=True)
        assert self._graph is not None
        self._graph.replay()
        return int(self._choice)

    def _capture(self, logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        self._logits = torch.zeros_like(logits)
        self._mask = torch.zeros(bitmask.shape, dtype=bitmask.dtype, device=self.device)
        bits = bit_values(self.device)
        _, self._graph, self._choice = warm_and_record(
            torch.cuda.Stream(self.device),
            lambda: allowed_argmax(self._logits, self._mask, bits),
        )


_THREAD = threading.local()


def graphed_greedy(device: torch.device) -> GraphedGreedy:
    """This thread's :class:`GraphedGreedy` on ``device``. A thread runs one choice at a
    time, and every choice copies its logits and bitmask in afresh, so the decodes of a
    thread share one graph, captured once for the thread instead of once per decode."""
    choices: dict[torch.device, GraphedGreedy] | None = getattr(_THREAD, "choices", None)
    if choices is None:
        choices = _THREAD.choices = {}
    device = torch.device(device)
    if device not in choices:
        choices[device] = GraphedGreedy(device)
    return choices[device]


class TokenChooser:
    """Picks each next token of one decode under a matcher's mask.

    It owns the decode's bitmask (filled in place by the matcher every step, pinned on a
    GPU so it crosses asynchronously) and its seeded generator; greedy and sampled choices
    read back one integer. With a compiler ``backend`` the masking and the choice run as one
    compiled kernel (the static runtime's ``--compile``); with ``graphs`` (the default
    runtime on a GPU) the greedy choice replays as one CUDA graph, the thread's
    (:func:`graphed_greedy`)."""

    def __init__(
        self,
        vocab_size: int,
        device: torch.device,
        sampling: Sampling,
        *,
        backend: str | None = None,
        graphs: bool = False,
    ) -> None:
        self.device = torch.device(device)
        self.sampling = sampling
        self.generator = new_generator(sampling, self.device)
        bitmask = allocate_token_bitmask(1, vocab_size)
        self.bitmask = bitmask.pin_memory() if self.device.type == "cuda" else bitmask
        self._greedy = masked_greedy if backend is None else _kernel(masked_greedy, backend)
        self._sample = masked_sample if backend is None else _kernel(masked_sample, backend)
        self._graphed = (
            graphed_greedy(self.device) if graphs and self.device.type == "cuda" else None
        )

    @classmethod
    def for_model(cls, loaded: Any, sampling: Sampling) -> TokenChooser:
        """A chooser for ``loaded`` (a :class:`cad.selector.LoadedModel`), compiled like its
        model's runtime when one is installed."""
        from cad.selector.runtime import installed

        runtime = installed(loaded.model)
        if runtime is None:
            return cls(loaded.vocab_size, loaded.device, sampling)
        return cls(
            loaded.vocab_size,
            loaded.device,
            sampling,
            backend=runtime.backend,
            graphs=runtime.graphs is not None,
        )

    def fill(self, matcher: Matcher) -> None:
        """Take the matcher's allowed set for the next token."""
        matcher.fill_next_token_bitmask(self.bitmask, 0)

    def set_allowed(self, token: int, allowed: bool) -> None:
        """Allow or forbid one token on top of the matcher's set (end-of-sequence)."""
        word, bit = divmod(token, 32)
        value = int(self.bitmask[0, word]) & 0xFFFFFFFF
        value = value | (1 << bit) if allowed else value & ~(1 << bit)
        self.bitmask[0, word] = value - (1 << 32) if value >= 1 << 31 else value

    def is_allowed(self, token: int) -> bool:
        """Whether ``token`` is in the current set."""
        word, bit = divmod(token, 32)
        return bool((int(self.bitmask[0, word]) >> bit) & 1)

    def any_allowed(self) -> bool:
        """Whether the current set is non-empty (read on the host)."""
        return bool(self.bitmask.any())

    @torch.inference_mode()
    def choose(self, logits: torch.Tensor, matcher: Matcher | None = None) -> int:
        """The next token among the allowed ones (the matcher's, filled first when given);
        never a masked-out id. ``logits`` may be masked in place. A greedy choice from one
        float32 row on the CPU is made in native code (:func:`cad.grammar.masked_argmax`:
        the same token, without unpacking the mask over the vocabulary)."""
        if matcher is not None:
            self.fill(matcher)
        sampling = self.sampling
        if sampling.temperature <= 0 and self._graphed is not None and logits.is_cuda:
            return self._graphed(logits, self.bitmask[0])
        greedy_on_host = logits.is_cpu and logits.dim() == 1 and logits.dtype is torch.float32
        if sampling.temperature <= 0 and greedy_on_host:
            token = masked_argmax(logits, self.bitmask[0])
            if token is not None:
                return token
        bitmask = to_device(self.bitmask[0], logits.device)
        if sampling.temperature <= 0:
            return int(self._greedy(logits, bitmask))
        noise = exponential_noise(tuple(logits.shape), self.generator)
        return int(self._sample(logits, bitmask, noise, sampling.temperature, sampling.top_p))


def speculative_pick(
    drafted: list[int], drafted_probs: list[float], uniforms: list[float], residual: int
) -> int:
    """The standard acceptance rule for deterministic drafts, given each drafted token's
    probability: accept drafted token ``t`` with its probability renormalised over what the
    drafts before it left (``p(t) / (1 - rejected)``), else move on; ``residual`` (sampled
    from the distribution with every drafted token removed) when all are rejected. The result
    is distributed exactly as the model's distribution."""
    rejected = 0.0
    for token, probability, uniform in zip(drafted, drafted_probs, uniforms, strict=True):
        if uniform * (1.0 - rejected) < probability:
            return token
        rejected += probability
    return residual


def speculative_choices(
    logits: torch.Tensor,
    drafted: list[list[int]],
    sampling: Sampling,
    generator: torch.Generator,
) -> list[int]:
    """The speculative rule at ``k`` nodes at once: ``logits`` ``(k, vocab)``, ``drafted[i]``
    the tokens drafted after node ``i``; the random draws come from ``generator`` (on the
    logits' device). One read from the device for all ``k``."""
    count, width = len(drafted), max((len(d) for d in drafted), default=0)
    probs = distribution(logits, sampling.temperature, sampling.top_p)
    uniforms = torch.rand((count, max(width, 1)), generator=generator, device=generator.device)
    index = torch.zeros((count, max(width, 1)), dtype=torch.long)
    for row, tokens in enumerate(drafted):
        index[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    index = to_device(index, probs.device)
    offered = probs.gather(1, index)
    residual = probs.scatter(1, index, 0.0) if width else probs
    leftover = residual.sum(dim=-1) > 0
    fallback = torch.where(
        leftover, race(residual, exponential_noise(tuple(probs.shape), generator)), probs.argmax(-1)
    )
    read = torch.cat([offered, uniforms.to(offered.dtype), fallback[:, None].to(offered.dtype)], 1)
    rows = read.tolist()
    return [
        speculative_pick(
            tokens,
            row[: len(tokens)],
            row[index.shape[1] : index.shape[1] + len(tokens)],
            int(row[-1]),
        )
        for tokens, row in zip(drafted, rows, strict=True)
    ]


_KERNELS: dict[tuple[Callable[..., torch.Tensor], str], Compiled] = {}


def _kernel(function: Callable[..., torch.Tensor], backend: str) -> Compiled:
    """``function`` compiled once per backend for every chooser (fixed shapes)."""
    key = (function, backend)
    if key not in _KERNELS:
        _KERNELS[key] = Compiled(function, backend, dynamic=False)
    return _KERNELS[key]
