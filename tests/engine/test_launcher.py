"""``cad-engine``: vLLM's arguments pass through, the plugin and the processor are switched on,
and install problems are one line."""

from __future__ import annotations

import sys

import pytest

from cad.engine import launcher
from cad.engine.launcher import PROCESSOR, LaunchError, engine_arguments, plugin_names


def test_processor_added_unless_speculative_decoding() -> None:
    base = ["--model", "m", "--tensor-parallel-size", "2"]
    assert engine_arguments(base) == [*base, "--logits-processors", PROCESSOR]
    spec = [*base, "--speculative-config", '{"method": "ngram"}']
    assert engine_arguments(spec) == spec
    assert engine_arguments(["-sc", "{}"]) == ["-sc", "{}"]
    mine = ["--logits-processors", "my.Proc"]
    assert engine_arguments(mine) == ["--logits-processors", PROCESSOR, "my.Proc"]
    assert engine_arguments([*base, "--logits-processors", PROCESSOR]).count(PROCESSOR) == 1


def test_plugin_names_keep_the_operators() -> None:
    assert plugin_names(None) == "cad"
    assert plugin_names("") == "cad"
    assert plugin_names("lora_filesystem_resolver") == "lora_filesystem_resolver,cad"
    assert plugin_names("cad,x") == "cad,x"


def test_max_edits_is_ours() -> None:
    args = ["--model", "m", "--max-edits", "40", "--port", "1"]
    assert launcher._take_max_edits(args) == "40"
    assert args == ["--model", "m", "--port", "1"]
    args = ["--max-edits=3"]
    assert launcher._take_max_edits(args) == "3" and args == []
    with pytest.raises(LaunchError, match="--max-edits"):
        launcher._take_max_edits(["--max-edits", "many"])
    assert launcher._take_max_edits(["--model", "m"]) is None


def test_missing_vllm_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(SystemExit) as exit_:
        launcher.main(["--model", "m"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: vLLM is not installed") and "\n" not in err
    assert "copy-as-decode[vllm]" in err


def _model_folder(folder, heads: int) -> str:
    """A model configuration (no weights) whose attention heads are ``64 // heads`` wide."""
    from transformers import Qwen2Config

    Qwen2Config(hidden_size=64, num_attention_heads=heads, num_key_value_heads=1).save_pretrained(
        folder
    )
    return str(folder)


def test_head_size_vllm_cannot_run_is_refused_before_start(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(launcher, "check_vllm", lambda: None)
    monkeypatch.setattr(launcher, "cpu_head_sizes", lambda: [32, 64, 128])
    monkeypatch.setattr(launcher.runpy, "run_module", pytest.fail)
    narrow = _model_folder(tmp_path / "narrow", heads=4)
    with pytest.raises(SystemExit) as exit_:
        launcher.main(["--model", narrow, "--port", "1"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"error: model {narrow} has attention heads of size 16") and "\n" not in err
    )
    assert "32, 64, 128" in err and "cad serve" in err


def test_head_size_vllm_runs_passes(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(launcher, "cpu_head_sizes", lambda: [32, 64, 128])
    launcher.check_head_size(["--model=" + _model_folder(tmp_path / "wide", heads=2)])
    launcher.check_head_size(["--model", str(tmp_path / "missing")])
    launcher.check_head_size(["--port", "1"])
    monkeypatch.setattr(launcher, "cpu_head_sizes", lambda: None)
    launcher.check_head_size(["--model", _model_folder(tmp_path / "narrow", heads=4)])
