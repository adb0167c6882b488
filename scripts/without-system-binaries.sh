#!/usr/bin/env bash
# Runs a command (its arguments) as it would run on a machine with none of the
# system's PostgreSQL, Chromium, PgBouncer or promtool: the proof that the tests
# need only what `npm install` brings and what they set up themselves
# (test/binaries.ts: Debian's PgBouncer package, downloaded and unpacked).
#
# Two layers:
# - TASKHEAP_NO_SYSTEM_BINARIES=1: test/binaries.ts accepts only npm-provided
#   binaries (and the PgBouncer it unpacks) and throws when a lookup would end anywhere else (an override
#   variable, a system path), so a test that still reached for a system copy fails.
# - Where we may (root, and `unshare` works), the command runs in a private
#   mount namespace in which every path in SYSTEM_BINARIES that exists is
#   covered: a folder by an empty tmpfs, a file by an unreadable empty file.
#   Nothing outside the command sees the change, and it ends with the command.
#   Before running the command, every covered path is checked to be unusable;
#   TASKHEAP_SYSTEM_BINARIES_MASKED=1 tells test/binaries.test.ts to check it too.
#   Elsewhere only the first layer applies, and a line says so.
#
# Add here the system paths of any tool the tests come to need from npm.
set -uo pipefail

SYSTEM_BINARIES=(
  /usr/lib/postgresql /usr/local/bin/pg_ctl /usr/local/bin/initdb /usr/local/bin/postgres /usr/bin/pg_ctlcluster
  /usr/bin/chromium /usr/bin/chromium-browser /usr/lib/chromium
  /usr/bin/promtool
  /usr/sbin/pgbouncer /usr/bin/pgbouncer
)

export TASKHEAP_NO_SYSTEM_BINARIES=1
[ "$#" -gt 0 ] || { echo "usage: $0 command [args...]" >&2; exit 2; }

if [ "${TASKHEAP_INSIDE_MASK:-}" = 1 ]; then
  # Inside the namespace: cover, check, then become the command.
  empty="$(mktemp)" && chmod 000 "$empty" || exit 1
  for path in "${SYSTEM_BINARIES[@]}"; do
    if [ -d "$path" ]; then
      mount -t tmpfs -o ro,mode=000 none "$path" || { echo "could not cover $path" >&2; exit 1; }
    elif [ -e "$path" ] || [ -L "$path" ]; then
      [ -e "$path" ] || continue # a dangling link: nothing to cover
      mount --bind "$empty" "$path" || { echo "could not cover $path" >&2; exit 1; }
    fi
  done
  for path in "${SYSTEM_BINARIES[@]}"; do
    if [ -d "$path" ] && [ -n "$(ls -A "$path" 2>/dev/null)" ]; then echo "$path still lists files" >&2; exit 1; fi
    if [ -f "$path" ] && [ -s "$path" ]; then echo "$path is still usable" >&2; exit 1; fi
  done
  IFS=: read -r -a path_dirs <<<"$PATH"
  for dir in "${path_dirs[@]}"; do
    for tool in initdb pg_ctl postgres promtool chromium pgbouncer; do
      if [ -f "$dir/$tool" ] && [ -x "$dir/$tool" ] && [ -s "$dir/$tool" ]; then echo "a system $tool is still on PATH: $dir/$tool" >&2; exit 1; fi
    done
  done
  unset TASKHEAP_INSIDE_MASK
  export TASKHEAP_SYSTEM_BINARIES_MASKED=1
  exec "$@"
fi

if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
  echo "system PostgreSQL, Chromium, PgBouncer and promtool: covered in a private mount namespace, and refused by test/binaries.ts"
  TASKHEAP_INSIDE_MASK=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
echo "system PostgreSQL, Chromium, PgBouncer and promtool: refused by test/binaries.ts (not covered: covering needs root and unshare)"
# Still keep them off PATH.
PATH="$(printf '%s' "$PATH" | tr ':' '\n' | while read -r dir; do [ -x "$dir/initdb" ] || [ -x "$dir/pg_ctl" ] || [ -x "$dir/promtool" ] || [ -x "$dir/chromium" ] || [ -x "$dir/pgbouncer" ] || printf '%s:' "$dir"; done)"
export PATH="${PATH%:}"
exec "$@"
