"""Speculative program decoding: exactly the program one-token-per-forward decoding writes,
whatever the drafts, in fewer forwards."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from cad.grammar.bitmask import fill_from_allowed
from cad.resolver import Document, oracle
from cad.selector import Decoder, Sampling, kv
from cad.selector.decoder import Choice, replay_forced
from cad.selector.draft_config import load_draft_config
from cad.selector.program_drafting import ProgramDrafter
from cad.selector.program_growth import ReferenceProgramDrafter
from cad.selector.prompt import program_prompt
from cad.selector.sampling import TokenChooser
from cad.selector.tape import NativeTape, ProgramTape
from tests.conftest import heval_pairs

INSTRUCTION = "Fix the bug."


def one_token_per_forward(
    loaded, decoder: Decoder, document: str, max_new_tokens: int, target: bytes | None = None
) -> tuple[list[int], str]:
    """The reference: every model-decided token in a forward of its own (with the literals
    and copied text it brings), greedy under the program FSM's mask, or the forced target's."""
    tape = ProgramTape(decoder.index, decoder.encode, Document(document))
    prompt = program_prompt(loaded.tokenizer, Document(document), INSTRUCTION)
    cache = kv.new_cache(loaded.model)
    chooser = TokenChooser(loaded.vocab_size, loaded.device, Sampling())
    logits = kv.append(loaded.model, cache, prompt + tape.take_forced(), loaded.device)
    decided: list[int] = []
    while not tape.finished:
        if tape.stats.generated_tokens >= max_new_tokens:
            tape.finish_truncated()
            break
        if target is not None:
            token = tape.target_token(target)
        else:
            token = chooser.choose(logits, tape.matcher)
        tape.decide(token)
        decided.append(token)
        pending = [token, *tape.take_forced()]
        if tape.finished:
            break
        logits = kv.append(loaded.model, cache, pending, loaded.device)
    return decided, tape.resolver.text


@pytest.fixture
def decided_tokens(monkeypatch) -> list[int]:
    """Every token the model decided, in order: those a ``ProgramTape`` is told (the
    one-token-per-forward reference decides through it), and those on the record of the
    decoder's native tape once an edit returns (its walk decides in native code)."""
    seen: list[int] = []
    original = ProgramTape.decide
    new_tape, edit = Decoder.new_tape, Decoder.edit
    tapes: list[NativeTape] = []

    def decide(self: ProgramTape, token: int) -> None:
        seen.append(token)
        original(self, token)

    def recorded_tape(self: Decoder, *args: Any, **options: Any) -> Any:
        tape = new_tape(self, *args, **options)
        if isinstance(tape, NativeTape):
            tapes.append(tape)
        return tape

    def recorded_edit(self: Decoder, *args: Any, **options: Any) -> Any:
        tapes.clear()
        result = edit(self, *args, **options)
        for tape in tapes:
            seen.extend(tape.decided_tokens())
        return result

    monkeypatch.setattr(ProgramTape, "decide", decide)
    monkeypatch.setattr(Decoder, "new_tape", recorded_tape)
    monkeypatch.setattr(Decoder, "edit", recorded_edit)
    return seen


def _document(seed: int) -> str:
    """Small documents of different kinds: repetitive code the drafts predict well, and
    lines of random words they do not."""
    rng = random.Random(seed)
    if seed % 2 == 0:
        return "".join(
            f"def f{i}(x):\n    return x + {i}\n" if i % 3 else "\n" for i in range(4 + seed)
        )
    words = ["alpha", "beta", "gamma", "delta", "eps", "(", ")", "=", "42", "'s'"]
    return "".join(" ".join(rng.choices(words, k=rng.randint(1, 6))) + "\n" for _ in range(9))


@pytest.mark.parametrize("model", ["tiny_qwen", "tiny_llama"])
@pytest.mark.parametrize("seed", range(2))
def test_greedy_speculation_writes_the_one_token_per_forward_program(
    request, decided_tokens: list[int], model: str, seed: int
) -> None:
    loaded = request.getfixturevalue(model)
    document = _document(seed + 3 * (model == "tiny_llama"))
    decoder = Decoder(loaded, max_new_tokens=32)
    reference, text = one_token_per_forward(loaded, decoder, document, 32)
    decided_tokens.clear()
    result = decoder.edit(document, INSTRUCTION)
    assert decided_tokens == reference
    assert result.text == text
    assert result.stats.generated_tokens == len(reference)
    assert result.stats.forwards <= len(reference)


