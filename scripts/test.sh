#!/usr/bin/env bash
# What `make test` runs: installs the servers and tools the tests need if
# they are missing, checks formatting, then compiles each module once and
# runs its tests with -race against real PostgreSQL, Redis and Redis
# Cluster started by internal/cmd/testservers (go_test_all in
# lib.sh), with go vet and staticcheck of each module beside them once it
# is compiled, and the Redis-backed tests of workerid and tokens once
# more against Valkey (go_test_valkey in lib.sh). Every step runs even when an
# earlier check failed, so one run shows every problem; the exit status
# is non-zero if any step failed. Each step says how long it took, in
# wall and in CPU seconds.
#
# Environment: GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v);
# SNOWKEY_TEST_* point the tests at servers of one's own instead (see
# internal/testing/testenv); SNOWKEY_TEST_VALKEY_SERVER names the valkey-server of
# the Valkey pass. CI=true makes tests that lack a server fail, not skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

# -trimpath: what go vet and go test compile does not depend on where the
# clone is, so that a fresh clone finds in the build cache what an earlier
# run built of the same code elsewhere; without it, every new directory
# compiles every package of the repository again.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

start=$SECONDS
failed=()
step install ensure_all
step gofmt gofmt_check || failed+=(gofmt)
# go vet, staticcheck and the tests need the same -race build of every
# package and dependency, and two go commands started at once compile the
# same packages twice: go_test_all compiles each module once, starting
# its tests as soon as it is compiled, and says so in $built; go vet and
# staticcheck of that module, which need no server, start then (wait_built
# in lib.sh) and run beside the tests, which mostly wait on servers and
# clocks, and beside the next module's compiling. staticcheck's own
# program, whose packages nothing else compiles, is built meanwhile.
# Their reports are printed after the tests'.
built=$(mktemp -d)
export MAKE_TEST_BUILT=$built
sclog=$(mktemp)
(
	staticcheck_bin >/dev/null 2>&1 || true # staticcheck_all tries again and reports
	step staticcheck staticcheck_all
) >"$sclog" 2>&1 &
scpid=$!
vetlog=$(mktemp)
(
	step "go vet" vet_all
) >"$vetlog" 2>&1 &
vetpid=$!
# The launcher's build compiles the standard library with -race, which
# every later step needs, first; it compiles GO_TEST_P packages at once,
# as build_module does: a machine whose cores other processes keep busy
# shares them among its runnable threads, and the default (one a core)
# would leave the build a fraction of one.
step testservers go build -race -p "$GO_TEST_P" -o bin/testservers ./internal/cmd/testservers || failed+=(testservers)
step "go test" bin/testservers -- bash scripts/lib.sh go_test_all || failed+=("go test")
# Whatever became of go_test_all, go vet and staticcheck wait no longer.
touch "$built/all"
wait "$vetpid" || failed+=("go vet")
cat "$vetlog"
wait "$scpid" || failed+=(staticcheck)
cat "$sclog"
rm -rf "$sclog" "$vetlog" "$built"
echo "make test: $((SECONDS - start))s"
if ((${#failed[@]})); then
	echo "make test: FAILED: ${failed[*]}" >&2
	exit 1
fi
