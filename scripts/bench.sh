#!/usr/bin/env bash
# What `make bench` runs: every benchmark of every module of the repository,
# against real servers started by internal/cmd/testservers, then the
# ratios of every *.ratios spec in the tree (see internal/bench/benchratio).
#
# Output: bench-results/raw.txt (the go test output) and
# bench-results/ratios.md (the tables, also printed).
#
# Environment: BENCHCOUNT (runs of each benchmark, default 5), BENCH (the
# -bench regular expression, default "."), BENCHSKIP (go test -skip: the
# benchmarks to leave out, e.g. 'FleetColdStart/.*/16bits', whose 65,535
# instances take minutes a run), BENCHTIME (go test -benchtime, default
# 1s), BENCHTIMEOUT (go test -timeout, default 60m).
#
# Unmet goals do not fail the run: benchmarks measure, they do not decide.
# A benchmark that fails, or a malformed spec, does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

out=bench-results
raw=$out/raw.txt

ensure_all
mkdir -p "$out"
: >"$raw"
testservers=$(build_testservers)
go build -o bin/benchratio ./internal/cmd/benchratio

status=0
"$testservers" -- bash scripts/lib.sh bench_all "$raw" || status=$?

specs=()
while IFS= read -r -d '' f; do specs+=("$f"); done < <(repo_find -name '*.ratios' -type f -print0 | LC_ALL=C sort -z)

: >"$out/ratios.md"
if ((${#specs[@]} == 0)); then
	echo "bench: no *.ratios spec files found"
fi
for spec in "${specs[@]}"; do
	echo
	bin/benchratio -spec "$spec" "$raw" | tee -a "$out/ratios.md" || status=1
	echo >>"$out/ratios.md"
done
echo
echo "bench: raw output in $raw, ratios in $out/ratios.md"
exit "$status"
