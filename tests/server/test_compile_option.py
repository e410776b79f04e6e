"""``--compile`` reaches the decoder: ``cad edit`` decodes through a compiled static-cache
runtime, and the server's ``compile`` setting is part of what a loaded model depends on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cad.resolver import format, oracle
from cad.selector import loading
from cad.selector.runtime import install, installed
from cad.server.cli import main
from cad.server.serve import Settings
from tests.tiny_model import make_tiny_model

BEFORE = "def mean(values):\n    return sum(values) / len(values) + 1\n\nprint(mean([1, 2]))\n"
AFTER = "def mean(values):\n    return sum(values) / len(values)\n\nprint(mean([1, 2]))\n"


def test_edit_with_compile_runs_the_compiled_runtime(tmp_path: Path, monkeypatch) -> None:
    model = make_tiny_model(tmp_path / "model", "qwen2")
    (tmp_path / "mean.py").write_text(BEFORE)
    (tmp_path / "fix.program").write_text(format(oracle(BEFORE, AFTER)))
    forwards: list[str] = []

    def enable(loaded, graphs=None) -> None:
        # aot_eager: the same capture as inductor, without tens of seconds of C++ compiling
        runtime = install(loaded.model, loaded.device, backend="aot_eager")
        append, verify = runtime.append, runtime.verify_tree

        def counting_append(cache, token_ids):
            forwards.append("append")
            return append(cache, token_ids)

        def counting_verify(cache, tokens, parents):
            forwards.append("tree")
            return verify(cache, tokens, parents)

        monkeypatch.setattr(runtime, "append", counting_append)
        monkeypatch.setattr(runtime, "verify_tree", counting_verify)

    monkeypatch.setattr(loading, "enable_compile", enable)
    arguments = ["edit", str(tmp_path / "mean.py"), "--instr", "Drop the + 1", "--model"]
    arguments += [str(model), "--device", "cpu", "--program", str(tmp_path / "fix.program")]
    arguments += ["--stats-json", str(tmp_path / "stats.json")]
    monkeypatch.setattr(sys, "argv", ["cad", *arguments, "--write", "--compile"])
    main()
    assert (tmp_path / "mean.py").read_text() == AFTER
    stats = json.loads((tmp_path / "stats.json").read_text())
    # every forward (the prompt's included, in bucket-sized pieces) went through the
    # compiled runtime
    assert len(forwards) >= stats["forwards"] + 1


def test_the_compile_setting_reloads_the_model() -> None:
    settings = Settings()
    before = settings.model_key()
    settings.update({"cad": {"compile": True}})
    assert settings.compile is True
    assert settings.model_key() != before


def test_without_compile_no_runtime_is_installed(tiny_qwen) -> None:
    assert installed(tiny_qwen.model) is None
    assert not tiny_qwen.compiled
