#!/usr/bin/env bash
# better-sqlite3 for the extra Nodes (22 and 24): version 13, whose N-API
# prebuilds ship in its npm tarball (no compiler, one build for every ABI).
# The lockfile's 12.x is for Node 20; built from source against Node 24.19+'s
# headers, 12.x's node::ObjectWrap aborts the process when V8 collects a
# Database outside a JS context ("Assertion failed: (env) != nullptr" in
# RemoveEnvironmentCleanupHook, nodejs/node#65446), which killed a vitest
# fork at random.
#
# Usage (from the repository's root):
#   scripts/ci/better-sqlite3.sh swap <cache>   puts 13.x in node_modules (fetched into <cache> once),
#                                               the lockfile's copy kept aside
#   scripts/ci/better-sqlite3.sh restore        puts the lockfile's copy back (nothing if it is in place)
set -euo pipefail
VERSION=13.2.0
kept=node_modules/.better-sqlite3-lockfile
case "$1" in
  swap)
    dir="$2/better-sqlite3-$VERSION"
    if [ ! -f "$dir/package/prebuilds/linux-x64.node" ]; then
      rm -rf "$dir" && mkdir -p "$dir"
      tgz="$(cd "$dir" && npm pack --silent "better-sqlite3@$VERSION" | tail -n 1)"
      tar -xzf "$dir/$tgz" -C "$dir" && rm -f "$dir/$tgz"
    fi
    rm -rf "$kept"
    mv node_modules/better-sqlite3 "$kept" && cp -r "$dir/package" node_modules/better-sqlite3
    ;;
  restore)
    if [ -d "$kept" ]; then rm -rf node_modules/better-sqlite3 && mv "$kept" node_modules/better-sqlite3; fi
    ;;
  *) echo "usage: $0 swap <cache> | restore" >&2; exit 2 ;;
esac
