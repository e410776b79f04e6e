"""The SynCode arm of the syntax benchmark without SynCode: witnesses judged by
``ast.parse``, the side-by-side counting against a stand-in engine, and the skip line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import bench.syncode_peer as peer_module
from bench.syncode_peer import any_witness, side_by_side, witness
from bench.syntax import main, python_parses
from cad.grammar.syntax.python_syntax import python_syntax
from tests.grammar.syntax.conftest import RUNNING, small_vocabulary
from tests.grammar.syntax.test_masks import greedy_tokens

FILES = ["def f(x):\n    return [x, 1]\n", "if x:\n    y = {'a': (1, 2)}\n"]


def test_witnesses_complete_viable_prefixes_and_only_those() -> None:
    syntax = python_syntax(RUNNING)
    for text in ("def f(x", "x = [1, (2", "if x:\n    y = '", "class C"):
        suffix = witness(text, syntax)
        assert suffix is not None and python_parses(text + suffix), text
        found = any_witness(text)
        assert found is not None and python_parses(text + found), text
    for text in ("x = )", "def f(x))", "if x:\npass"):
        assert witness(text, syntax) is None
        assert any_witness(text) is None


class _AllowsAllButColons:
    """A stand-in engine: every token allowed except those holding a colon."""

    def __init__(self, vocabulary) -> None:
        self.mask = torch.tensor([b":" not in (data or b"") for data in vocabulary.token_bytes])
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def allowed(self, ids: list[int]) -> torch.Tensor:
        return self.mask


def test_side_by_side_counts_every_prefix_and_judges_disagreements() -> None:
    vocabulary = small_vocabulary()
    eos = vocabulary.eos_token_id
    streams = [[*greedy_tokens(vocabulary, text.encode()), eos] for text in FILES]
    peer = _AllowsAllButColons(vocabulary)
    part = side_by_side(vocabulary, streams, peer, 4, 3, lambda line: None)
    gold = part["gold"]
    tokens = sum(len(ids) for ids in streams)
    assert part["tokens"] == tokens and peer.resets == len(FILES)
    colons = sum(b":" in (vocabulary.token_bytes[t] or b"") for ids in streams for t in ids)
    assert (gold["both"], gold["ours_only"]) == (tokens - colons, colons)
    assert gold["syncode_only"] == gold["neither"] == 0
    assert all(example["ours"] and not example["syncode"] for example in gold["examples"])
    sets = part["sets"]
    assert sets["prefixes"] == 8 and sets["only_syncode"] > 0
    for example in sets["examples"]:
        assert example["allowed_by"] in ("ours", "syncode")
        if example["allowed_by"] == "syncode":
            assert example["witness"] is None  # our masks are exact: it cannot be completed
    assert part["ours"]["fill_p50_us"] > 0 and part["syncode"]["unconstrained_steps"] == 0


def test_the_arm_is_skipped_with_a_line_where_syncode_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(peer_module, "syncode_missing", lambda: "syncode is not installed")
    out = tmp_path / "syncode.json"
    assert main(["--syncode", "--out-json", str(out)]) == 0
    assert json.loads(out.read_text())["syncode"] == {"skipped": "syncode is not installed"}
    captured = capsys.readouterr()
    assert "SynCode arm skipped: syncode is not installed" in captured.err
    assert "**SynCode side by side**: skipped (syncode is not installed)." in captured.out
