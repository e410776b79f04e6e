"""The native drafting core against its Python reference: the same draft trees, forward by
forward, and the same forward counts, on real edits (HumanEvalPack-Fix) and random ones.

Covered: rewrite mode's drafter and pruning (``RewriteDrafter`` against ``Drafter`` with
``draft_graph.draft_tree``), program mode's drafter (``ProgramDrafter`` against
``ReferenceProgramDrafter`` grown and pruned), the native tape's acceptance walk against the
Python tape's (``NativeTape`` against ``ProgramTape``), the tree layout against
``static_forward.tree_layout``, and prompt lookup against an n-gram index in Python."""

from __future__ import annotations

import os
import random
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
import torch

from cad.grammar import ProgramTokenIndex, _native
from cad.grammar._native import DraftTree
from cad.resolver import CopySpan, Document, Program, format_program, oracle
from cad.selector.baselines import NgramIndex
from cad.selector.decoder import Choice, accept, draft, replay_forced, walk_ahead
from cad.selector.draft_config import DraftConfig, load_draft_config
from cad.selector.draft_graph import DraftGraph, chain, draft_tree, prune
from cad.selector.drafting import Drafter
from cad.selector.program_drafting import ProgramDrafter
from cad.selector.program_growth import ReferenceProgramDrafter
from cad.selector.rewrite import RewriteDrafter, replay_rewrite
from cad.selector.sampling import Sampling, TokenChooser, masked_greedy
from cad.selector.speculation import MAX_CHAIN_WITH_DRAFTS
from cad.selector.static_forward import tree_layout
from cad.selector.tape import NativeTape, ProgramTape, token_source
from cad.selector.tree_verify import TreeLayout
from cad.training.calibrate import replay
from cad.training.datasets import load_edits
from tests.conftest import SMALL_DRAFTS, heval_pairs

PROMPT = 7
"""Prompt tokens before the first draft (their ids do not matter to drafting)."""


def _same_tree(native: DraftTree, reference: DraftGraph) -> None:
    assert list(native.tokens) == reference.tokens
    assert list(native.parents) == reference.parents
    assert list(native.reach) == pytest.approx(reference.reach, rel=1e-9, abs=1e-12)


def _random_edit(rng: random.Random, vocabulary: int, size: int) -> tuple[list[int], list[int]]:
    """A random token document from a small vocabulary (so n-grams repeat) and a target made
    from it by a few replaced, deleted, inserted and moved stretches."""
    document = [rng.randrange(vocabulary) for _ in range(size)]
    target = list(document)
    for _ in range(rng.randint(1, 6)):
        start = rng.randrange(len(target) + 1)
        length = rng.randint(1, 12)
        kind = rng.choice(("replace", "delete", "insert", "move"))
        if kind == "replace":
            target[start : start + length] = [rng.randrange(vocabulary) for _ in range(length)]
        elif kind == "delete":
            del target[start : start + length]
        elif kind == "insert":
            target[start:start] = [rng.randrange(vocabulary) for _ in range(length)]
        else:
            piece = document[rng.randrange(len(document)) :][:length]
            target[start:start] = piece
    return document, target


# Rewrite mode -----------------------------------------------------------------------------


def rewrite_lockstep(
    document_ids: list[int], target_ids: list[int], config: DraftConfig, stop: int | None
) -> int:
    """Replay the forced rewrite loop with the native drafter and the Python reference side by
    side, asserting every forward's tree, candidates and alignment equal; the forwards taken
    after the prompt's."""
    config = replace(config, top_k=0)
    reference = Drafter(document_ids, config, stop=stop)
    native = RewriteDrafter(document_ids, config, stop=stop)
    tree = DraftTree()
    target = np.asarray(target_ids, dtype=np.int32)
    output: list[int] = []
    known = PROMPT
    forwards = -1
    while True:
        forwards += 1
        candidates = reference.candidates(output)
        graph = draft_tree([-1] * known, candidates, config, reference.copying)
        native.draft([-1] * known, None, tree)
        assert native.candidates() == candidates
        _same_tree(tree, graph)
        path = [known - 1]
        for token in target_ids[len(output) :]:
            child = graph.child(path[-1], token)
            if child is None:
                break
            path.append(child)
        found, _ = _native.accept_forced_rewrite(tree, known, target, len(output), 1 << 60, [])
        assert found.tolist()[known - 1 :] == path
        accepted = [graph.tokens[n] for n in path[1:]]
        output.extend(accepted)
        reference.advance(accepted, [graph.document_index(n) for n in path[1:]])
        native.advance_path(tree, path[1:])
        assert native.native.position == reference.position
        assert native.copying == reference.copying
        if len(output) >= len(target_ids):
            assert native.output == output
            return forwards
        output.append(target_ids[len(output)])
        reference.advance(output[-1:], [None])
        native.advance(output[-1])
        known = 1


