#!/usr/bin/env bash
# make loadproof: the proof that make test's verdicts do not depend on how
# busy the machine is. It runs what CI runs (.ci/run, so CI=true) on a
# fresh clone of the commit checked out here, LOADPROOF_RUNS times in a row
# (default 3) beside `stress-ng --cpu 8`, then once unloaded, each in a
# clone of its own so that nothing a run leaves behind helps the next. It
# stops at the first red run, keeps every run's log in
# bench-results/loadproof/, and prints two lines a run: wall time, its
# ratio to the 600 s goal, and each step's wall and CPU seconds; then
# the five slowest top-level tests (parallel, so each includes waiting);
# then where the fault suite's table of the run is (the short schedule's
# rows, which each chaos test appends to CHAOS_REPORT, printed by
# internal/cmd/chaosreport).
#
# LOADPROOF_COLD=1 runs each as on a new machine: with a Go build cache,
# module cache and staticcheck cache (GOCACHE, GOMODCACHE and
# XDG_CACHE_HOME) of its own, empty at the start and removed after, so
# that every module is downloaded and every package compiled and analysed
# again. What apt-get installs stays installed: install the servers first
# (bash scripts/lib.sh ensure_all) so that the runs compare alike.
#
# Nothing else should run on the machine meanwhile. It installs stress-ng
# with apt-get when missing and running as root. Each run is meant to
# take at most the 600 s goal on a 2-core machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs=${LOADPROOF_RUNS:-3}
cold=${LOADPROOF_COLD:-}
goal=600
if ! command -v stress-ng >/dev/null; then
	if [[ "$(id -u)" != 0 ]]; then
		echo "missing: stress-ng — install with: sudo apt-get install -y stress-ng" >&2
		exit 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng
fi

repo=$PWD
commit=$(git rev-parse --short HEAD)
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
	echo "loadproof: uncommitted changes are not in the clones; it tests $commit as committed" >&2
fi
logs=$repo/bench-results/loadproof
mkdir -p "$logs"
work=$(mktemp -d)
stress=
cleanup() {
	[[ -n "$stress" ]] && kill "$stress" 2>/dev/null
	chmod -R u+w "$work" 2>/dev/null # a module cache left by a cold run is read-only
	rm -rf "$work"
}
trap cleanup EXIT

# steps LOG prints the wall and CPU seconds of every step of the log, from
# its "STEP: ok (Ns, CPU Ms)" lines, as "STEP N s (CPU M s)", separated
# by semicolons.
steps() {
	grep -E '^[^ ].*: (ok|FAILED) \([0-9]+s, CPU [0-9]+s\)$' "$1" |
		sed -E 's/^(.*): (ok|FAILED) \(([0-9]+)s, CPU ([0-9]+)s\)$/\1 \3 s (CPU \4 s)/' | paste -sd ';' | sed 's/;/; /g'
}

# one NAME LOAD runs .ci/run once on a fresh clone, beside stress-ng when
# LOAD is "stress", and prints its line.
one() {
	local name=$1 load=$2 dir=$work/$1 log=$logs/$commit-$1.log start status=0
	: >"$logs/$commit-$name-chaos.jsonl"
	git clone -q "$repo" "$dir"
	git -C "$dir" checkout -q "$commit"
	if [[ "$load" == stress ]]; then
		stress-ng --cpu 8 >/dev/null 2>&1 &
		stress=$!
	fi
	local env=(CHAOS_REPORT="$logs/$commit-$name-chaos.jsonl" GOTESTFLAGS=-v)
	if [[ -n "$cold" ]]; then
		mkdir -p "$dir.cache"
		env+=(GOCACHE="$dir.cache/go-build" GOMODCACHE="$dir.cache/mod" XDG_CACHE_HOME="$dir.cache")
	fi
	start=$SECONDS
	(cd "$dir" && env "${env[@]}" bash .ci/run) >"$log" 2>&1 || status=$?
	local wall=$((SECONDS - start))
	if [[ -n "$stress" ]]; then
		kill "$stress" 2>/dev/null
		wait "$stress" 2>/dev/null || true
		stress=
	fi
	if [[ -n "$cold" ]]; then
		# The module cache is read-only; go clean removes it.
		GOMODCACHE="$dir.cache/mod" go clean -modcache
	fi
	rm -rf "$dir" "$dir.cache"
	printf '%s  %-8s %s %s  wall %4d s (%s× the %d s goal)  %s  %s\n' \
		"$commit" "$load" "$([[ -n "$cold" ]] && echo cold || echo warm)" "$([[ $status == 0 ]] && echo green || echo RED)" "$wall" \
		"$(awk -v w="$wall" -v g="$goal" 'BEGIN { printf "%.2f", w / g }')" "$goal" \
		"$(steps "$log")" "$log"
	echo "  slowest: $(grep -E '^--- PASS: Test[^/ ]+ \(' "$log" | sed -E 's/--- PASS: ([^ ]+) \(([0-9.]+)s\)/\2 \1/' |
		sort -rn | head -5 | awk '{ printf "%s%s %.0f s", (NR > 1 ? ", " : ""), $2, $1 }')"
	"$work/chaosreport" "$logs/$commit-$name-chaos.jsonl" >"$logs/$commit-$name-chaos.md" 2>&1 || true
	echo "  fault suite: $(tail -n +3 "$logs/$commit-$name-chaos.md" | grep -c '^|') rows, table in $logs/$commit-$name-chaos.md"
	if [[ $status != 0 ]]; then
		grep -E '^(--- FAIL|FAIL|panic:)' "$log" | head -20 >&2
		return 1
	fi
}

go build -o "$work/chaosreport" ./internal/cmd/chaosreport
for ((i = 1; i <= runs; i++)); do
	one "stress$i" stress
done
one quiet quiet
