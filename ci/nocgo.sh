#!/usr/bin/env bash
# ci/nocgo.sh: what must work without cgo or a C compiler (CGO_ENABLED=0; no -race, which needs
# cgo): the README's first command, the refunds example, which then takes dialect-sqlite-purego,
# and the purego dialect's own suites (sqlqueuetest and core/transporttest) with the example's
# tests, and the operations command (cmd/settle) for macOS and Windows. ci/test.sh runs the same
# tests with cgo and -race.
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

# The operations command builds without a C compiler for macOS and Windows too (ci/consumer.sh
# installs it without cgo on Linux and runs it).
echo "== CGO_ENABLED=0 go build ./cmd/settle (darwin, windows)"
for os in darwin windows; do
	GOOS=$os GOARCH=arm64 go build -o /dev/null ./cmd/settle || { echo "ci/nocgo.sh: cmd/settle does not build for $os without cgo" >&2; exit 1; }
done