REWRITE_CONFIGS = {
    "shipped": load_draft_config(),
    "cpu": load_draft_config(device="cpu"),
    "small": SMALL_DRAFTS,
    "tight": replace(SMALL_DRAFTS, budget=6, min_reach=0.05),
}


def _rewrite_forwards(document: list[int], target: list[int], config: DraftConfig, stop) -> None:
    forwards = rewrite_lockstep(document, target, config, stop)
    replayed = replay_rewrite(document, target, config, stop=stop, prompt_tokens=PROMPT)
    steps = replay(document, target, config, stop=stop, prompt_tokens=PROMPT)
    assert len(replayed) - 1 == len(steps) - 1 == forwards
    assert replayed == [nodes for _, nodes in steps]


@pytest.mark.parametrize("name", sorted(REWRITE_CONFIGS))
def test_rewrite_drafts_equal_the_reference_on_real_edits(qwen2_tokenizer, name: str) -> None:
    stop = qwen2_tokenizer.eos_token_id
    for before, after in heval_pairs("python") + heval_pairs("js"):
        document = qwen2_tokenizer.encode(before, add_special_tokens=False)
        target = qwen2_tokenizer.encode(after, add_special_tokens=False)
        _rewrite_forwards(document, target, REWRITE_CONFIGS[name], stop)


@pytest.mark.parametrize("seed", range(12))
def test_rewrite_drafts_equal_the_reference_on_random_edits(seed: int) -> None:
    rng = random.Random(seed)
    document, target = _random_edit(rng, rng.choice((5, 20, 300)), rng.randint(1, 400))
    config = replace(
        SMALL_DRAFTS, budget=rng.choice((1, 8, 40, 96)), min_reach=rng.choice((0.0, 0.01))
    )
    stop = rng.choice((None, 999))
    forwards = rewrite_lockstep(document, target, config, stop)
    assert len(replay_rewrite(document, target, config, stop=stop, prompt_tokens=PROMPT)) == (
        forwards + 1
    )


# Program mode -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def program_index(qwen2_tokenizer):
    def encode(text: str) -> list[int]:
        return qwen2_tokenizer.encode(text, add_special_tokens=False)

    return ProgramTokenIndex.for_tokenizer(qwen2_tokenizer, len(qwen2_tokenizer)), encode


def program_lockstep(index, encode, before: str, program: Program, budget: int) -> int:
    """Forced-program decoding without a model, the native tape and drafter beside the Python
    tape and reference drafter, asserting every forward's tree, accepted path and next tokens
    equal; the forwards taken after the prompt's."""
    document = Document(before)
    subline = any(isinstance(op, CopySpan) for op in program.ops)
    prior = load_draft_config().program
    source = token_source(encode, document)
    native_tape = NativeTape(index, document, source, subline=subline)
    native = ProgramDrafter(index, encode, document, subline=subline, prior=prior, source=source)
    tape = ProgramTape(index, encode, document, subline=subline)
    reference = ReferenceProgramDrafter(index, encode, document, subline=subline, prior=prior)
    choose = Choice(None, format_program(program).encode("utf-8"))
    tree = DraftTree()
    pending = [-1] * PROMPT + tape.take_forced()
    assert [-1] * PROMPT + native_tape.take_forced() == pending
    forwards = -1
    while not tape.finished:
        forwards += 1
        assert not native_tape.finished
        graph = chain(pending)
        if budget and len(pending) <= MAX_CHAIN_WITH_DRAFTS:
            reference.grow(graph, len(pending) - 1, tape.matcher.ops, tape.op_prefix(), budget)
        graph = prune(graph, budget, required=len(pending))
        draft(native_tape, native, pending, budget, tree)
        _same_tree(tree, graph)
        path, following = accept(tape, graph, {}, choose, len(pending), 1 << 30)
        native_path, native_following = accept(native_tape, tree, {}, choose, len(pending), 1 << 30)
        assert (native_path, native_following) == (path, following)
        assert native_tape.tokens == tape.tokens
        pending = following
    assert native_tape.finished
    assert native_tape.decided == tape.decided
    assert native_tape.ops == tuple(tape.matcher.ops)
    assert native_tape.resolver.text == tape.resolver.text
    for field in ("generated_tokens", "forced_tokens", "copied_tokens", "ops", "lines_copied"):
        assert getattr(native_tape.stats, field) == getattr(tape.stats, field), field
    return forwards


