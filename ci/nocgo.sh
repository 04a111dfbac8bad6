#!/usr/bin/env bash
# ci/nocgo.sh: what must work without cgo or a C compiler (CGO_ENABLED=0; no -race, which needs
# cgo): the README's first command, the refunds example, which then takes dialect-sqlite-purego,
# and the purego dialect's own suites (sqlqueuetest and core/transporttest) with the example's
# tests, and the operations command (cmd/settle) for Linux, macOS and Windows. ci/test.sh runs the
# same tests with cgo and -race.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== CGO_ENABLED=0 go run ./examples/refunds"
go run ./examples/refunds -db "$tmp/refunds.db" >"$tmp/out" 2>"$tmp/log" || {
	cat "$tmp/log" "$tmp/out"
	echo "ci/nocgo.sh: the refunds example failed without cgo" >&2
	exit 1
}
cat "$tmp/out"
grep -q 'SQLite through dialect-sqlite-purego' "$tmp/out" || { echo "ci/nocgo.sh: the example did not take dialect-sqlite-purego without cgo" >&2; exit 1; }
grep -q '^r-ok-1 .* refunded$' "$tmp/out" || { echo "ci/nocgo.sh: the example's summary is missing" >&2; exit 1; }

echo "== CGO_ENABLED=0 go vet and go test: dialect-sqlite-purego, examples/refunds"
go vet ./dialect-sqlite-purego ./examples/refunds
go test -count=1 ./dialect-sqlite-purego ./examples/refunds

# The operations command installs without a C compiler too (go install, static binaries), for
# Linux, macOS and Windows, and then reads SQLite through dialect-sqlite-purego.
echo "== CGO_ENABLED=0 go build ./cmd/settle (linux, darwin, windows)"
go build -o "$tmp/settle" ./cmd/settle
"$tmp/settle" --help | grep -q 'through dialect-sqlite-purego' || { echo "ci/nocgo.sh: the CLI built without cgo does not read SQLite through dialect-sqlite-purego" >&2; exit 1; }
"$tmp/settle" stats --dsn "sqlite://$tmp/refunds.db" --table refunds --queue refunds --dead refunds.dead >"$tmp/stats" || { cat "$tmp/stats"; echo "ci/nocgo.sh: settle stats failed on the example's database" >&2; exit 1; }
for os in darwin windows; do
	GOOS=$os GOARCH=arm64 go build -o /dev/null ./cmd/settle || { echo "ci/nocgo.sh: cmd/settle does not build for $os without cgo" >&2; exit 1; }
done
