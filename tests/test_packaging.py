"""Packaging: everything installs under the one ``cad`` namespace, nothing under a generic name."""

from __future__ import annotations

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


@pytest.mark.slow
def test_wheel_holds_only_the_cad_namespace(tmp_path):
    """Built without isolation from the dev environment (which holds pybind11), offline."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("copy_as_decode-*.whl")
    tops = {Path(name).parts[0] for name in zipfile.ZipFile(wheel).namelist()}
    tops = {top for top in tops if not top.endswith((".dist-info", ".data"))}
    assert tops == {"cad"}
