"""Build of the native masking core; all other metadata is in pyproject.toml.

The C++17 sources in ``grammar/native/`` compile into ``cad.grammar._native`` with the
machine's C++ compiler. A missing compiler stops the install with one line that says what to
install."""

from __future__ import annotations

import os
import sys
import tempfile
from glob import glob
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

NATIVE_SOURCES = sorted(glob("grammar/native/*.cpp"))
# CAD_NATIVE_SANITIZE=1 builds with AddressSanitizer and UBSan for the differential tests,
# CAD_NATIVE_SANITIZE=thread with ThreadSanitizer for the threaded fills (run Python with
# LD_PRELOAD of the sanitizer's library; see docs/masking.md).
SANITIZERS = {"1": "address,undefined", "thread": "thread"}
SANITIZE = SANITIZERS.get(os.environ.get("CAD_NATIVE_SANITIZE", ""))
COMPILE_FLAGS = (
    ["-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={SANITIZE}"] if SANITIZE else ["-O3"]
)
LINK_FLAGS = [f"-fsanitize={SANITIZE}"] if SANITIZE else []


class BuildNative(build_ext):
    """``build_ext`` that names the missing C++ compiler in one line instead of a traceback."""

    def build_extensions(self) -> None:
        if not self._compiles_cpp17():
            sys.exit(
                "error: cad's native masking core needs a C++17 compiler and none works here; "
                "install one (Debian/Ubuntu: apt-get install g++) and run pip again"
            )
        super().build_extensions()

    def _compiles_cpp17(self) -> bool:
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder, "probe.cpp")
            source.write_text(
                "#include <optional>\nint main() { return std::optional<int>(0).value(); }\n"
            )
            try:
                self.compiler.compile(
                    [str(source)], output_dir=folder, extra_postargs=["-std=c++17"]
                )
            except Exception:
                return False
        return True


ParallelCompile("CAD_BUILD_JOBS", default=2).install()

setup(
    ext_modules=[
        Pybind11Extension(
            "cad.grammar._native",
            NATIVE_SOURCES,
            cxx_std=17,
            extra_compile_args=COMPILE_FLAGS,
            extra_link_args=LINK_FLAGS,
            depends=sorted(glob("grammar/native/*.h")),
        )
    ],
    cmdclass={"build_ext": BuildNative},
)