def _program_forwards(index, encode, before: str, program: Program, budget: int) -> None:
    forwards = program_lockstep(index, encode, before, program, budget)
    prior = load_draft_config().program
    stats = replay_forced(
        index, encode, before, program, budget=budget, prior=prior, prompt_tokens=PROMPT
    )
    assert stats.forwards == forwards


@pytest.mark.parametrize("language", ["python", "js"])
def test_program_drafts_equal_the_reference_on_real_edits(program_index, language: str) -> None:
    index, encode = program_index
    budget = load_draft_config().budget
    for before, after in heval_pairs(language):
        _program_forwards(index, encode, before, oracle(before, after), budget)


def test_sub_line_program_drafts_equal_the_reference(program_index) -> None:
    index, encode = program_index
    for before, after in heval_pairs("python")[::4]:
        program = oracle(before, after, granularity="subline", min_copy=8)
        _program_forwards(index, encode, before, program, 64)


CORPORA = [path for path in os.environ.get("CAD_DRAFTING_CORPORA", "").split(os.pathsep) if path]
"""Edit corpora (JSONL, ``cad data git`` or the release-diff builder) to check as well, from
``CAD_DRAFTING_CORPORA`` (paths joined like ``PATH``); none by default."""


@pytest.mark.skipif(not CORPORA, reason="CAD_DRAFTING_CORPORA names no corpus")
@pytest.mark.timeout(0)
@pytest.mark.parametrize("path", CORPORA)
def test_drafts_equal_the_reference_on_a_corpus(qwen2_tokenizer, program_index, path: str) -> None:
    """Both modes on every edit of a corpus: the same trees and forwards as the reference."""
    index, encode = program_index
    config = load_draft_config()
    for example in load_edits(path):
        _program_forwards(index, encode, example.before, oracle(example.before, example.after),
                          config.budget)  # fmt: skip
        _rewrite_forwards(encode(example.before), encode(example.after), config,
                          qwen2_tokenizer.eos_token_id)  # fmt: skip


def _random_text_edit(rng: random.Random) -> tuple[str, str]:
    """A random document of code-like lines and an edit of it: lines replaced, changed by a
    few characters, deleted, inserted and moved."""
    words = ["x", "y", "total", "return", "if", "(", ")", ":", "=", "+", "1", "0", "def", "f"]

    def line() -> str:
        indent = "    " * rng.randint(0, 2)
        return indent + " ".join(rng.choice(words) for _ in range(rng.randint(0, 8))) + "\n"

    lines = [line() for _ in range(rng.randint(1, 40))]
    edited = list(lines)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(edited) + 1)
        kind = rng.choice(("replace", "change", "delete", "insert", "move"))
        if kind == "replace" and at < len(edited):
            edited[at] = line()
        elif kind == "change" and at < len(edited) and len(edited[at]) > 2:
            cut = rng.randrange(len(edited[at]) - 1)
            edited[at] = edited[at][:cut] + rng.choice(words) + edited[at][cut + 1 :]
        elif kind == "delete" and at < len(edited):
            del edited[at]
        elif kind == "insert":
            edited.insert(at, line())
        elif kind == "move" and lines:
            edited.insert(at, rng.choice(lines))
    return "".join(lines), "".join(edited)


@pytest.mark.parametrize("seed", range(10))
def test_program_drafts_equal_the_reference_on_random_edits(program_index, seed: int) -> None:
    index, encode = program_index
    rng = random.Random(seed)
    before, after = _random_text_edit(rng)
    granularity = rng.choice(("line", "line", "subline"))
    program = oracle(before, after, granularity=granularity, min_copy=4)
    _program_forwards(index, encode, before, program, rng.choice((0, 3, 16, 64, 160)))


def test_walking_ahead_equals_the_python_tape(program_index) -> None:
    """The batched choices' walk along the drafted first children (a GPU's path): the native
    tape gives the Python tape's decision nodes, drafted tokens and masks."""
    index, encode = program_index
    before, _ = heval_pairs("python")[5]
    document = Document(before)
    source = token_source(encode, document)
    native_tape = NativeTape(index, document, source)
    tape = ProgramTape(index, encode, document)
    drafter = ProgramDrafter(index, encode, document, source=source)
    pending = [-1] * PROMPT + tape.take_forced()
    native_tape.take_forced()
    tree = DraftTree()
    draft(native_tape, drafter, pending, 200, tree)
    words = (index.vocabulary.size + 31) // 32

    def rows(count: int) -> torch.Tensor:
        return torch.zeros((max(count, len(tree) + 1), words), dtype=torch.int32)

    native_masks, masks = rows(0), rows(0)
    found = walk_ahead(native_tape, tree, len(pending) - 1, 1 << 30, lambda n: native_masks)
    expected = walk_ahead(tape, tree, len(pending) - 1, 1 << 30, lambda n: masks)
    assert found == expected
    assert len(found[0]) > 3
    assert torch.equal(native_masks[: len(found[0])], masks[: len(found[0])])
    assert native_tape.tokens == tape.tokens


