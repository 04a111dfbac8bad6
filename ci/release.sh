#!/usr/bin/env bash
# ci/release.sh VERSION: prepares a release of every module of the workspace at VERSION.
#
# Each module requires its siblings at VERSION (github.com/settlehq/settle/core VERSION, …): the
# version a user's `go get` resolves, since a dependency's replace lines are ignored. The replace
# lines stay, for builds of one module outside the workspace; go.work joins the modules for local
# work (cmd/settle has none: go install refuses them). The script rewrites those requirements in
# every go.mod, checks that every module still builds inside the workspace and alone (GOWORK=off,
# through its replace lines), and prints the
# tags to create, one per module, named by the module's folder: core/VERSION,
# dialect-postgres/VERSION, …  It creates no tag and no commit: see docs/releasing.md.
#
# Modules are found from go.work (go list -m), never listed here.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-}
if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "usage: ci/release.sh VERSION   (a semantic version such as v0.1.0; got '${version}')" >&2
	exit 2
fi
if [[ ${BASH_REMATCH[1]} != 0 && ${BASH_REMATCH[1]} != 1 ]]; then
	echo "ci/release.sh: $version needs a /v${BASH_REMATCH[1]} suffix on every module path; not supported" >&2
	exit 2
fi

root=$PWD
prefix=github.com/settlehq/settle/
mapfile -t dirs < <(go list -m -f '{{.Dir}}')
mapfile -t paths < <(go list -m -f '{{.Path}}')
[ ${#dirs[@]} -gt 0 ] || { echo "ci/release.sh: no modules in go.work" >&2; exit 1; }

for i in "${!dirs[@]}"; do
	dir=${dirs[$i]} path=${paths[$i]}
	case $path in "$prefix"*) ;; *)
		echo "ci/release.sh: module $path in $dir is not under $prefix" >&2
		exit 1
		;;
	esac
	# Every sibling the module requires, directly or indirectly, moves to VERSION.
	mapfile -t sibs < <(cd "$dir" && go mod edit -print | awk -v p="$prefix" '
		/^require \(/ { block = 1; next }
		block && /^\)/ { block = 0; next }
		block && index($1, p) == 1 { print $1 }
		/^require [^(]/ && index($2, p) == 1 { print $2 }')
	args=()
	for s in "${sibs[@]}"; do
		[ -n "$s" ] && args+=("-require=$s@$version")
	done
	if [ ${#args[@]} -gt 0 ]; then
		(cd "$dir" && go mod edit "${args[@]}")
	fi
done

# Every module ships the license: a module's zip holds only its own folder, and pkg.go.dev shows
# no documentation for a module without one.
for dir in "${dirs[@]}"; do
	cmp -s LICENSE "$dir/LICENSE" || {
		echo "ci/release.sh: ${dir#"$root/"}/LICENSE is missing or differs from LICENSE: cp LICENSE ${dir#"$root/"}/" >&2
		exit 1
	}
done

# Every module builds in the workspace, and on its own through its replace lines. A module with no
# replace line to a sibling is a program to go install (cmd/settle: go install refuses replace
# lines); outside the workspace it builds only once the siblings are tagged, which
# ci/consumer.sh checks from a local proxy of the tree.
for dir in "${dirs[@]}"; do
	(cd "$dir" && go build ./... && { ! grep -q '=> \.\./' go.mod || GOWORK=off go build ./...; }) || {
		echo "ci/release.sh: ${dir#"$root/"} does not build at $version (outside the workspace: run GOWORK=off go mod tidy in it)" >&2
		exit 1
	}
done

echo "Requirements of siblings set to $version in every go.mod. Commit them, then create and push these tags:"
for dir in "${dirs[@]}"; do
	echo "${dir#"$root/"}/$version"
done