def test_greedy_speculation_accepts_drafted_program_tokens(tiny_qwen) -> None:
    document = "".join(f"x = {i}\n" if i % 3 else f"def f{i}():\n" for i in range(1, 14))
    sequential = Decoder(tiny_qwen, max_new_tokens=40, draft_budget=0).edit(document, INSTRUCTION)
    speculative = Decoder(tiny_qwen, max_new_tokens=40).edit(document, INSTRUCTION)
    assert speculative.program == sequential.program
    assert sequential.stats.forwards == sequential.stats.generated_tokens
    assert speculative.stats.forwards < sequential.stats.forwards
    assert speculative.stats.drafted_tokens > 0


def _targets(before: str, seed: int) -> dict[str, str]:
    """What the forced program writes, from the document again to something else entirely."""
    rng = random.Random(seed)
    lines = before.splitlines(keepends=True)
    mutated = [line.replace("return", "yield", 1) if rng.random() < 0.3 else line for line in lines]
    cut = rng.randrange(1, len(lines))
    shifted = [*lines[:cut], "    # a new line\n", *lines[cut + 1 :], "print('end')\n"]
    unrelated = "".join(f"value_{rng.randrange(999)} = {i}\n" for i in range(6))
    long = max(range(len(lines)), key=lambda i: len(lines[i]))
    middle = len(lines[long]) // 2
    one_byte = [*lines[:long], lines[long][:middle] + lines[long][middle + 1 :], *lines[long + 1 :]]
    return {
        "exact": before,
        "one byte dropped": "".join(one_byte),
        "mutated": "".join(mutated),
        "shifted": "".join(shifted),
        "unrelated": unrelated,
    }


def test_forced_speculation_follows_the_program_token_for_token(
    tiny_qwen, decided_tokens: list[int]
) -> None:
    decoder = Decoder(tiny_qwen, max_new_tokens=4096)
    seed = 1
    before, _ = heval_pairs("python")[7]
    for name, after in _targets(before, seed).items():
        program = oracle(before, after)
        target = decoder_text(program)
        reference, text = one_token_per_forward(tiny_qwen, decoder, before, 4096, target)
        decided_tokens.clear()
        result = decoder.edit(before, INSTRUCTION, program=program)
        assert text == after, name
        assert result.text == after, name
        assert decided_tokens == reference, name
        assert result.program == program, name
        assert result.stats.forwards <= len(reference), name
        replayed = replay_forced(
            decoder.index,
            decoder.encode,
            before,
            program,
            budget=decoder.budget,
            prior=decoder.prior,
        )
        assert replayed.forwards == result.stats.forwards, name


def decoder_text(program) -> bytes:
    from cad.resolver import format_program

    return format_program(program).encode("utf-8")


def test_forced_speculation_with_multi_digit_tokens_and_spans(tiny_llama) -> None:
    decoder = Decoder(tiny_llama, max_new_tokens=4096)
    for before, after in heval_pairs("python")[:3]:
        for granularity in ("line", "subline"):
            program = oracle(before, after, granularity=granularity)
            result = decoder.edit(before, INSTRUCTION, program=program)
            assert result.text == after
            assert result.program == program
            replayed = replay_forced(
                decoder.index,
                decoder.encode,
                before,
                program,
                budget=decoder.budget,
                prior=decoder.prior,
            )
            assert replayed.forwards == result.stats.forwards


def test_a_spent_budget_stops_at_the_same_token_with_drafts(tiny_qwen) -> None:
    document = _document(2)
    for budget in (1, 7, 20):
        plain = Decoder(tiny_qwen, max_new_tokens=budget, draft_budget=0).edit(document, "Go.")
        drafted = Decoder(tiny_qwen, max_new_tokens=budget).edit(document, "Go.")
        assert drafted.program == plain.program
        assert drafted.text == plain.text
        assert drafted.stats.truncated == plain.stats.truncated
        assert drafted.stats.generated_tokens == plain.stats.generated_tokens


def test_a_tiny_temperature_samples_the_greedy_program(tiny_qwen) -> None:
    document = _document(0)
    greedy = Decoder(tiny_qwen, max_new_tokens=24).edit(document, INSTRUCTION)
    sampling = Sampling(temperature=1e-7, seed=1)
    sampled = Decoder(tiny_qwen, max_new_tokens=24, sampling=sampling).edit(document, INSTRUCTION)
    assert sampled.program == greedy.program