def test_a_cpu_greedy_choice_is_the_masked_argmax(program_index) -> None:
    """The chooser's greedy choice on a CPU, made in native code: at every decision of a
    real program, on rows with ties, -inf entries and more ids than the vocabulary, the
    token masking and argmax give (the lowest id among equal logits)."""
    index, encode = program_index
    before, after = heval_pairs("python")[3]
    document = Document(before)
    tape = NativeTape(index, document, token_source(encode, document))
    chooser = TokenChooser(index.vocabulary.size + 64, torch.device("cpu"), Sampling())
    target = format_program(oracle(before, after)).encode("utf-8")
    generator = torch.Generator().manual_seed(0)
    tape.take_forced()
    decisions = 0
    while not tape.finished:
        for scale in (1.0, 0.01):
            logits = (
                torch.randn(chooser.bitmask.shape[1] * 32, generator=generator) * scale
            ).round(decimals=1)
            logits[torch.rand(logits.shape, generator=generator) < 0.2] = float("-inf")
            choice = chooser.choose(logits, tape.matcher)
            assert choice == int(masked_greedy(logits.clone(), chooser.bitmask[0]))
        decisions += 1
        tape.decide(tape.target_token(target))
        tape.take_forced()
    assert decisions > 10


# Tree layout ------------------------------------------------------------------------------


def _random_tree(rng: random.Random, chain_length: int, size: int) -> DraftTree:
    tree = DraftTree()
    tree.assign_chain(list(range(chain_length)))
    while len(tree) < chain_length + size:
        tree.add(rng.randrange(chain_length - 1, len(tree)), rng.randrange(50), rng.random())
    return tree


@pytest.mark.parametrize("seed", range(8))
def test_tree_layout_equals_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    chain_length = rng.randint(1, 6)
    tree = _random_tree(rng, chain_length, rng.randint(0, 60))
    past = rng.randint(0, 20)
    layout = TreeLayout()
    for first in (0, chain_length - 1):
        nodes = range(first, len(tree))
        parents = [tree.parent(n) - first if tree.parent(n) >= first else -1 for n in nodes]
        start = torch.tensor(past)
        positions, visible = tree_layout(torch.tensor(parents), start, past + len(nodes))
        tokens, laid_parents, laid_positions = layout.arrays(tree, past, first)
        assert tokens.tolist() == [tree.token(n) for n in nodes]
        assert laid_parents.tolist() == parents
        assert laid_positions.tolist() == positions[0].tolist()
        mask = layout.mask(tree, past, torch.float32, first)
        assert torch.equal(mask == 0, visible)


# Prompt lookup ----------------------------------------------------------------------------


class PythonNgramIndex:
    """The earliest start of every 1..``max_ngram``-gram of a growing sequence, in Python."""

    def __init__(self, max_ngram: int) -> None:
        self.max_ngram = max_ngram
        self.sequence: list[int] = []
        self.starts: dict[tuple[int, ...], list[int]] = defaultdict(list)

    def extend(self, tokens: list[int]) -> None:
        for token in tokens:
            self.sequence.append(token)
            end = len(self.sequence)
            for n in range(1, self.max_ngram + 1):
                if end - n >= 0:
                    self.starts[tuple(self.sequence[end - n : end])].append(end - n)

    def draft(self, num_tokens: int) -> list[int]:
        length = len(self.sequence)
        for n in range(min(self.max_ngram, length), 0, -1):
            for start in self.starts.get(tuple(self.sequence[length - n :]), []):
                follow = start + n
                if follow < length:
                    return self.sequence[follow : min(follow + num_tokens, length)]
        return []


@pytest.mark.parametrize("seed", range(6))
def test_prompt_lookup_drafts_equal_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    max_ngram = rng.randint(1, 4)
    native, reference = NgramIndex(max_ngram), PythonNgramIndex(max_ngram)
    for _ in range(200):
        tokens = [rng.randrange(rng.choice((3, 30))) for _ in range(rng.randint(0, 5))]
        native.extend(tokens)
        reference.extend(tokens)
        count = rng.randint(1, 40)
        assert native.draft(count) == reference.draft(count)
