#!/usr/bin/env bash
# What `make chaos` runs: the long randomized schedule of the fault-injection
# suite (issue 9). Every package with a `func TestChaos…` test runs those
# tests with -race against real PostgreSQL, Redis and Redis Cluster started
# by internal/testenv/cmd/testservers; each test appends its rows to
# CHAOS_REPORT (see internal/faults), and internal/faults/cmd/chaosreport
# prints the table and decides the exit status.
#
# Environment: CHAOS_TIME (each package's time budget, a Go duration,
# default 10m); CHAOS_SEED (replay a failure); CHAOS_REPORT (where the rows
# go, default bench-results/chaos-<time>.jsonl; the table goes beside it as
# .md); GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v).
#
# Exits non-zero when a chaos test fails, when any fault kind had a
# violation with its defence on, or when a fault kind's control runs found
# no violation (the scenario never reached its fault).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

export CHAOS_TIME="${CHAOS_TIME:-10m}"

# Prints the seconds in a Go duration made of h, m, s and ms parts (the
# forms CHAOS_TIME takes), or fails.
duration_seconds() {
	local d=$1 total=0 n unit
	[[ "$d" =~ ^([0-9]+(h|m|s|ms))+$ ]] || {
		echo "CHAOS_TIME=$d: want a Go duration such as 10m, 90s or 1h30m" >&2
		return 1
	}
	while [[ -n "$d" ]]; do
		[[ "$d" =~ ^([0-9]+)(ms|h|m|s)(.*)$ ]]
		n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $unit in
		h) total=$((total + n * 3600)) ;;
		m) total=$((total + n * 60)) ;;
		s) total=$((total + n)) ;;
		ms) total=$((total + n / 1000)) ;;
		esac
	done
	echo "$total"
}

# Every package (./path form) of the module in the current directory whose
# tests declare a TestChaos… function; go list leaves nested modules out.
chaos_packages() {
	go list -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}' ./... |
		{ xargs -r grep -l -E '^func TestChaos' || true; } | xargs -r -n1 dirname | LC_ALL=C sort -u |
		sed "s|^$PWD\$|.|; s|^$PWD/|./|"
}

run_chaos() {
	local secs timeout m pkgs failed=() found=0
	secs=$(duration_seconds "$CHAOS_TIME")
	# A package's tests share its budget, but each may overrun it by one
	# run, and the machine is shared: twice the budget plus ten minutes.
	timeout="$((2 * secs + 600))s"
	for m in $(go_modules); do
		pkgs=$(cd "$m" && chaos_packages)
		[[ -z "$pkgs" ]] && continue
		found=1
		echo "chaos: $m:" $pkgs "(CHAOS_TIME=$CHAOS_TIME, -timeout $timeout)"
		# shellcheck disable=SC2086 # lists of flags and packages
		(cd "$m" && go test -race -count=1 -run '^TestChaos' -timeout "$timeout" ${GOTESTFLAGS:-} $pkgs) ||
			failed+=("$m")
	done
	if ((!found)); then
		echo "chaos: no package declares a TestChaos test yet"
	fi
	if ((${#failed[@]})); then
		echo "chaos: go test failed in: ${failed[*]}" >&2
		return 1
	fi
}

if [[ "${1:-}" == "--inside-testservers" ]]; then
	run_chaos
	exit
fi

bash scripts/test.sh --ensure-only
duration_seconds "$CHAOS_TIME" >/dev/null
mkdir -p bench-results
stamp=$(date +%Y%m%d-%H%M%S)
export CHAOS_REPORT="${CHAOS_REPORT:-$PWD/bench-results/chaos-$stamp.jsonl}"
case "$CHAOS_REPORT" in /*) ;; *) CHAOS_REPORT="$PWD/$CHAOS_REPORT" ;; esac
: >"$CHAOS_REPORT"
table="${CHAOS_REPORT%.jsonl}.md"
testservers=$(build_testservers)
go build -o bin/chaosreport ./internal/faults/cmd/chaosreport

start=$SECONDS
status=0
"$testservers" -- bash scripts/chaos.sh --inside-testservers || status=$?
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
