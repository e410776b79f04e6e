"""Training examples built by the decoder's own code path.

An edit becomes ``prompt_ids + tape.tokens``: the prompt the decoder sends, then the tape it
appends when it follows the edit's oracle program (``cad.selector.follow_program``; for an
edit of several files, the multi-file prompt and ``follow_multi_program`` over the files
before the edit, copying across files where the oracle does). Only the
tokens the model decides are supervised; forced structural literals and the echoed text of
copies get label ``-100``, so the model is never trained to predict what the decoder supplies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cad.grammar import ProgramTokenIndex
from cad.resolver import Document, Workspace, oracle, oracle_multi
from cad.resolver.oracle import Granularity
from cad.selector import LoadedModel, follow_multi_program, follow_program
from cad.selector.prompt import multi_program_prompt, program_prompt
from cad.training.datasets import AnyExample, MultiEditExample

IGNORE = -100
"""The label of a position that is not supervised (PyTorch's cross-entropy ignore index)."""


@dataclass(frozen=True)
class TrainingExample:
    """One supervised sequence: ``labels[i]`` is ``input_ids[i]`` where the model decides that
    token, else ``IGNORE``. ``prompt_length`` tokens of prompt come first."""

    id: str
    input_ids: list[int]
    labels: list[int]
    prompt_length: int

    @property
    def supervised(self) -> int:
        """How many tokens carry a loss."""
        return sum(label != IGNORE for label in self.labels)


def supervised(
    identifier: str, prompt: list[int], tokens: list[int], decided: list[bool]
) -> TrainingExample:
    """The example of ``prompt`` followed by a tape's ``tokens``, supervised where the model
    ``decided`` them."""
    labels = [IGNORE] * len(prompt) + [
        token if chosen else IGNORE for token, chosen in zip(tokens, decided, strict=True)
    ]
    return TrainingExample(identifier, prompt + tokens, labels, len(prompt))


class ExampleBuilder:
    """Builds training examples for one tokenizer; the program token index is built once."""

    def __init__(self, tokenizer: Any, index: ProgramTokenIndex) -> None:
        self.tokenizer = tokenizer
        self.index = index

    @classmethod
    def for_model(cls, loaded: LoadedModel) -> ExampleBuilder:
        """A builder whose index covers the model's full logit width, as the decoder's does."""
        return cls(
            loaded.tokenizer, ProgramTokenIndex.for_tokenizer(loaded.tokenizer, loaded.vocab_size)
        )

    def encode(self, text: str) -> list[int]:
        """The tokenizer's ids for ``text``, no special tokens (as the decoder encodes)."""
        return self.tokenizer.encode(text, add_special_tokens=False)

    def build(self, example: AnyExample, *, granularity: Granularity = "line") -> TrainingExample:
        """The supervised sequence for ``example`` under its oracle program."""
        if isinstance(example, MultiEditExample):
            return self.build_multi(example, granularity=granularity)
        document = Document(example.before)
        subline = granularity == "subline"
        program = oracle(example.before, example.after, granularity=granularity)
        prompt = program_prompt(self.tokenizer, document, example.instruction, subline=subline)
        tape = follow_program(self.index, self.encode, document, program, subline=subline)
        return supervised(example.id, prompt, tape.tokens, tape.decided)

    def build_multi(
        self, example: MultiEditExample, *, granularity: Granularity = "line"
    ) -> TrainingExample:
        """The supervised sequence for an edit of several files (every file may change)."""
        before = example.before_files
        if not before:
            raise ValueError(f"{example.id}: an edit of several files needs a file before it")
        workspace = Workspace(before)
        subline = granularity == "subline"
        program = oracle_multi(before, example.after_files, granularity=granularity)
        prompt = multi_program_prompt(
            self.tokenizer,
            workspace,
            example.instruction,
            editable=len(workspace),
            subline=subline,
        )
        tape = follow_multi_program(self.index, self.encode, workspace, program, subline=subline)
        return supervised(example.id, prompt, tape.tokens, tape.decided)


def build_example(
    source: LoadedModel | ExampleBuilder,
    example: AnyExample,
    *,
    granularity: Granularity = "line",
) -> TrainingExample:
    """One training example from a loaded model or a prepared builder (reuse a builder for
    many examples: its token index is the expensive part)."""
    builder = source if isinstance(source, ExampleBuilder) else ExampleBuilder.for_model(source)
    return builder.build(example, granularity=granularity)


def build_examples(
    builder: ExampleBuilder,
    examples: Iterable[AnyExample],
    *,
    granularity: Granularity = "line",
    max_tokens: int | None = None,
) -> tuple[list[TrainingExample], list[str]]:
    """Examples for every edit that fits ``max_tokens``; also the ids of those skipped."""
    built: list[TrainingExample] = []
    skipped: list[str] = []
    for example in examples:
        item = builder.build(example, granularity=granularity)
        if max_tokens is not None and len(item.input_ids) > max_tokens:
            skipped.append(example.id)
        else:
            built.append(item)
    return built, skipped


def collate(batch: Sequence[TrainingExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch: ``input_ids``, ``attention_mask`` (1 on real tokens), ``labels``
    (``IGNORE`` on padding)."""
    width = max(len(item.input_ids) for item in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, item in enumerate(batch):
        length = len(item.input_ids)
        input_ids[row, :length] = torch.tensor(item.input_ids)
        labels[row, :length] = torch.tensor(item.labels)
        attention[row, :length] = 1
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def pad_token_id(tokenizer: Any) -> int:
    """The id used for padding: the tokenizer's pad token, else its end-of-text token."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0
