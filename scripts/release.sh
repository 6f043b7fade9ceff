#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: the release commit and tags of every
# released module, in this working tree. Nothing is pushed.
#
# A dry run unless APPLY=1 (or DRY_RUN=0): it checks everything and
# prints what it would do. It refuses
#   - a working tree with changes or untracked files;
#   - a VERSION that is not semver (vMAJOR.MINOR.PATCH[-PRERELEASE]), or
#     not above the root module's last tag, or already a tag;
#   - a CHANGELOG.md without a section "## [X.Y.Z] - Unreleased";
#   - an API change not written down: api/*.txt not what the code exports
#     (internal/checks/apifile), or, against each module's last tag, a change
#     that apidiff finds and VERSION does not allow (an incompatible one
#     needs a new major version, or a new minor one before v1; any change
#     needs at least a new minor version). A module without an earlier
#     tag is said to have none and not compared.
# Applied, it makes ONE commit that sets every requirement of a module of
# this repository on another to VERSION (the replace lines that
# development uses stay: a consumer ignores them, and finds each required
# version as a tag) and dates the CHANGELOG section, then tags it for
# every released module: VERSION for the root, DIR/VERSION for the module
# in DIR. The modules are the go.mod files of the tree; one whose go.mod
# has a line "// Not released" gets no tag (see internal/checks/apifile).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

# The apidiff of the release step, pinned; run with go run, so no module
# of the repository depends on it.
APIDIFF=golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4

version=${1:-${VERSION:-}}
apply=0
if [[ "${APPLY:-}" == 1 || "${DRY_RUN:-1}" == 0 ]]; then
	apply=1
fi

die() {
	echo "release: $*" >&2
	exit 1
}

# semver_parts V prints "MAJOR MINOR PATCH PRERELEASE" of a version
# vMAJOR.MINOR.PATCH[-PRERELEASE], or fails.
semver_parts() {
	local re='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?$'
	[[ "$1" =~ $re ]] || return 1
	echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]} ${BASH_REMATCH[5]}"
}

# semver_gt A B: whether version A is above version B. A version with a
# prerelease is below the same version without; two prereleases compare
# as strings (enough for rc.1 < rc.2, not for rc.9 < rc.10).
semver_gt() {
	local a b i
	read -r -a a <<<"$(semver_parts "$1")"
	read -r -a b <<<"$(semver_parts "$2")"
	for i in 0 1 2; do
		((a[i] > b[i])) && return 0
		((a[i] < b[i])) && return 1
	done
	[[ -z "${a[3]:-}" && -n "${b[3]:-}" ]] && return 0
	[[ -n "${a[3]:-}" && -n "${b[3]:-}" && "${a[3]}" > "${b[3]}" ]] && return 0
	return 1
}

# module_path DIR prints the module path DIR/go.mod declares.
module_path() {
	awk '$1 == "module" { gsub(/"/, "", $2); print $2; exit }' "$1/go.mod"
}

# released DIR: whether the module in DIR is released.
released() {
	! grep -q '^// Not released' "$1/go.mod"
}

# tag_prefix DIR prints the prefix of DIR's tags: "" for the root, "DIR/".
tag_prefix() {
	[[ "$1" == . ]] && return
	echo "${1#./}/"
}

