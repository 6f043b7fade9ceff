#!/usr/bin/env bash
# What `make fuzz` runs: every fuzz target (func FuzzXxx in a *_test.go file
# of any module of the repository) alone, for FUZZTIME each (default 15s),
# stopping at the first failure. The failing input is kept by go test under
# the package's testdata/fuzz/FuzzXxx/; commit it as a regression case.
#
# Environment: FUZZTIME (a go test -fuzztime value), FUZZ (an extended
# regular expression; only targets whose name matches it run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

fuzztime=${FUZZTIME:-15s}
filter=${FUZZ:-.}

# module_of DIR prints the nearest directory at or above DIR with a go.mod.
module_of() {
	local d=$1
	while [[ ! -f "$d/go.mod" ]]; do
		[[ "$d" == . ]] && return 1
		d=$(dirname "$d")
	done
	echo "$d"
}

# One target a line: "module-dir package-dir FuzzName".
targets=()
while IFS= read -r -d '' file; do
	dir=$(dirname "$file")
	mod=$(module_of "$dir") || continue
	while IFS= read -r name; do
		targets+=("$mod $dir $name")
	done < <(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*\*testing\.F\).*/\1/p' "$file" | grep -E -- "$filter" || true)
done < <(repo_find \
	-name '*_test.go' -type f -print0 | LC_ALL=C sort -z)

if ((${#targets[@]} == 0)); then
	echo "fuzz: no fuzz targets found"
	exit 0
fi

echo "fuzz: ${#targets[@]} target(s), ${fuzztime} each"
for t in "${targets[@]}"; do
	read -r mod dir name <<<"$t"
	rel=${dir#"$mod"}
	rel=${rel#/}
	pkg=./$rel
	echo "fuzz: $name in $dir"
	if ! (cd "$mod" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"); then
		echo "fuzz: $name in $dir FAILED" >&2
		exit 1
	fi
done
echo "fuzz: all ${#targets[@]} target(s) passed"
