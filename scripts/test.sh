#!/usr/bin/env bash
# What `make test` runs: installs the servers the tests need if they are
# missing, checks formatting and go vet, then runs every module's tests with
# -race against real PostgreSQL, Redis and Redis Cluster started by
# internal/testenv/cmd/testservers.
#
# Environment: GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v);
# SNOWKEY_TEST_* point the tests at servers of one's own instead (see
# internal/testenv). CI=true makes tests that lack a server fail, not skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

# --- servers and tools the tests need. One ensure_x function each; add new
# --- ones to ensure_all.

ensure_redis() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return
	fi
	echo "redis-server/redis-cli not found; installing" >&2
	apt_install redis-server redis-tools
	# Debian's package may start a system server; the tests use their own.
}

ensure_postgres() {
	if command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
		return
	fi
	echo "PostgreSQL (initdb) not found; installing" >&2
	apt_install postgresql
}

ensure_cc() {
	# go test -race needs cgo, so a C compiler.
	if command -v "$(go env CC)" >/dev/null; then
		return
	fi
	echo "C compiler not found (needed by go test -race); installing" >&2
	apt_install gcc libc6-dev
}

ensure_chromium() {
	# examples/server's browser test drives Debian's chromium, headless.
	if [[ -n "${SNOWKEY_TEST_CHROMIUM:-}" ]] || command -v chromium >/dev/null; then
		return
	fi
	echo "chromium not found (needed by the example server's browser test); installing" >&2
	apt_install chromium
}

ensure_node() {
	# examples/server's JS client test runs node (18 or later: built-in fetch).
	if command -v node >/dev/null; then
		return
	fi
	echo "node not found (needed by the example server's JS client test); installing" >&2
	apt_install nodejs
}

ensure_all() {
	ensure_redis
	ensure_postgres
	ensure_cc
	ensure_chromium
	ensure_node
}

# --- the tests, run inside the server session.

run_go_tests() {
	local m failed=()
	for m in $(go_modules); do
		echo "go test: $m"
		# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
		(cd "$m" && go test -race -count=1 -timeout 30m ${GOTESTFLAGS:-} ./...) || failed+=("$m")
	done
	local pkgs
	pkgs=$(jsonv2_packages)
	if [[ -n "$pkgs" ]]; then
		echo "go test (GOEXPERIMENT=jsonv2):" $pkgs
		# shellcheck disable=SC2086 # lists of flags and packages
		GOEXPERIMENT=jsonv2 go test -race -count=1 -timeout 30m ${GOTESTFLAGS:-} $pkgs || failed+=("jsonv2")
	fi
	if ((${#failed[@]})); then
		echo "go test failed in: ${failed[*]}" >&2
		return 1
	fi
}

case "${1:-}" in
--inside-testservers) # run by testservers below
	run_go_tests
	exit
	;;
--ensure-only) # used by bench.sh
	ensure_all
	exit
	;;
esac

ensure_all
gofmt_check
vet_all
testservers=$(build_testservers)
exec "$testservers" -- bash scripts/test.sh --inside-testservers
