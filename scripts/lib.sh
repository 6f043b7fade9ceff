#!/usr/bin/env bash
# Shared functions of the scripts in this folder and the Makefile.
#
# Sourced:  source scripts/lib.sh   (from the repository root)
# Run:      bash scripts/lib.sh FUNCTION [ARG...]   (any function below, for
#           example gofmt_check, vet_all, staticcheck_all, go_test_all)
#
# The scripts never re-run themselves: what must run under the test servers
# is a function here, run by internal/cmd/testservers as
# `bash scripts/lib.sh FUNCTION`.

# Each module is built and tested with exactly the versions its own go.mod
# selects, even if a developer keeps a go.work of their own.
export GOWORK=off

# The pinned linter: staticcheck 2026.2.2, which supports Go 1.26 and 1.27.
STATICCHECK_VERSION=v0.8.2

# repo_find [EXPRESSION...] runs find over the repository from the root,
# with the one list of what no script looks into: version control,
# testdata (fixtures, some deliberately malformed), vendored and node
# trees, and what builds and runs write (bin/, bench-results/,
# .testservers/).
repo_find() {
	find . \( -name .git -o -name testdata -o -name node_modules -o -name vendor \
		-o -path ./bin -o -path ./bench-results -o -path ./.testservers \) -prune -o \
		"$@"
}

# Every Go module of the repository, one directory a line, "." first: any
# folder with its own go.mod, such as bench/ or examples/.
go_modules() {
	repo_find -name go.mod -type f -printf '%h\n' | LC_ALL=C sort
}

# Every Go source file that gofmt checks, NUL-separated.
go_files0() {
	repo_find -name '*.go' -type f -print0
}

# Every package directory (./path form, relative to the root module) with a
# file built only under GOEXPERIMENT=jsonv2: make test and make bench run
# these once more with the experiment on, so both JSON paths are covered.
jsonv2_packages() {
	repo_find -path ./bench -prune -o -name '*.go' -type f -print0 |
		xargs -0 -r grep -l '^//go:build goexperiment.jsonv2' | xargs -r -n1 dirname | LC_ALL=C sort -u
}

# children_cpu VAR sets VAR to the CPU seconds, user and system, of every
# process this shell has started and waited for (and of theirs): the
# second line of the builtin times, which must run in this shell, not in
# the subshell of a command substitution.
children_cpu() {
	local f
	f=$(mktemp)
	times >"$f"
	printf -v "$1" '%s' "$(awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$f")"
	rm -f "$f"
}

# step NAME COMMAND... runs one step of a script, timed; the step's own
# output comes first, then "NAME: ok (Ns, CPU Ms)" or "NAME: FAILED (Ns,
# CPU Ms)": its wall time, and the CPU time of the processes it ran,
# which depends far less than wall time on what else the machine runs.
step() {
	local name=$1 start=$SECONDS status=0 cpu0 cpu1 took
	shift
	children_cpu cpu0
	"$@" || status=$?
	children_cpu cpu1
	took="$((SECONDS - start))s, CPU $(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.0f", b - a }')s"
	if ((status == 0)); then
		echo "$name: ok ($took)"
	else
		echo "$name: FAILED ($took)" >&2
	fi
	return "$status"
}

# Fails, naming the files, when any Go file is not gofmt-formatted.
gofmt_check() {
	local bad
	bad=$(go_files0 | xargs -0 -r gofmt -l)
	if [[ -n "$bad" ]]; then
		echo "gofmt: these files are not formatted (run 'make fmt'):" >&2
		echo "$bad" | sed 's/^/    /' >&2
		return 1
	fi
}

# Formats every Go file in place.
fmt_all() {
	go_files0 | xargs -0 -r gofmt -w
}

