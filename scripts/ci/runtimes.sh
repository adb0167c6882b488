#!/usr/bin/env bash
# taskheap on Bun and Deno (issue 38): vitest itself runs under each runtime
# (`bun --bun`, `deno run -A`) on the files that prove what the README says
# works there:
#
#   test/examples/                 every example, a child process of the runtime (test/examples/child.ts)
#   test/durable/conformance/      the store conformance: in memory, SQLite (node:sqlite and
#                                  better-sqlite3 13), PostgreSQL (pg)
#   test/core/ (scheduler, cancel, retry-timeout), test/jobs/, test/rules/
#                                  the in-memory core, recurring jobs, zones and DST
#   test/threads/ (threads, durable)  module handlers in worker threads, in memory and on both stores
#   test/runtimes/                 what differs there (Node-only thread options refused, drivers)
#
# test/threads/lifecycle.test.ts is left out: some of it tests Node's own
# thread options (resourceLimits, execArgv), which taskheap refuses on Bun and
# Deno, and a child it spawns is `node --import tsx`. The runtimes are the npm
# packages at the versions scripts/ci/install-runtime.sh pins (Bun 1.4.5,
# Deno 2.9.6). They run one after the other, each with its own PostgreSQL server
# (test/global-postgres.ts); their output is printed once both have ended. better-sqlite3 13 (a Node-API addon, which
# both need; the lockfile's 12 is not one) is swapped in for them by
# scripts/ci/better-sqlite3.sh unless it already is, and put back after.
#
# Usage: scripts/ci/runtimes.sh <cache> <out>
#   writes vitest's JSON reports <out>/bun.json and <out>/deno.json and its
#   exit statuses <out>/bun.status and <out>/deno.status (.ci/run counts them:
#   a missing report is a failure) and exits non-zero if a runtime could not
#   be installed or a run failed. TASKHEAP_CI_TESTS narrows the files as in
#   .ci/run.
set -uo pipefail
cd "$(dirname "$0")/../.."
cache="$1" out="$2"
mkdir -p "$out" && rm -f "$out"/bun.* "$out"/deno.*
files=(test/examples/ test/durable/conformance/ test/core/scheduler.test.ts test/core/cancel.test.ts
  test/core/retry-timeout.test.ts test/jobs/ test/rules/ test/threads/threads.test.ts test/threads/durable.test.ts test/runtimes/)
[ -n "${TASKHEAP_CI_TESTS:-}" ] && read -ra files <<<"$TASKHEAP_CI_TESTS"

status=0
bun="$(bash scripts/ci/install-runtime.sh bun "$cache")" || { echo "installing Bun failed"; status=1; }
deno="$(bash scripts/ci/install-runtime.sh deno "$cache")" || { echo "installing Deno failed"; status=1; }
if [ ! -d node_modules/.better-sqlite3-lockfile ]; then
  trap 'bash scripts/ci/better-sqlite3.sh restore' EXIT
  # Without it the conformance would skip better-sqlite3 (it does not load): no run, no report, counted as failed.
  bash scripts/ci/better-sqlite3.sh swap "$cache" || { echo "fetching better-sqlite3 13 failed: Bun and Deno not run"; exit 1; }
fi

# Runs vitest under runtime $1 (the command in the further arguments): its report to <out>/$1.json,
# its output to <out>/$1.log, its exit status to <out>/$1.status.
run() {
  local name="$1" code=0
  shift
  NO_COLOR=1 "$@" node_modules/vitest/vitest.mjs run "${files[@]}" \
    --reporter=default --reporter=json --outputFile.json="$out/$name.json" >"$out/$name.log" 2>&1 || code=$?
  echo "$code" >"$out/$name.status"
  return "$code"
}
started=$SECONDS
# One after the other: side by side they doubled the load, and the suite's real-time margins
# (a PostgreSQL scenario's 300 ms, a thread test's 1.5 s lease) failed one run in five.
if [ -n "${bun:-}" ]; then run bun "$bun" --bun || status=1; fi
if [ -n "${deno:-}" ]; then run deno "$deno" run -A || status=1; fi
for name in bun deno; do
  [ -f "$out/$name.log" ] || continue
  if [ "$name" = bun ]; then echo "=== tests on Bun $("$bun" --version) ==="; else echo "=== tests on Deno $("$deno" --version | head -n 1 | cut -d ' ' -f 2) ==="; fi
  cat "$out/$name.log"
done
echo "Bun and Deno: $((SECONDS - started)) s for both runs"
exit $status
