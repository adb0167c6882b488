#!/usr/bin/env bash
# The suite under load: starts two CPU-burning processes (one per core of the
# 2-core machines this project runs on) and runs `npm test` N times in a row,
# printing each run's result and time, then a closing line
#
#   stress: K of N runs passed
#
# and exits non-zero unless every run passed. The burners are stopped when the
# script ends, however it ends (success, failure, Ctrl-C, a kill).
#
# Usage: scripts/stress.sh [N]   (N defaults to $STRESS_RUNS, else 5; `npm run test:stress`)
# STRESS_TESTS: vitest filters passed through to each run (e.g.
# "test/durable/postgres"), for trying the script on a subset.
# STRESS_BURNERS: how many burners (default 2).
#
# .ci/run runs it with N=1: one suite run takes about 2 minutes on the idle
# machine and several times that beside the burners, and CI already spends
# its time on three suite runs (Node 20, 22, 24) of its 90-minute budget; five
# loaded runs there would take too long on their own. The five-run check is for a
# person to run before claiming the suite is green under load.
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${1:-${STRESS_RUNS:-5}}"
case "$runs" in '' | *[!0-9]* | 0) echo "stress: N must be a positive integer, got '$runs'" >&2; exit 2 ;; esac
burner_count="${STRESS_BURNERS:-2}"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null; done
  burners=()
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$burner_count"); do
  node -e 'for (;;);' &
  burners+=("$!")
done
echo "stress: $burner_count CPU burners running (pids ${burners[*]}); $runs run(s) of npm test${STRESS_TESTS:+ -- $STRESS_TESTS}"

passed=0
results=()
for run in $(seq "$runs"); do
  start=$SECONDS
  echo "=== stress run $run of $runs ==="
  # shellcheck disable=SC2086 # the filters are words on purpose
  if npm test -- ${STRESS_TESTS:-}; then
    outcome=passed
    passed=$((passed + 1))
  else
    outcome=FAILED
  fi
  results+=("run $run: $outcome in $((SECONDS - start)) s")
  echo "stress: ${results[-1]}"
done

stop_burners
printf 'stress: %s\n' "${results[@]}"
echo "stress: $passed of $runs runs passed"
[ "$passed" = "$runs" ]