# build_module DIR compiles, without linking, every package of the module
# in DIR and every dependency of theirs, tests included, with -race, as
# go vet, staticcheck and go test all need them, into the build cache;
# build_module jsonv2 does so for the GOEXPERIMENT=jsonv2 packages under
# that experiment. It compiles GO_TEST_P packages at once, as go test
# would have. A package that does not compile is left to go vet and go
# test to report.
build_module() {
	local pkgs
	if [[ "$1" == jsonv2 ]]; then
		pkgs=$(jsonv2_packages)
		[[ -z "$pkgs" ]] && return
		# shellcheck disable=SC2086 # a list of packages
		GOEXPERIMENT=jsonv2 go list -e -export -deps -test -race -p "$GO_TEST_P" $pkgs >/dev/null
		return
	fi
	(cd "$1" && go list -e -export -deps -test -race -p "$GO_TEST_P" ./... >/dev/null)
}

# module_order prints every module, one a line, in the order make test
# compiles them: the slow ones (SLOW_MODULES) first, whose tests take
# longest, then the others as go_modules lists them.
module_order() {
	local m order=()
	for m in "${SLOW_MODULES[@]}"; do
		if [[ -f "$m/go.mod" ]]; then order+=("$m"); fi
	done
	for m in $(go_modules); do
		[[ " ${order[*]} " == *" $m "* ]] || order+=("$m")
	done
	printf '%s\n' "${order[@]}"
}

