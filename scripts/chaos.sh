#!/usr/bin/env bash
# What `make chaos` runs: the long randomized schedule of the fault-injection
# suite. Every package with a `func TestChaos…` test runs those
# tests with -race against real PostgreSQL, Redis and Redis Cluster started
# by internal/cmd/testservers; each test appends its rows to
# CHAOS_REPORT (see internal/testing/chaos), and internal/cmd/chaosreport
# prints the table and decides the exit status.
#
# Environment: CHAOS_TIME (each package's time budget, a Go duration,
# default 10m); CHAOS_SEED (replay a failure); CHAOS_REPORT (where the rows
# go, default bench-results/chaos-<time>.jsonl; the table goes beside it as
# .md); GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v).
#
# Exits non-zero when a chaos test fails, or when a row of the table (a
# fault kind on one store, against one defence) breaks the rules of
# chaos.Row.Problems: a violation with the defence on, no control run
# that met its fault and found a violation, or fewer defended runs that
# met the fault than the control needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

export CHAOS_TIME="${CHAOS_TIME:-10m}"

ensure_all
duration_seconds "$CHAOS_TIME" >/dev/null
mkdir -p bench-results
stamp=$(date +%Y%m%d-%H%M%S)
export CHAOS_REPORT="${CHAOS_REPORT:-$PWD/bench-results/chaos-$stamp.jsonl}"
case "$CHAOS_REPORT" in /*) ;; *) CHAOS_REPORT="$PWD/$CHAOS_REPORT" ;; esac
: >"$CHAOS_REPORT"
table="${CHAOS_REPORT%.jsonl}.md"
testservers=$(build_testservers)
go build -o bin/chaosreport ./internal/cmd/chaosreport

start=$SECONDS
status=0
"$testservers" -- bash scripts/lib.sh chaos_all || status=$?
echo "chaos: tests took $((SECONDS - start))s; rows in $CHAOS_REPORT"

if [[ ! -s "$CHAOS_REPORT" ]]; then
	if ((status == 0)) && [[ -z "$(for m in $(go_modules); do (cd "$m" && chaos_packages); done)" ]]; then
		echo "chaos: nothing to report"
		exit 0
	fi
	echo "chaos: no rows were reported" >&2
	exit 1
fi
report_status=0
bin/chaosreport "$CHAOS_REPORT" | tee "$table" || report_status=$?
echo "chaos: table in $table"
if ((status != 0)); then
	exit "$status"
fi
exit "$report_status"
