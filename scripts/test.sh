#!/usr/bin/env bash
# What `make test` runs: installs the servers and tools the tests need if
# they are missing, checks formatting, then runs every module's tests
# with -race against real PostgreSQL, Redis and Redis Cluster started by
# internal/testenv/cmd/testservers, with go vet and staticcheck beside
# them, and the Redis-backed tests of workerid and tokens once more
# against Valkey (go_test_valkey in lib.sh). Every step runs even when an
# earlier check failed, so one run shows every problem; the exit status
# is non-zero if any step failed. Each step says how long it took.
#
# Environment: GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v);
# SNOWKEY_TEST_* point the tests at servers of one's own instead (see
# internal/testenv); SNOWKEY_TEST_VALKEY_SERVER names the valkey-server of
# the Valkey pass. CI=true makes tests that lack a server fail, not skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

# -trimpath: what go vet and go test compile does not depend on where the
# clone is, so that a fresh clone finds in the build cache what an earlier
# run built of the same code elsewhere. Without it each new directory
# compiled every package of the repository again: go vet of a fresh clone
# took 49 s of CPU, and 1.8 s with -trimpath once another clone had built
# the same code.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

start=$SECONDS
failed=()
step install ensure_all
step gofmt gofmt_check || failed+=(gofmt)
# staticcheck runs while go vet and the tests run, its report printed
# after theirs: it needs no server, and its run (minutes of CPU; on a new
# machine it first analyses the standard library and every dependency)
# then fills time in which the tests mostly wait on servers and clocks.
# Started after go vet, it ended last: 620 s into a run under
# stress-ng --cpu 8 whose tests had ended by 587 s.
# go vet runs beside them too. Run before the tests, it held them back
# by 170-200 s under stress-ng --cpu 8 (68 s on a quiet machine), while
# the tests' own compiling of the same -race packages fills the build
# cache as well: whichever of the two builds a package first, the other
# finds it there.
sclog=$(mktemp)
step staticcheck staticcheck_all >"$sclog" 2>&1 &
scpid=$!
vetlog=$(mktemp)
step "go vet" vet_all >"$vetlog" 2>&1 &
vetpid=$!
testservers=$(build_testservers)
step "go test" "$testservers" -- bash scripts/lib.sh go_test_all || failed+=("go test")
wait "$vetpid" || failed+=("go vet")
cat "$vetlog"
wait "$scpid" || failed+=(staticcheck)
cat "$sclog"
rm -f "$sclog" "$vetlog"
echo "make test: $((SECONDS - start))s"
if ((${#failed[@]})); then
	echo "make test: FAILED: ${failed[*]}" >&2
	exit 1
fi
