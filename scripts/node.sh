#!/usr/bin/env bash
# Brings Node.js of one supported line (22, 24 or 26) into .node/<line> from the npm registry's
# `node` package, which ships the binaries, and prints the folder holding `node` so a shell can put
# it first on PATH:
#
#   export PATH="$(scripts/node.sh 26):$PATH"
#
# npm itself stays the machine's; with this folder first on PATH it runs on the Node it brings.
set -euo pipefail
line="${1:-26}"
case "$line" in
  22 | 24 | 26) ;;
  *) echo "usage: scripts/node.sh 22|24|26" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/.node/$line"
bin="$prefix/node_modules/node/bin"
if [ ! -x "$bin/node" ] || [ "$("$bin/node" -p 'process.versions.node.split(".")[0]')" != "$line" ]; then
  rm -rf "$prefix"
  mkdir -p "$prefix"
  # The package's preinstall step picks the binary for this platform from the same registry.
  npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "node@$line" >&2
fi
echo "$bin"
