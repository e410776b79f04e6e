#!/usr/bin/env bash
# Fill .whl/ (ignored by git) with the wheels bench/gpu/run.sh installs on the GPU machine,
# which has Python 3.12, torch, transformers 5.17, peft, typer, rich and g++ but no network:
# transformers 5.19 (the project needs >= 5.19) and the hub client it needs, the language
# server's packages (pygls, lsprotocol, cattrs, attrs), tree-sitter and its grammars,
# jsonschema with referencing, rpds-py and its specifications, the native core's build
# requirements (setuptools, pybind11), pytest, and the newer packaging and typing-extensions
# these need. run.sh installs a wheel only where its package is missing or older. Run on any
# machine with network access and pip:
#
#     bench/gpu/fetch_wheels.sh            # PYTHON=python3.12 to use another interpreter
#
# The wheels must stay under 64 MiB together (what may travel with the working tree).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
DEST=.whl
LIMIT=$((64 * 1024 * 1024))
PACKAGES=(
  transformers==5.19.0
  huggingface-hub==1.33.0
  pygls==2.1.1
  lsprotocol==2025.0.0
  cattrs==26.2.1
  attrs==26.1.0
  tree-sitter==0.26.1
  tree-sitter-python==0.25.0
  tree-sitter-javascript==0.25.0
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  referencing==0.37.0
  rpds-py==2026.9.1
  setuptools==80.9.0
  pybind11==3.1.0
  pytest==9.2.0
  pluggy==1.7.0
  iniconfig==2.3.1
  pytest-timeout==2.4.0
  packaging==26.4
  typing-extensions==4.16.0
)
mkdir -p "$DEST"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 --platform any \
  --dest "$DEST" "${PACKAGES[@]}"
total=$(du -cb "$DEST"/*.whl | tail -1 | cut -f1)
count=$(ls "$DEST"/*.whl | wc -l)
if [ "$total" -gt "$LIMIT" ]; then
  echo "error: the wheels in $DEST take $total bytes, more than the 64 MiB that may travel" >&2
  exit 1
fi
echo "$count wheels in $DEST, $((total / 1024)) KiB together (limit 65536 KiB)"
