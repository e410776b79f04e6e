"""The mask benchmark end to end on fixture schemas: runs repeated cold, the table giving
the median over runs and the p99's range, and the JSON keeping every run."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.masks import Item, Runner, bench_grammars, main, schema_records
from tests.grammar.cfg.schema_instances import FIXTURES


def test_runs_are_combined_into_medians_with_the_p99_range(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "jsonschemabench").symlink_to(FIXTURES)
    out = tmp_path / "masks"
    argv = ["--data", str(data), "--schemas", "2", "--docs", "1", "--program-edits", "2",
            "--tokenizers", "qwen2", "--engines", "cad", "--runs", "2", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    table = out.with_suffix(".md").read_text()
    assert "median of 2 cold runs" in table
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["runs"] == 2
    for per_engine in result["tokenizers"]["qwen2"]["workloads"].values():
        row = per_engine["cad native"]
        assert len(row["runs"]) == 2 and row["masks"] > 0
        low, high = row["mask_p99_us_range"]
        assert low <= row["mask_p99_us"] <= high
        assert row["mask_p50_us"] <= row["mask_p99_us"]
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_schema_offset_takes_the_next_schemas_of_the_same_shuffle(tmp_path: Path) -> None:
    (tmp_path / "jsonschemabench").symlink_to(FIXTURES)
    folder = tmp_path / "jsonschemabench"
    every = schema_records(folder, 4)
    assert len(every) == 4
    assert schema_records(folder, 2) == every[:2]
    second = schema_records(folder, 2, offset=2)
    assert second == every[2:]
    assert all(record not in every[:2] for record in second)


def test_cad_with_its_masks_built_decodes_the_same_streams(tmp_path: Path) -> None:
    """``cad-ready`` waits for each grammar's worker before its documents: the same grammars,
    masks and verdicts as ``cad``, in a row of its own with no compile time (its compile is
    ``cad``'s call again, helped by what ``cad``'s compile of the same schema memoised)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "jsonschemabench").symlink_to(FIXTURES)
    out = tmp_path / "masks"
    argv = ["--data", str(data), "--schemas", "2", "--docs", "1", "--program-edits", "1",
            "--tokenizers", "qwen2", "--engines", "cad,cad-ready", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    workloads = result["tokenizers"]["qwen2"]["workloads"]
    for workload in ("JSON-Schema compact", "JSON-Schema pretty", "JSON", "FunQL"):
        cad, ready = (
            workloads[workload]["cad native"],
            workloads[workload]["cad native, masks built"],
        )
        for key in ("grammars", "masks", "rejected", "compile_failures"):
            assert ready[key] == cad[key], (workload, key)
        assert ready["masks"] > 0
        assert cad["compile_p50_ms"] > 0 and math.isnan(ready["compile_p50_ms"])
    assert "cad native, masks built" in out.with_suffix(".md").read_text()


class Refusing(Runner):
    """A runner that refuses the grammars whose source is in ``refused``."""

    def __init__(self, name: str, refused: set[str]) -> None:
        self.name = name
        self.refused = refused

    def compile(self, item: Item) -> str:
        if item.source in self.refused:
            raise ValueError(item.source)
        return item.source

    def run(self, compiled: str, tokens: list[int], times: list[float]) -> bool:
        times.append(1e-6)
        return True


def test_compile_medians_over_the_grammars_every_engine_compiled() -> None:
    """An engine that refuses a grammar has no time for it; the common column compares the
    engines on the grammars all of them compiled, and each engine's own column keeps all of
    its grammars."""
    items = [Item("ebnf", name, ["x"]) for name in ("a", "b", "c")]
    runners = [Refusing("all", set()), Refusing("some", {"b"}), Refusing("none", {"c"})]
    rows = bench_grammars(runners, items, lambda text: [1], 0)
    assert [len(rows[name].compiles) for name in ("all", "some", "none")] == [3, 2, 2]
    assert [rows[name].by_grammar[1] is None for name in ("all", "some", "none")] == [
        False,
        True,
        False,
    ]
    for name in ("all", "some", "none"):
        assert rows[name].common == [rows[name].by_grammar[0]]
        assert rows[name].summary()["compile_common_p50_ms"] > 0