def test_sampled_speculation_is_deterministic_under_a_seed_and_valid(tiny_qwen) -> None:
    from cad.resolver import format, parse, resolve

    document = _document(1)
    sampling = Sampling(temperature=1.0, top_p=0.95, seed=1)
    runs = [
        Decoder(tiny_qwen, max_new_tokens=24, sampling=sampling).edit(document, INSTRUCTION)
        for _ in range(2)
    ]
    assert runs[0].program == runs[1].program
    assert resolve(parse(format(runs[0].program)), document) == runs[0].text


class _Masked:
    """A tape stand-in whose matcher allows a few tokens."""

    def __init__(self, allowed: list[int], size: int) -> None:
        self.mask = torch.zeros(size, dtype=torch.bool)
        self.mask[allowed] = True
        self.matcher = self

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        fill_from_allowed(bitmask, row, self.mask)


def test_the_speculative_rule_under_a_mask_samples_the_masked_distribution() -> None:
    logits = torch.tensor([2.0, 0.5, 1.0, -1.0, 0.0, 3.0])
    tape = _Masked([0, 1, 2, 4], 6)
    expected = torch.softmax(torch.tensor([2.0, 0.5, 1.0, float("-inf"), 0.0, float("-inf")]), 0)
    choose = Choice(TokenChooser(6, torch.device("cpu"), Sampling(temperature=1.0, seed=0)), None)
    counts = torch.zeros(6)
    draws = 6000
    for i in range(draws):
        drafted = [[2, 0], [4], [1, 2, 4], [0]][i % 4]
        counts[choose.one(tape, logits.clone(), drafted)] += 1
    assert counts[3] == counts[5] == 0
    torch.testing.assert_close(counts / draws, expected, atol=0.025, rtol=0)


def _index_and_encoder(tokenizer):
    """The program token index of ``tokenizer`` and its plain encoder."""
    from cad.grammar import ProgramTokenIndex

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    return ProgramTokenIndex.for_tokenizer(tokenizer, len(tokenizer)), encode


DRAFTERS = ["native", "reference"]


def _drafter(kind: str, index, encode, document: Document):
    """The decoder's native program drafter, or the Python reference."""
    make = ProgramDrafter if kind == "native" else ReferenceProgramDrafter
    return make(index, encode, document)


def _grown_paths(kind: str, drafter, start: list[int], budget: int, tokenizer) -> tuple:
    """Every root-to-node path's text of a tree grown below ``start``, and the reaches."""
    from cad.grammar._native import DraftTree
    from cad.selector.draft_graph import chain

    if kind == "native":
        tree = DraftTree()
        tree.assign_chain(start)
    else:
        tree = chain(start)
    drafter.grow(tree, len(start) - 1, (), b"<", budget=budget)
    tokens = list(tree.tokens)
    paths = [tokenizer.decode([tokens[n] for n in tree.path(node)]) for node in range(len(tree))]
    return paths, list(tree.reach)


@pytest.mark.parametrize("kind", DRAFTERS)
def test_drafts_follow_a_copy_with_its_text_and_the_next_op(qwen2_tokenizer, kind: str) -> None:
    from cad.resolver import CopyLines

    document = Document("".join(f"line {i}\n" for i in range(1, 9)))
    index, encode = _index_and_encoder(qwen2_tokenizer)

    drafter = _drafter(kind, index, encode, document)
    proposals = drafter.proposals((CopyLines(1, 3),), b"<")
    best = max(proposals, key=lambda p: p.mass)
    assert best.text.startswith(b"<gen>line 4\n")
    ends = {p.op.end for p in drafter.proposals((), b'<copy lines="1-')}
    assert ends == set(range(1, 9))
    paths, reach = _grown_paths(kind, drafter, encode("<"), 400, qwen2_tokenizer)
    assert any(path.startswith('<copy lines="1-8"/>\nline 1\nline 2\n') for path in paths)
    assert '<copy lines="1-8"/>\n' + document.text + "</program>" in paths
    assert any(
        path.startswith('<copy lines="1-2"/>\nline 1\nline 2\n<gen>line 3') for path in paths
    )
    assert all(0.0 <= value <= 1.0 for value in reach)


