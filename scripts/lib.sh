#!/usr/bin/env bash
# Shared helpers of the scripts in this folder and the Makefile.
#
# Sourced:  source scripts/lib.sh   (from the repository root)
# Run:      bash scripts/lib.sh FUNCTION   (for example: gofmt_check, vet_all, fmt_all)

# The scripts build and test each module with exactly the versions its own
# go.mod selects; go.work exists only so that `go run ./examples/server`
# works from the root.
export GOWORK=off

# Every Go module of the repository, one directory a line, "." first: any
# folder with its own go.mod, such as bench/ or an example.
go_modules() {
	find . \( -name .git -o -name testdata -o -name node_modules -o -name vendor \
		-o -path ./bin -o -path ./bench-results \) -prune -o \
		-name go.mod -type f -printf '%h\n' | LC_ALL=C sort
}

# Every Go source file that gofmt checks, NUL-separated.
go_files0() {
	find . \( -name .git -o -name testdata -o -name node_modules -o -name vendor \) -prune -o \
		-name '*.go' -type f -print0
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
	echo "gofmt: ok"
}

# Formats every Go file in place.
fmt_all() {
	go_files0 | xargs -0 -r gofmt -w
}

# go vet ./... in every module; reports every failing module.
vet_all() {
	local m failed=()
	for m in $(go_modules); do
		echo "go vet: $m"
		(cd "$m" && go vet ./...) || failed+=("$m")
	done
	local pkgs
	pkgs=$(jsonv2_packages)
	if [[ -n "$pkgs" ]]; then
		echo "go vet (GOEXPERIMENT=jsonv2):" $pkgs
		# shellcheck disable=SC2086 # a list of packages
		GOEXPERIMENT=jsonv2 go vet $pkgs || failed+=("jsonv2")
	fi
	if ((${#failed[@]})); then
		echo "go vet failed in: ${failed[*]}" >&2
		return 1
	fi
}

# Every package directory (./path form, relative to the root module) with a
# file built only under GOEXPERIMENT=jsonv2: make test and make bench run
# these once more with the experiment on, so both JSON paths are covered.
jsonv2_packages() {
	grep -rl --include='*.go' '^//go:build goexperiment.jsonv2' . 2>/dev/null |
		grep -v -e '^./bench/' -e '/testdata/' | xargs -r -n1 dirname | LC_ALL=C sort -u
}

# Builds internal/testenv/cmd/testservers to bin/testservers and prints its
# path. A built binary passes on the command's exit status and signals,
# which `go run` would not do as faithfully.
build_testservers() {
	go build -o bin/testservers ./internal/testenv/cmd/testservers
	echo "$PWD/bin/testservers"
}

# True when running as root, where missing packages can be installed.
is_root() {
	[[ "$(id -u)" == 0 ]]
}

_apt_updated=
# Installs Debian packages as root (apt-get update once per run), or fails
# with the command a root user would run.
apt_install() {
	if ! is_root; then
		echo "missing: $* — install with: sudo apt-get install -y $*" >&2
		return 1
	fi
	if [[ -z "$_apt_updated" ]]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -q
		_apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	cd "$(dirname "${BASH_SOURCE[0]}")/.."
	case "${1:-}" in
	go_modules | gofmt_check | fmt_all | vet_all) "$1" ;;
	*)
		echo "usage: $0 go_modules|gofmt_check|fmt_all|vet_all" >&2
		exit 2
		;;
	esac
fi