# last_tag DIR prints the highest semver tag of the module in DIR, if any.
last_tag() {
	local prefix best="" t v
	prefix=$(tag_prefix "$1")
	while read -r t; do
		v=${t#"$prefix"}
		semver_parts "$v" >/dev/null || continue
		if [[ -z "$best" ]] || semver_gt "$v" "$best"; then
			best=$v
		fi
	done < <(git tag -l "${prefix}v*")
	echo "$best"
}

# allowed OLD NEW INCOMPATIBLE: whether going from OLD to NEW may make an
# (INCOMPATIBLE=1: incompatible) API change.
allowed() {
	local o n
	read -r -a o <<<"$(semver_parts "$1")"
	read -r -a n <<<"$(semver_parts "$2")"
	if (($3)) && ((o[0] >= 1)); then
		((n[0] > o[0]))
	else
		((n[0] > o[0] || n[1] > o[1]))
	fi
}

# requires DIR PATH: whether DIR/go.mod requires module PATH.
requires() {
	awk -v p="$2" '
		/^require[ \t]*\($/ { block = 1; next }
		block && /^\)/ { block = 0 }
		(block && $1 == p) || ($1 == "require" && $2 == p) { found = 1 }
		END { exit !found }' "$1/go.mod"
}

# act COMMAND...: runs it when applying, else prints it.
act() {
	if ((apply)); then
		"$@"
	else
		printf 'would run:'
		printf ' %q' "$@"
		printf '\n'
	fi
}

[[ -n "$version" ]] || die "usage: make release VERSION=vX.Y.Z [APPLY=1]"
semver_parts "$version" >/dev/null || die "VERSION=$version is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE]"
if [[ -n "$(git status --porcelain)" ]]; then
	git status --short >&2
	die "the working tree has changes or untracked files; commit or remove them first"
fi

mapfile -t all < <(go_modules)
rel=()
for d in "${all[@]}"; do
	released "$d" && rel+=("$d")
done
paths=()
for d in "${rel[@]}"; do
	paths+=("$(module_path "$d")")
done
echo "released modules: ${rel[*]}"

last=$(last_tag .)
if [[ -n "$last" ]]; then
	semver_gt "$version" "$last" || die "VERSION=$version is not above the root module's last tag $last"
	echo "last tag of the root module: $last"
else
	echo "the root module has no earlier tag"
fi
for d in "${rel[@]}"; do
	t="$(tag_prefix "$d")$version"
	[[ -z "$(git tag -l "$t")" ]] || die "tag $t exists already"
done

want="## [${version#v}] - Unreleased"
grep -qxF "$want" CHANGELOG.md || die "CHANGELOG.md has no line \"$want\": write down what the release changes"

echo "checking api/*.txt against the code"
GOWORK=off go run ./internal/cmd/apifile || die "api/*.txt are not current: review the difference above and run make api"

# apidiff of each released module against its own last tag.
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
bad=()
for i in "${!rel[@]}"; do
	d=${rel[$i]} p=${paths[$i]}
	old=$(last_tag "$d")
	if [[ -z "$old" ]]; then
		echo "apidiff $p: no earlier tag, nothing to compare; skipped"
		continue
	fi
	oldtag="$(tag_prefix "$d")$old"
	rm -rf "$tmp/old" && git worktree prune
	git worktree add -q --detach "$tmp/old" "$oldtag"
	(cd "$tmp/old/$d" && go run "$APIDIFF" -m -w "$tmp/old.export" "$p")
	(cd "$d" && go run "$APIDIFF" -m -w "$tmp/new.export" "$p")
	git worktree remove --force "$tmp/old"
	report=$(go run "$APIDIFF" -m "$tmp/old.export" "$tmp/new.export")
	incompatible=$(go run "$APIDIFF" -m -incompatible "$tmp/old.export" "$tmp/new.export")
	if [[ -z "$report" ]]; then
		echo "apidiff $p $oldtag..$version: no API change"
		continue
	fi
	echo "apidiff $p $oldtag..$version:"
	echo "$report" | sed 's/^/    /'
	inc=0
	[[ -n "$incompatible" ]] && inc=1
	if ! allowed "$old" "$version" "$inc"; then
		bad+=("$p")
	fi
done
if ((${#bad[@]})); then
	die "$version does not allow the API changes above in: ${bad[*]} (an incompatible change needs a new major version, or a new minor one before v1; any change a new minor one)"
fi

# The requirements between the repository's modules.
edits=0
for d in "${all[@]}"; do
	for p in "${paths[@]}"; do
		if requires "$d" "$p"; then
			act go -C "$d" mod edit -require="$p@$version"
			edits=$((edits + 1))
		fi
	done
done
echo "$edits requirements between modules set to $version"

date=$(date -u +%F)
act sed -i "s/^## \[${version#v}\] - Unreleased\$/## [${version#v}] - $date/" CHANGELOG.md

if ((apply)); then
	# Each module's go.mod must still be complete: the replace lines
	# serve the new versions in the tree, so nothing is downloaded.
	for d in "${all[@]}"; do
		GOWORK=off GOFLAGS=-mod=readonly go -C "$d" list -m all >/dev/null ||
			die "$d/go.mod is not complete after the edits"
	done
fi
act git commit -q -a -m "release $version" -m "Sets every requirement between the repository's modules to $version and dates the CHANGELOG section, so that each module installs from its tag: a consumer ignores the replace lines, and finds each required version as a tag."
for d in "${rel[@]}"; do
	t="$(tag_prefix "$d")$version"
	act git tag -a -m "$(module_path "$d") $version" "$t"
done
if ((apply)); then
	echo "released $version: $(git rev-parse --short HEAD), tags:" $(git tag --points-at HEAD)
	echo "nothing pushed; to publish: git push origin HEAD $(for d in "${rel[@]}"; do printf '%s ' "$(tag_prefix "$d")$version"; done)"
else
	echo "dry run: nothing changed (APPLY=1 to act)"
fi