def test_a_one_line_fix_needs_few_forwards_whatever_the_document_length(qwen2_tokenizer) -> None:
    index, encode = _index_and_encoder(qwen2_tokenizer)

    config = load_draft_config()
    forwards = []
    for size in (20, 200, 900):
        before = "".join(f"    total += values[{i}] * {i}\n" for i in range(size))
        after = before.replace(f"values[{size // 2}] * ", f"values[{size // 2}] / ")
        program = oracle(before, after)
        sequential = replay_forced(index, encode, before, program, budget=0)
        speculative = replay_forced(
            index, encode, before, program, budget=config.budget, prior=config.program
        )
        assert sequential.forwards >= 3 * speculative.forwards
        forwards.append(speculative.forwards)
    assert max(forwards) <= 6
    assert forwards[-1] - forwards[0] <= 2


def test_program_mode_drafts_with_the_program_budget_of_its_configuration(tiny_qwen) -> None:
    """On a CPU the shipped configuration gives program mode a smaller budget than rewrite
    mode's (program trees pay for every copied token they guess wrong); elsewhere the two are
    one. An explicit draft budget overrides either."""
    cpu = load_draft_config(device="cpu")
    accelerator = load_draft_config(device="cuda")
    assert cpu.program_budget is not None and cpu.program_draft_budget < cpu.budget
    assert accelerator.program_budget is None
    assert accelerator.program_draft_budget == accelerator.budget
    assert Decoder(tiny_qwen, config=cpu).budget == cpu.program_draft_budget
    assert Decoder(tiny_qwen, config=cpu, draft_budget=40).budget == 40
    document = "".join(f"value_{i} = {i}\n" for i in range(60))
    program = oracle(document, document.replace("value_30 = 30", "value_30 = -30"))
    result = Decoder(tiny_qwen, config=cpu).edit(document, "negate", program=program)
    assert result.stats.forwards > 0
    assert result.stats.drafted_tokens <= cpu.program_draft_budget * (result.stats.forwards + 1)


@pytest.mark.parametrize("kind", DRAFTERS)
def test_a_gen_body_rejoins_its_line_after_a_one_byte_change(qwen2_tokenizer, kind: str) -> None:
    from cad.resolver import CopyLines

    document = Document("def f(p, d):\n    p*= p*d\n    return p\n")
    index, encode = _index_and_encoder(qwen2_tokenizer)

    drafter = _drafter(kind, index, encode, document)
    proposals = drafter.proposals((CopyLines(1, 1),), b"<gen>    p=")
    best = max(proposals, key=lambda p: p.mass)
    assert best.text.startswith(b"<gen>    p= p*d\n")


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_choices_among_a_few_allowed_tokens_equal_those_from_the_whole_row(
    tiny_qwen, monkeypatch, temperature: float
) -> None:
    """Scoring only the tokens a mask allows (a line number's digits) chooses as the whole
    row under the mask does: the same programs, greedy and sampled under a seed."""
    from cad.selector import speculation

    def decode(narrow_max: int) -> list[Any]:
        monkeypatch.setattr(speculation, "NARROW_MAX", narrow_max)
        sampling = Sampling(temperature=temperature, seed=3)
        decoder = Decoder(tiny_qwen, max_new_tokens=48, sampling=sampling)
        return [decoder.edit(_document(seed), INSTRUCTION) for seed in range(3)]

    whole, narrowed = decode(0), decode(speculation.NARROW_MAX)
    assert [r.program for r in narrowed] == [r.program for r in whole]
    assert [r.stats.forwards for r in narrowed] == [r.stats.forwards for r in whole]


def test_only_a_plain_output_layer_scores_a_few_tokens_alone() -> None:
    """A quantized or adapted output layer (a subclass of ``Linear``, or another module)
    projects whole rows: its weight alone does not give its logits."""
    from cad.selector.tree_verify import NodeLogits

    class Holder:
        def __init__(self, head: torch.nn.Module) -> None:
            self.head = head

        def get_output_embeddings(self) -> torch.nn.Module:
            return self.head

    class Adapted(torch.nn.Linear):
        pass

    hidden = torch.zeros(3, 8)
    plain = NodeLogits(Holder(torch.nn.Linear(8, 40)), hidden, None, chunk=1)
    adapted = NodeLogits(Holder(Adapted(8, 40)), hidden, None, chunk=1)
    assert plain.narrowable(0) and not adapted.narrowable(0)
    ids = torch.tensor([1, 7, 39])
    expected = plain.head(hidden[1])[ids]
    torch.testing.assert_close(plain.among(1, ids), expected)
