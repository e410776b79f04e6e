"""Token masks of the language machines equal brute force: every token's bytes fed through
the recogniser one by one (and end-of-sequence exactly on a whole file), at the states real
files pass through and at states random walks reach."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cad.grammar.syntax import SyntaxMatcher, syntax_machine
from cad.grammar.syntax.machine import DEAD, packed_to_bool
from tests.grammar.syntax.conftest import RUNNING

SNIPPETS = [
    'import os\n\n\n@dataclass(frozen=True)\nclass Point:\n    """A point."""\n\n    x: int = 0\n'
    "    y: float = 1.5e-3\n\n    def norm(self, *, scale=1) -> float:\n"
    "        return (self.x ** 2 + self.y ** 2) ** .5 * scale  # length\n",
    "def f(a, /, b=[], *args, c: 'str' = None, **kw):\n    if a and not b:\n"
    "        x = {k: v for k, v in kw.items() if v is not None}\n    elif (y := len(args)) > 2:\n"
    "        raise ValueError(f'{y!r:>{a}} args {b[0]=}')\n    else:\n"
    "        return lambda q=1: [*args, *b][q:]\n    try:\n        pass\n    except* E as e:\n"
    "        del e\n",
    "match command.split():\n    case [action]:\n        pass\n"
    "    case ['go', direction] | ['move', direction]:\n        print(rb'\\d', b'\\x00', u'é')\n"
    "    case {'k': 1, **rest}:\n        pass\n    case Point(x=0, y=-1j) if x:\n        pass\nif x:\n\tpass\n",
    "async def main():\n    async with lock as l, \\\n            other:\n"
    "        await asyncio.sleep(0x_1F if True else 0o7)\n    x = '''\n  multi\n''' \"more\"\n",
]
JSON_DOCUMENTS = [
    '{\n  "a": [1, 2.5e3, -0.1],\n  "b": {"c": null, "d": true}\n}\n',
    "[]",
    ' "x\\u00e9" ',
]


def greedy_tokens(vocabulary, text: bytes) -> list[int]:
    """Longest-match tokenisation over a vocabulary (every byte is a token)."""
    ids, position = [], 0
    by_bytes = vocabulary.ids_by_bytes
    while position < len(text):
        for length in range(min(vocabulary.longest_token, len(text) - position), 0, -1):
            token = by_bytes.get(text[position : position + length])
            if token is not None:
                ids.append(token)
                position += length
                break
    return ids


def brute_force(machine, state: int) -> np.ndarray:
    allowed = np.zeros(machine.vocab_size, dtype=bool)
    for token, data in enumerate(machine.token_bytes):
        if data and machine.feed(state, data) != DEAD:
            allowed[token] = True
    if machine.eos_token_id is not None and machine.is_complete(state):
        allowed[machine.eos_token_id] = True
    return allowed


def assert_mask_exact(machine, state: int) -> np.ndarray:
    mask = packed_to_bool(machine.packed(state), machine.vocab_size).numpy()
    expected = brute_force(machine, state)
    wrong = np.flatnonzero(mask != expected)
    assert not wrong.size, [(machine.token_bytes[t], bool(expected[t])) for t in wrong[:5]]
    return mask


@pytest.mark.parametrize("version", sorted({RUNNING, (3, 13)}))
def test_python_masks_equal_brute_force_along_real_files(small_vocab, version) -> None:
    machine = syntax_machine("python", small_vocab, python_version=version)
    for text in SNIPPETS:
        state = machine.initial
        for token in greedy_tokens(small_vocab, text.encode()):
            mask = assert_mask_exact(machine, state)
            assert mask[token]
            state = machine.feed(state, small_vocab.token_bytes[token])
        assert machine.is_complete(state)
        assert_mask_exact(machine, state)


@pytest.mark.parametrize("seed", range(6))
def test_python_masks_equal_brute_force_on_random_walks(small_vocab, seed) -> None:
    machine = syntax_machine("python", small_vocab, python_version=(3, 13))
    rng = random.Random(seed)
    text = SNIPPETS[seed % len(SNIPPETS)].encode()
    prefix = greedy_tokens(small_vocab, text)[: rng.randrange(1, 40)]
    state = machine.feed(machine.initial, b"".join(small_vocab.token_bytes[t] for t in prefix))
    for _ in range(25):
        mask = assert_mask_exact(machine, state)
        choices = [t for t in np.flatnonzero(mask) if t != small_vocab.eos_token_id]
        assert choices, "a viable prefix always has a continuation"
        state = machine.feed(state, small_vocab.token_bytes[rng.choice(choices)])
        assert state != DEAD


@pytest.mark.parametrize("schema", [None, {"type": "object"}])
def test_json_masks_equal_brute_force(small_vocab, schema) -> None:
    machine = syntax_machine("json", small_vocab, schema=schema)
    for text in JSON_DOCUMENTS:
        if schema is not None:
            text = '{"a":[1,2]}\n'
        state = machine.initial
        for token in greedy_tokens(small_vocab, text.encode()):
            mask = assert_mask_exact(machine, state)
            assert mask[token], (text, small_vocab.token_bytes[token])
            state = machine.feed(state, small_vocab.token_bytes[token])
        assert machine.is_complete(state)


def test_matcher_interface(small_vocab) -> None:
    machine = syntax_machine("python", small_vocab)
    matcher = SyntaxMatcher(machine)
    eos = small_vocab.eos_token_id
    assert matcher.is_accepting()  # an empty file is a Python file
    assert matcher.accept_bytes(b"def f(x):")
    tokens = greedy_tokens(small_vocab, b"\n    return x\n")
    for token in tokens:
        assert matcher.allowed_tokens()[token]
        assert matcher.accept_token(token)
    assert matcher.is_accepting() and matcher.allowed_tokens()[eos]
    matcher.rollback(len(tokens))
    assert matcher.state == machine.feed(machine.initial, b"def f(x):")
    assert not matcher.is_accepting() and not matcher.allowed_tokens()[eos]
    assert not matcher.accept_token(eos)
    assert not matcher.accept_token(small_vocab.ids_by_bytes[b")"])
    assert not matcher.accept_bytes(b"\nreturn x\n")
    assert matcher.accept_bytes(b"\n    return x\n")
    assert matcher.accept_token(eos) and matcher.is_finished()
    assert not bool(matcher.allowed_tokens().any())
    from cad.grammar import allocate_token_bitmask, unpack_bitmask

    bitmask = allocate_token_bitmask(2, small_vocab.size)
    matcher.rollback(1)
    matcher.fill_next_token_bitmask(bitmask, 1)
    assert (unpack_bitmask(bitmask[1], small_vocab.size) == matcher.allowed_tokens()).all()


@pytest.mark.slow
def test_masks_over_a_real_vocabulary_equal_brute_force(qwen2_tokenizer, qwen2_vocab) -> None:
    machine = syntax_machine("python", qwen2_vocab)
    text = SNIPPETS[1]
    ids = qwen2_tokenizer.encode(text, add_special_tokens=False)
    state = machine.initial
    checked = {0, 7, 21, len(ids) // 2, len(ids) - 1}
    for position, token in enumerate(ids):
        if position in checked:
            assert assert_mask_exact(machine, state)[token]
        state = machine.feed(state, qwen2_vocab.token_bytes[token])
    assert machine.is_complete(state)
