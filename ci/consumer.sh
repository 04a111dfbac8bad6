#!/usr/bin/env bash
# ci/consumer.sh [VERSION]: proves that a user can install settle. It builds a file-system module
# proxy from the tree (tracked and untracked files, .gitignore respected) with every module of
# go.work at VERSION (default: the version the modules require each other at, which ci/release.sh
# sets), then, for each program in ci/consumer/, in a fresh module outside the workspace
# (GOWORK=off, a module cache of its own, GOPROXY = that proxy, then this machine's module cache
# and normal proxy for third-party modules, GONOSUMDB for settle's path):
#   - go gets the one settle module the program needs (dialect-sqlite; dialect-sqlite-purego,
#     built with CGO_ENABLED=0; transport-amqp),
#   - builds and runs it: it publishes a message, acknowledges it and checks what the backend holds
#     (SQLite in a temporary file; the real RabbitMQ at SETTLE_TEST_AMQP_URL),
#   - fails if any settle module resolves to a version other than VERSION, through a replace, or
#     to a version the proxy does not hold (the v0.0.0 that no tag backs);
# and installs the CLI as an operator does (go install cmd/settle@VERSION, with cgo and without),
# which then reads the SQLite program's queue.
# Under SETTLE_REQUIRE_SERVERS=1 an unreachable RabbitMQ fails the run; otherwise its program is
# skipped with the address tried. Everything is made under one temporary folder, removed at exit,
# except the consumers' module cache: it is kept (in $XDG_CACHE_HOME or ~/.cache, settle's own
# modules removed from it before and after each run, so none is ever stale) because its path is
# part of the build cache's key for cgo packages: a new path each run would compile go-sqlite3's
# C code every time (minutes on two cores) instead of once. Its module index is off
# (GODEBUG=goindex=0): the index assumes a path@version never changes, and settle's do.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=github.com/settlehq/settle
amqp_url=${SETTLE_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/}