# built_marker UNIT prints the file, in the directory MAKE_TEST_BUILT
# names, that go_test_all creates once UNIT (a module's directory, or
# jsonv2) is compiled.
built_marker() {
	local name=${1//\//_}
	echo "$MAKE_TEST_BUILT/built${name//./_}"
}

# wait_built UNIT returns once UNIT is compiled, if MAKE_TEST_BUILT names
# a directory (make test), or at once: go vet and staticcheck of a module
# start as soon as go_test_all has compiled it, and find it in the build
# cache instead of compiling it a second time beside go test. The file
# "all" in that directory, which make test creates when go_test_all has
# ended, however it ended, releases every wait.
wait_built() {
	[[ -n "${MAKE_TEST_BUILT:-}" ]] || return 0
	local marker
	marker=$(built_marker "$1")
	until [[ -e "$marker" || -e "$MAKE_TEST_BUILT/all" ]]; do sleep 1; done
}

# go vet ./... in every module, and on the GOEXPERIMENT=jsonv2 packages;
# reports every failing module. It builds with -race, as the tests do, so
# that it finds the packages build_module compiled in the build cache,
# and takes the modules in the order go_test_all compiles them, each once
# it is (wait_built).
vet_all() {
	local m failed=() pkgs
	for m in $(module_order); do
		wait_built "$m"
		echo "go vet: $m"
		(cd "$m" && go vet -race ./...) || failed+=("$m")
	done
	pkgs=$(jsonv2_packages)
	if [[ -n "$pkgs" ]]; then
		wait_built jsonv2
		echo "go vet (GOEXPERIMENT=jsonv2):" $pkgs
		# shellcheck disable=SC2086 # a list of packages
		GOEXPERIMENT=jsonv2 go vet -race $pkgs || failed+=("jsonv2")
	fi
	if ((${#failed[@]})); then
		echo "go vet failed in: ${failed[*]}" >&2
		return 1
	fi
}

# Prints the path of staticcheck $STATICCHECK_VERSION, installing it into
# bin/ through the module proxy first if bin/ holds no such binary.
staticcheck_bin() {
	local bin=$PWD/bin/staticcheck
	if [[ ! -x "$bin" ]] || ! "$bin" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})"; then
		GOBIN=$PWD/bin go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" >&2 || return 1
	fi
	echo "$bin"
}

# staticcheck (the pinned version, default checks, tests included) on every
# module and on the GOEXPERIMENT=jsonv2 packages; any finding fails. The
# go list it runs to load the packages compiles them for their export
# data: with -race, as the tests and go vet build them, so that each finds
# what another compiled in the build cache (build_module, in make test),
# each module once it is compiled (wait_built). It runs one module after
# another: its own cache of what it found in a package (the standard
# library's, a shared dependency's) serves the next.
staticcheck_all() {
	local sc m failed=() pkgs
	sc=$(staticcheck_bin) || return 1
	local -x GOFLAGS="${GOFLAGS:+$GOFLAGS }-race"
	for m in $(module_order); do
		wait_built "$m"
		echo "staticcheck: $m"
		(cd "$m" && "$sc" ./...) || failed+=("$m")
	done
	pkgs=$(jsonv2_packages)
	if [[ -n "$pkgs" ]]; then
		wait_built jsonv2
		echo "staticcheck (GOEXPERIMENT=jsonv2):" $pkgs
		# shellcheck disable=SC2086 # a list of packages
		GOEXPERIMENT=jsonv2 "$sc" $pkgs || failed+=("jsonv2")
	fi
	if ((${#failed[@]})); then
		echo "staticcheck found problems in: ${failed[*]}" >&2
		return 1
	fi
}

# Builds internal/cmd/testservers to bin/testservers and prints its
# path. A built binary passes on the command's exit status and signals,
# which `go run` would not do as faithfully. It is built with -race like
# the tests, which then find its dependencies compiled.
build_testservers() {
	go build -race -o bin/testservers ./internal/cmd/testservers >&2 || return 1
	echo "$PWD/bin/testservers"
}

# --- what the tests need: servers and tools, installed with apt-get when
# --- running as root. Each need_x function prints the Debian packages
# --- that x needs and that are missing; add new ones to ensure_all.

need_redis() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
		echo redis-server redis-tools
}

need_valkey() {
	# Valkey, the Redis fork, for the second pass of the Redis-backed
	# tests (go_test_all); Debian has it in bookworm-backports.
	[[ -n "${SNOWKEY_TEST_VALKEY_SERVER:-}" ]] || command -v valkey-server >/dev/null || echo valkey-server
}

# Adds Debian's bookworm-backports to apt's sources for the valkey
# packages alone, from the mirror the machine's bookworm comes from: every
# other package of the suite is pinned away, so nothing else on the
# machine moves to a backported version. Bookworm only: later releases
# have valkey in main.
add_valkey_source() {
	local list=/etc/apt/sources.list.d/snowkey-bookworm-backports.sources uri
	grep -q '^VERSION_CODENAME=bookworm$' /etc/os-release 2>/dev/null || return 0
	[[ -e "$list" ]] && return 0
	uri=$(awk '$1 == "URIs:" { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
	if [[ -z "$uri" ]]; then
		uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
	fi
	if [[ -z "$uri" ]]; then
		echo "no bookworm source in /etc/apt to take the backports mirror from" >&2
		return 1
	fi
	echo "adding bookworm-backports from $uri for valkey-server and valkey-tools only ($list)"
	cat >"$list" <<-EOF
		Types: deb
		URIs: $uri
		Suites: bookworm-backports
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	cat >/etc/apt/preferences.d/snowkey-valkey <<-EOF
		Package: *
		Pin: release n=bookworm-backports
		Pin-Priority: -1

		Package: valkey-server valkey-tools
		Pin: release n=bookworm-backports
		Pin-Priority: 500
	EOF
}

need_postgres() {
	command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null ||
		echo postgresql
}

need_cc() {
	# go test -race needs cgo, so a C compiler.
	command -v "$(go env CC)" >/dev/null || echo gcc libc6-dev
}

need_chromium() {
	# examples/server's browser test drives Debian's chromium, headless.
	[[ -n "${SNOWKEY_TEST_CHROMIUM:-}" ]] || command -v chromium >/dev/null || echo chromium
}

need_node() {
	# examples/server's JS client test runs node (18 or later: built-in fetch).
	command -v node >/dev/null || echo nodejs
}

need_npm() {
	# js/'s test (go test ./js) builds the TypeScript package with the tools
	# its package-lock.json pins, installed by npm ci from the npm registry.
	command -v npm >/dev/null || echo npm
}

# Installs, in one apt-get run, every missing package the tests need, or
# fails with the command a root user would run. (Debian's redis-server
# package may start a system server; the tests start their own.)
ensure_all() {
	local missing
	missing=$(need_redis; need_valkey; need_postgres; need_cc; need_chromium; need_node; need_npm)
	missing=$(echo $missing)
	[[ -z "$missing" ]] && return
	if [[ "$(id -u)" != 0 ]]; then
		echo "missing: $missing — install with: sudo apt-get install -y $missing" >&2
		return 1
	fi
	echo "installing: $missing"
	if [[ " $missing " == *" valkey-server "* ]]; then
		add_valkey_source || return 1
	fi
	# shellcheck disable=SC2086 # a list of packages
	DEBIAN_FRONTEND=noninteractive apt-get update -q &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
}

# --- run under the test servers (bin/testservers -- bash scripts/lib.sh F).

# The go test -timeout of one package's test binary: the last resort. Every
# package's TestMain bounds it with testenv.Main, and its tests with
# testenv.Deadline, whose budgets stretch with the machine's load (up to 8
# times) so that a slow machine is not taken for a hang; this is longer
# than any of them. GOTESTFLAGS=-timeout=… overrides it.
GO_TEST_TIMEOUT=30m

# How many tests of one package run at once (go test -parallel): the
# default is the number of cores, as few as 2 on a small machine, while
# the parallel tests mostly wait on servers, proxies and clocks, not the
# CPU.
GO_TEST_PARALLEL=4

# How many packages' test binaries of one module run at once (go test -p).
# Most packages' tests wait on servers and clocks, not the CPU, so the
# default (the number of cores) would run the root module's long packages
# (SLOW_PACKAGES) one after another. -p counts compiles and links too, and
# each long package holds its slot for its whole run: -p must leave the
# module's other packages several slots beside the long ones, or they are
# built and run one at a time behind them. Eight leaves four.
GO_TEST_P=8

# The root module's packages whose tests take longest (minutes each),
# named first to go test so that they start first: it runs packages in
# the order it is given them, GO_TEST_P at a time, and the slow ones
# otherwise start last and run one after the other. A hint only: a package
# no longer there is left out, and one missing here merely starts later.
SLOW_PACKAGES=(./workerid ./tokens ./pgkit/partition ./migrations)

# The root module's packages whose tests run the go command over every
# module (the docs' Go blocks, the API files, the release and its
# installs): they start once every module is compiled (go_test_all), so
# that their go commands, given the test binary's flags (see
# internal/testing/gocmd), find every package in the build cache; started
# beside build_module, each would compile the same packages at the same
# time, the largest (modernc.org/sqlite, libc) several times over.
LATE_PACKAGES=(./internal/checks/readmecheck ./internal/checks/release ./internal/checks/apifile)

# The modules whose tests take longest, built first so that their tests
# start first (go_test_all); the root module's are the longest. A hint
# only, as SLOW_PACKAGES is.
SLOW_MODULES=(. ./examples)

# The packages whose Redis-backed tests run a second time, against Valkey
# (one node, Sentinel, Cluster), and the tests of theirs left out of that
# pass, which the first pass covers: the subtests of PostgreSQL and of
# miniredis at the second, third or fourth level of a name (VALKEY_SKIP,
# one alternative a level: a pattern of -skip matches a name level by
# level, so '/postgres$' alone let TestX/defended/postgres run twice,
# once in each pass, against the one PostgreSQL) and the tests named
# TestPostgres… (VALKEY_RUN runs all others).
VALKEY_PACKAGES=(./workerid ./tokens)
VALKEY_SKIP='/(postgres|miniredis)$|//(postgres|miniredis)$|///(postgres|miniredis)$'
VALKEY_RUN='^(Test[^P]|TestP[^o]|TestPo[^s]|Example|Fuzz)'

# Runs the Redis-backed tests of VALKEY_PACKAGES against valkey-server
# (SNOWKEY_TEST_VALKEY_SERVER, else from PATH): a testservers of its own
# starts a Valkey node and Cluster in place of Redis's, and the tests'
# private servers (StartRedis, StartRedisCluster, Sentinel) are Valkey's
# too, through SNOWKEY_TEST_REDIS_SERVER. PostgreSQL is the shared one.
# Without valkey-server it says so and passes, unless CI is set.
go_test_valkey() {
	local bin=${SNOWKEY_TEST_VALKEY_SERVER:-$(command -v valkey-server || true)}
	if [[ -z "$bin" ]]; then
		echo "valkey-server not found: the Valkey pass did not run (install it: bash scripts/lib.sh ensure_all)"
		[[ "${CI:-}" != true ]]
		return
	fi
	"$bin" --version
	# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
	env -u SNOWKEY_TEST_REDIS -u SNOWKEY_TEST_REDIS_CLUSTER SNOWKEY_TEST_REDIS_SERVER="$bin" \
		"$PWD/bin/testservers" -q -postgres=false -- \
		go test -race -vet=off -count=1 -timeout "$GO_TEST_TIMEOUT" -p "$GO_TEST_P" -parallel "$GO_TEST_PARALLEL" -run "$VALKEY_RUN" -skip "$VALKEY_SKIP" \
		${GOTESTFLAGS:-} "${VALKEY_PACKAGES[@]}"
}

# go test -race of every module, of the GOEXPERIMENT=jsonv2 packages, and
# the Valkey pass (go_test_valkey). Each module is compiled first
# (build_module), the slow ones (SLOW_MODULES) first, one after another so
# that no two go commands compile the same package at once (each would:
# the build cache is shared, the work in progress is not); its tests
# start once it is compiled and run beside the next module's compiling,
# since they mostly wait on servers and clocks; those of LATE_PACKAGES
# once every module is compiled. As each module is
# compiled, it says so in the directory MAKE_TEST_BUILT names, if set
# (built_marker), for go vet and staticcheck of that module to start
# (make test). Each run's output is printed as a block when it ends;
# every failing one is reported. vet_all runs the whole of go vet, so go
# test's own subset is off.
go_test_all() {
	local tmp m p pkgs late names=() pids=() failed=() i status start=$SECONDS
	tmp=$(mktemp -d)
	for m in $(module_order); do
		step "build $m" build_module "$m" || true
		if [[ -n "${MAKE_TEST_BUILT:-}" ]]; then touch "$(built_marker "$m")"; fi
		pkgs=(./...)
		if [[ "$m" == . ]]; then
			mapfile -t pkgs < <(root_packages)
		fi
		# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
		start_tests "$m" "$m" go test -race -vet=off -count=1 -timeout "$GO_TEST_TIMEOUT" -p "$GO_TEST_P" -parallel "$GO_TEST_PARALLEL" \
			${GOTESTFLAGS:-} "${pkgs[@]}"
		if [[ "$m" == . ]]; then
			# The Valkey pass: its packages are the root module's, compiled now.
			start_tests "valkey: ${VALKEY_PACKAGES[*]}" . go_test_valkey
		fi
	done
	late=()
	for p in "${LATE_PACKAGES[@]}"; do
		if [[ -d "$p" ]]; then late+=("$p"); fi
	done
	if ((${#late[@]})); then
		# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
		start_tests "${late[*]}" . go test -race -vet=off -count=1 -timeout "$GO_TEST_TIMEOUT" -p "$GO_TEST_P" -parallel "$GO_TEST_PARALLEL" \
			${GOTESTFLAGS:-} "${late[@]}"
	fi
	pkgs=$(jsonv2_packages)
	if [[ -n "$pkgs" ]]; then
		step "build jsonv2" build_module jsonv2 || true
		if [[ -n "${MAKE_TEST_BUILT:-}" ]]; then touch "$(built_marker jsonv2)"; fi
		# shellcheck disable=SC2086 # lists of flags and packages
		start_tests "GOEXPERIMENT=jsonv2 $(echo $pkgs)" . env GOEXPERIMENT=jsonv2 go test -race -vet=off -count=1 -timeout "$GO_TEST_TIMEOUT" \
			-p "$GO_TEST_P" -parallel "$GO_TEST_PARALLEL" ${GOTESTFLAGS:-} $pkgs
	fi
	for i in "${!pids[@]}"; do
		status=0
		wait "${pids[$i]}" || status=$?
		echo "go test: ${names[$i]} (ended by $((SECONDS - start))s)"
		cat "$tmp/$i"
		((status == 0)) || failed+=("${names[$i]}")
	done
	rm -rf "$tmp"
	if ((${#failed[@]})); then
		echo "go test failed in: ${failed[*]}" >&2
		return 1
	fi
}

# root_packages prints the root module's packages, one a line, in the
# order go_test_all gives them to go test: SLOW_PACKAGES first (go test
# starts packages in the order it is given them, GO_TEST_P at a time),
# then the rest, without LATE_PACKAGES.
root_packages() {
	local p all slow=() late=()
	for p in "${SLOW_PACKAGES[@]}"; do
		if [[ -d "$p" ]]; then slow+=("$p"); fi
	done
	for p in "${LATE_PACKAGES[@]}"; do
		if [[ -d "$p" ]]; then late+=("$p"); fi
	done
	all=$(go list "${slow[@]}" ./... | awk '!seen[$0]++')
	if ((${#late[@]})); then
		all=$(grep -vxF -f <(go list "${late[@]}") <<<"$all")
	fi
	echo "$all"
}

# start_tests NAME DIR COMMAND... starts COMMAND in DIR in the background
# for go_test_all, whose names, pids, tmp and start it adds to: its output
# goes to a file of tmp, printed when it ends.
start_tests() {
	local name=$1 dir=$2
	shift 2
	(cd "$dir" && "$@") >"$tmp/${#pids[@]}" 2>&1 &
	names+=("$name")
	pids+=($!)
	echo "go test: $name started at $((SECONDS - start))s"
}

# generated_check runs the generators whose output is committed (gqlgen
# in examples/graphql; oapi-codegen and ogen in examples/openapi), the
# versions each go.mod pins as tools, on copies of their modules, and
# fails if any writes other files than the committed ones (go test -tags
# generate). Not part of make test: building the generators from the
# module proxy costs minutes on a fresh machine; make test checks the
# committed code against its schemas without them.
generated_check() {
	local m failed=()
	for m in examples/graphql examples/openapi; do
		echo "generated code: $m"
		(cd "$m" && go test -count=1 -tags generate -run '^TestGeneratedIsCurrent$' .) || failed+=("$m")
	done
	if ((${#failed[@]})); then
		echo "generated code is not current in: ${failed[*]}" >&2
		return 1
	fi
}

# Every benchmark of every module (and the JSONv2 ones under
# GOEXPERIMENT=jsonv2), one module after another so that they do not
# disturb each other, appended to the file $1. See scripts/bench.sh.
bench_all() {
	local raw=$1 m failed=() pkgs
	for m in $(go_modules); do
		echo "go test -bench: $m"
		(cd "$m" && go test -run '^$' -bench "${BENCH:-.}" -skip "${BENCHSKIP:-}" -benchmem -count "${BENCHCOUNT:-5}" \
			-benchtime "${BENCHTIME:-1s}" -timeout "${BENCHTIMEOUT:-60m}" ./...) 2>&1 |
			tee -a "$raw" || failed+=("$m")
	done
	# Benchmarks named ...JSONv2 exist only under GOEXPERIMENT=jsonv2.
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

# Every TestChaos test of every module with -race, for CHAOS_TIME each
# package. See scripts/chaos.sh.
chaos_all() {
	local secs timeout m pkgs failed=() found=0
	secs=$(duration_seconds "$CHAOS_TIME") || return 1
	# The last resort, as GO_TEST_TIMEOUT is for make test: every chaos
	# test bounds itself (each run by testenv.Deadline, which stretches
	# with the machine's load; each side by its half of the budget plus
	# Scenario.Retries runs), and each side makes at least one run however
	# slow its runs are, so the budget twice plus GO_TEST_TIMEOUT.
	timeout="$((2 * secs + $(duration_seconds "$GO_TEST_TIMEOUT")))s"
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

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	cd "$(dirname "${BASH_SOURCE[0]}")/.."
	if [[ $# -eq 0 ]] || [[ "$(type -t "$1")" != function ]]; then
		echo "usage: $0 FUNCTION [ARG...], a function of $0, such as gofmt_check, vet_all, staticcheck_all" >&2
		exit 2
	fi
	"$@"
fi
