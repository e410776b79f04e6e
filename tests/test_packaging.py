"""Packaging: everything installs under the one ``cad`` namespace, nothing under a generic name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERIC = ("resolver", "grammar", "selector", "server", "training", "engine", "bench")


def _setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_cad():
    config = _setuptools_config()
    listed = set(config["packages"])
    for name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            dotted = ".".join((name, *relative.parts))
            assert dotted in listed, f"{dotted} ({init.parent}) is not installed"


def test_installed_copy_has_cad_and_no_generic_names(tmp_path):
    probe = (
        "import importlib, importlib.util, cad, cad.resolver, cad.grammar, cad.selector, "
        "cad.server.cli, cad.training\n"
        f"found = [n for n in {GENERIC!r} if importlib.util.find_spec(n) is not None]\n"
        "print(','.join(found) or 'none')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "none"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel, built without isolation from the dev environment (which holds
    pybind11), offline."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(folder), str(ROOT)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (built,) = folder.glob("copy_as_decode-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_only_the_cad_namespace(wheel):
    tops = {Path(name).parts[0] for name in zipfile.ZipFile(wheel).namelist()}
    tops = {top for top in tops if not top.endswith((".dist-info", ".data"))}
    assert tops == {"cad"}


@pytest.mark.slow
def test_a_regular_install_runs_every_command_that_reads_packaged_data(wheel, tmp_path):
    """The wheel installed into a fresh environment (its dependencies borrowed from this one
    through a path file, the checkout nowhere on the path), run from outside the checkout."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "env")], check=True)
    python = tmp_path / "env" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    borrowed = [path for path in sys.path if path.endswith("site-packages")]
    Path(site, "borrowed-dependencies.pth").write_text("\n".join(borrowed) + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    cad = tmp_path / "env" / "bin" / "cad"
    run = tmp_path / "run"
    run.mkdir()
    tokenizer = str(ROOT / "tests" / "fixtures" / "tokenizers" / "qwen2")
    env = {**os.environ, "CAD_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    commands = {
        "module": [python, "-m", "cad", "--help"],
        "location": [python, "-c", "import cad; print(cad.__file__)"],
        "analyze": [cad, "analyze", "heval-python", "--tokenizer", tokenizer, "--json"],
        "eval": [cad, "eval", "--perturb", "1", "--data", "heval-js", "--limit", "4", "--json"],
        "calibrate": [cad, "calibrate", "--data", "heval-python", "--tokenizer", tokenizer,
                      "--limit", "4", "--out", str(run / "drafts.json")],
    }  # fmt: skip
    outputs = {}
    for name, command in commands.items():
        done = subprocess.run(command, capture_output=True, text=True, cwd=run, env=env)
        assert done.returncode == 0, (name, done.stderr)
        outputs[name] = done.stdout
    assert outputs["location"].startswith(site), outputs["location"]
    assert json.loads(outputs["analyze"])["n"] == 164
    assert json.loads(outputs["eval"])["n"] == 4
    assert (run / "drafts.json").is_file()
