#!/usr/bin/env bash
# What `make bench` runs: every benchmark of every module of the repository,
# against real servers started by internal/testenv/cmd/testservers, then the
# ratios of every *.ratios spec in the tree (see internal/benchratio).
#
# Output: bench-results/raw.txt (the go test output) and
# bench-results/ratios.md (the tables, also printed).
#
# Environment: BENCHCOUNT (runs of each benchmark, default 5), BENCH (the
# -bench regular expression, default "."), BENCHTIME (go test -benchtime,
# default 1s), BENCHTIMEOUT (go test -timeout, default 60m).
#
# Unmet goals do not fail the run: benchmarks measure, they do not decide.
# A benchmark that fails, or a malformed spec, does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

out=bench-results
raw=$out/raw.txt

run_benchmarks() {
	local m failed=()
	for m in $(go_modules); do
		echo "go test -bench: $m"
		(cd "$m" && go test -run '^$' -bench "${BENCH:-.}" -benchmem -count "${BENCHCOUNT:-5}" \
			-benchtime "${BENCHTIME:-1s}" -timeout "${BENCHTIMEOUT:-60m}" ./...) 2>&1 |
			tee -a "$raw" || failed+=("$m")
	done
	# Benchmarks named ...JSONv2 exist only under GOEXPERIMENT=jsonv2.
	local pkgs
	pkgs=$(jsonv2_packages)
	if [[ -n "$pkgs" ]]; then
		echo "go test -bench (GOEXPERIMENT=jsonv2):" $pkgs
		# shellcheck disable=SC2086 # a list of packages
		GOEXPERIMENT=jsonv2 go test -run '^$' -bench 'JSONv2' -benchmem -count "${BENCHCOUNT:-5}" \
			-benchtime "${BENCHTIME:-1s}" -timeout "${BENCHTIMEOUT:-60m}" $pkgs 2>&1 |
			tee -a "$raw" || failed+=("jsonv2")
	fi
	if ((${#failed[@]})); then
		echo "benchmarks failed in: ${failed[*]}" >&2
		return 1
	fi
}

if [[ "${1:-}" == "--inside-testservers" ]]; then
	run_benchmarks
	exit
fi

bash scripts/test.sh --ensure-only
mkdir -p "$out"
: >"$raw"
testservers=$(build_testservers)
go build -o bin/benchratio ./internal/benchratio/cmd/benchratio

status=0
"$testservers" -- bash scripts/bench.sh --inside-testservers || status=$?

specs=()
while IFS= read -r -d '' f; do specs+=("$f"); done < <(
	find . \( -name .git -o -name testdata -o -name node_modules -o -path ./bench-results \) -prune -o \
		-name '*.ratios' -type f -print0 | LC_ALL=C sort -z)

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