mapfile -t dirs < <(go list -m -f '{{.Dir}}')
[ ${#dirs[@]} -gt 0 ] || { echo "consumer: no modules in go.work" >&2; exit 1; }

# The version the modules require each other at; every such requirement must agree.
mapfile -t versions < <(for d in "${dirs[@]}"; do
	(cd "$d" && go mod edit -json | jq -r --arg p "$prefix/" '.Require[]? | select(.Path | startswith($p)) | .Version')
done | sort -u)
version=${1:-${versions[0]:-}}
if [ ${#versions[@]} -ne 1 ]; then
	echo "consumer: the modules require their siblings at ${#versions[@]} versions (${versions[*]}), not at one: run ci/release.sh VERSION" >&2
	exit 1
elif [ "${versions[0]}" != "$version" ]; then
	echo "consumer: the modules require their siblings at ${versions[0]}, not at $version: run ci/release.sh $version" >&2
	exit 1
fi

for d in "${dirs[@]}"; do
	cmp -s LICENSE "$d/LICENSE" || {
		echo "consumer: ${d#"$root/"}/LICENSE is missing or differs from LICENSE (a module's zip holds only its folder): cp LICENSE ${d#"$root/"}/" >&2
		exit 1
	}
done

work=$(mktemp -d "${TMPDIR:-/tmp}/settle-consumer.XXXXXX")
modcache=${XDG_CACHE_HOME:-$HOME/.cache}/settle/consumer-modcache
forget_settle() { # the module cache is read-only
	local d
	for d in "$modcache/$prefix" "$modcache/cache/download/$prefix"; do
		[ -e "$d" ] && chmod -R u+w "$d" && rm -rf "$d"
	done
	return 0
}
cleanup() {
	rm -rf "$work"
	forget_settle
}
trap cleanup EXIT
mkdir -p "$modcache"
forget_settle

# The tree as it would be tagged: tracked and untracked files, without what .gitignore excludes.
mkdir -p "$work/src"
git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$work/src"
rel=()
for d in "${dirs[@]}"; do rel+=("$work/src/${d#"$root/"}"); done

started=$(date +%s)
(cd ci/modproxy && GOWORK=off go build -o "$work/modproxy" .)
"$work/modproxy" -version "$version" -time "$(git log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)" -out "$work/proxy" "${rel[@]}" >/dev/null
echo "consumer: proxy of ${#dirs[@]} modules at $version in $work/proxy"

normal_proxy=$(go env GOPROXY)
cache=$(go env GOMODCACHE)
consumer_env=(
	GOWORK=off
	GOFLAGS=-mod=mod
	GOMODCACHE="$modcache"
	GOPROXY="file://$work/proxy,file://$cache/cache/download,$normal_proxy"
	GONOSUMDB="$prefix"
	GOPRIVATE=
	GONOPROXY=
	GOTOOLCHAIN=local
	# The go command indexes a module cache folder once per path@version, as if it never
	# changed; here it does (settle's modules are rewritten at the same version every run).
	GODEBUG=goindex=0
)

# consume NAME MODULE ARG: builds ci/consumer/NAME against MODULE@version and runs it with ARG.
consume() {
	local name=$1 module=$2 arg=$3 dir="$work/$1"
	mkdir -p "$dir"
	cp "ci/consumer/$name/main.go" "$dir/"
	(
		cd "$dir"
		export "${consumer_env[@]}"
		go mod init example.com/consumer-"$name" >/dev/null 2>&1
		go get "$prefix/$module@$version" >"$dir/get.log" 2>&1 || { cat "$dir/get.log"; exit 1; }
		go mod tidy >"$dir/tidy.log" 2>&1 || { cat "$dir/tidy.log"; exit 1; }
		go build -o "$dir/app" . || exit 1
		bad=0
		while read -r path ver repl; do
			if [ "$ver" != "$version" ] || [ -n "$repl" ]; then
				echo "consumer: $name resolves $path to $ver${repl:+ (replaced by $repl)}, want $version" >&2
				bad=1
			elif [ ! -f "$work/proxy/$path/@v/$version.zip" ]; then
				echo "consumer: $name resolves $path@$ver, which the proxy does not hold" >&2
				bad=1
			fi
		done < <(go list -m -f '{{if not .Main}}{{.Path}} {{.Version}} {{with .Replace}}{{.Path}}{{end}}{{end}}' all | grep "^$prefix/")
		[ "$bad" -eq 0 ] || exit 1
		echo "consumer: $name: $(go list -m -f '{{if not .Main}}{{.Path}}@{{.Version}}{{end}}' all | grep "^$prefix/" | sed "s|^$prefix/||" | tr '\n' ' ')"
		"$dir/app" "$arg"
	)
}

consume sqlite dialect-sqlite "$work/sqlite/queue.db"
CGO_ENABLED=0 consume sqlitepure dialect-sqlite-purego "$work/sqlitepure/queue.db" # no C compiler needed

# install_cli CGO: an operator's `go install github.com/settlehq/settle/cmd/settle@VERSION`, with cgo
# on or off (no C compiler: the CLI then reads SQLite through dialect-sqlite-purego), which must
# build from the published modules alone (no replace line may be in the command's go.mod), then
# `settle stats` on the SQLite file the sqlite program made.
install_cli() {
	local cgo=$1 bin="$work/cli$1"
	(
		export "${consumer_env[@]}"
		export GOFLAGS= GOBIN="$bin" CGO_ENABLED="$cgo"
		cd "$work"
		go install "$prefix/cmd/settle@$version" >"$work/cli$cgo.log" 2>&1 || { cat "$work/cli$cgo.log"; exit 1; }
	) || { echo "consumer: go install $prefix/cmd/settle@$version (CGO_ENABLED=$cgo) failed" >&2; return 1; }
	"$bin/settle" --help | grep -q "through dialect-sqlite$([ "$cgo" = 0 ] && echo -purego)" || {
		echo "consumer: the CLI built with CGO_ENABLED=$cgo does not read SQLite through the dialect it should" >&2
		return 1
	}
	"$bin/settle" stats --dsn "sqlite://$work/sqlite/queue.db" --table jobs --queue emails --dead emails.dead >"$work/cli$cgo.out" || {
		cat "$work/cli$cgo.out"
		echo "consumer: settle stats (CGO_ENABLED=$cgo) failed on the sqlite program's database" >&2
		return 1
	}
	grep -q '^ *emails ' "$work/cli$cgo.out" || { cat "$work/cli$cgo.out"; echo "consumer: settle stats printed no row for the queue" >&2; return 1; }
	echo "consumer: go install cmd/settle@$version with CGO_ENABLED=$cgo; settle stats read the sqlite program's queue"
}
install_cli 1
install_cli 0

if (exec 3<>"/dev/tcp/$(sed -E 's|^[a-z]+://([^@]*@)?([^:/]+).*|\2|' <<<"$amqp_url")/$(sed -E 's|^[a-z]+://([^@]*@)?[^:/]+:?([0-9]*).*|\2|' <<<"$amqp_url" | sed 's/^$/5672/')") 2>/dev/null; then
	consume amqp transport-amqp "$amqp_url"
elif [ "${SETTLE_REQUIRE_SERVERS:-}" = 1 ]; then
	echo "consumer: RabbitMQ at $amqp_url is required (SETTLE_REQUIRE_SERVERS=1) but unreachable" >&2
	exit 1
else
	echo "consumer: skipped the amqp program: RabbitMQ at $amqp_url unreachable (set SETTLE_TEST_AMQP_URL)"
fi
echo "consumer: ok in $(($(date +%s) - started))s"
