"""The syntax benchmark's counting: what parses, which sampled edits count as finished and
parsing, and the file-by-file agreement of the grammar with ``ast.parse``."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.syntax import Tally, check_files, parses, percentile
from cad.grammar.syntax.python_syntax import LATEST, SUPPORTED_VERSIONS
from cad.selector.stats import DecodeResult, DecodeStats

VERSION = sys.version_info[:2] if sys.version_info[:2] in SUPPORTED_VERSIONS else LATEST
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_reference_parsers_refuse_broken_files() -> None:
    assert parses("python", "def f(x):\n    return x\n")
    assert not parses("python", "def f(x)\n    return x\n")
    assert not parses("python", "if x:\npass\n")
    assert parses("json", '{"a": [1, 2]}\n')
    assert not parses("json", '{"a": [1, 2}\n')
    assert not parses("json", "NaN")
    assert parses("json-schema", '{"n": 3}', SCHEMA)
    assert not parses("json-schema", '{"n": "3"}', SCHEMA)


def _result(text: str, truncated: bool = False) -> DecodeResult:
    return DecodeResult(None, text, DecodeStats(truncated=truncated))


def test_tally_counts_only_finished_edits_and_names_broken_ones() -> None:
    tally = Tally()
    tally.add("a", _result("x = 1\n"), True)
    tally.add("b", _result("x = (\n"), False)
    tally.add("c", _result("x = (\n", truncated=True), False)
    tally.add("d", None, False)
    assert (tally.runs, tally.finished, tally.parsed) == (4, 2, 1)
    assert tally.broken == ["b"] and tally.errors == ["d"]
    assert tally.share == 0.5
    assert Tally().share is None


def test_check_files_reports_each_disagreement_by_name(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("class C:\n    x: int = 1\n")
    (tmp_path / "broken.py").write_text("class C\n    pass\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n")
    result = check_files(sorted(tmp_path.glob("*.py")), tmp_path, VERSION)
    assert result["checked"] == 3
    assert result["ast_accepts"] == result["grammar_accepts"] == 2
    assert result["false_rejections"] == result["false_acceptances"] == []


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) in (50.0, 51.0)
    assert percentile(values, 0.99) == 99.0
    assert percentile([], 0.5) == 0.0


def test_every_document_and_seed_samples_with_its_own_seed() -> None:
    from bench.syntax import independent_seed

    seeds = {independent_seed(document, seed) for document in range(500) for seed in range(5)}
    assert len(seeds) == 2500


def test_forward_cost_is_exact_and_reports_host_time_per_forward(tiny_qwen) -> None:
    from bench.syntax import forward_cost
    from cad.training import load_humanevalpack

    result = forward_cost(tiny_qwen, load_humanevalpack("python")[:2])
    assert not result["failures"]
    assert {(row["mode"], row["constrained"]) for row in result["rows"]} == {
        ("program", False),
        ("program", True),
        ("rewrite", False),
        ("rewrite", True),
    }
    for row in result["rows"]:
        assert row["exact"] == row["edits"] == 2
        assert 0 < row["host_ms_per_forward_median"] < 1000 * row["wall_median_s"]
