#!/usr/bin/env bash
# What `make test` runs: installs the servers and tools the tests need if
# they are missing, checks formatting, go vet and staticcheck, then runs
# every module's tests with -race against real PostgreSQL, Redis and Redis
# Cluster started by internal/testenv/cmd/testservers (staticcheck runs
# beside the tests), and the Redis-backed tests of workerid and tokens once
# more against Valkey (go_test_valkey in lib.sh). Every step runs even when an earlier check failed, so
# one run shows every problem; the exit status is non-zero if any step
# failed. Each step says how long it took.
#
# Environment: GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v);
# SNOWKEY_TEST_* point the tests at servers of one's own instead (see
# internal/testenv); SNOWKEY_TEST_VALKEY_SERVER names the valkey-server of
# the Valkey pass. CI=true makes tests that lack a server fail, not skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

start=$SECONDS
failed=()
step install ensure_all
step gofmt gofmt_check || failed+=(gofmt)
step "go vet" vet_all || failed+=("go vet")
# staticcheck runs while the tests run, its report printed after theirs: it
# needs no server, and its first run on a machine (analysing the standard
# library and every dependency: minutes of CPU) then fills time in which
# the tests mostly wait on servers and clocks. It starts after go vet,
# whose -race build the tests reuse, so the two do not compile the same
# packages at once.
sclog=$(mktemp)
step staticcheck staticcheck_all >"$sclog" 2>&1 &
scpid=$!
testservers=$(build_testservers)
step "go test" "$testservers" -- bash scripts/lib.sh go_test_all || failed+=("go test")
wait "$scpid" || failed+=(staticcheck)
cat "$sclog"
rm -f "$sclog"
echo "make test: $((SECONDS - start))s"
if ((${#failed[@]})); then
	echo "make test: FAILED: ${failed[*]}" >&2
	exit 1
fi
