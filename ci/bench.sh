#!/usr/bin/env bash
# Runs settle's benchmarks: core's dispatch path, the SQLite drain, the outbox, the plugin round
# trip, and the side-by-side bench module (both SQLite dialects, PostgreSQL vs River, MariaDB,
# RabbitMQ vs Watermill, NATS JetStream vs raw nats.go).
# Servers as for the tests (ci/services.sh). Ratios only compare within one run; the figures and
# their reading are in bench/README.md. Not part of .ci/run: it takes tens of minutes.
#
#   bash ci/bench.sh                 # run every benchmark, then draw bench/charts
#   bash ci/bench.sh --charts-only   # redraw bench/charts from the records of the last run
#
# The bench module's benchmarks write one JSON line per measured point to $SETTLE_BENCH_RECORD
# (bench/record_test.go); this script points it at a fresh bench/charts/records.jsonl and, at the
# end, ci/benchchart draws from it bench/charts/<chart>-<backend>.svg and bench/charts/README.md
# (the tables and charts bench/README.md links to), removing the SVGs of an earlier run.
set -eu
cd "$(dirname "$0")/.."
charts=bench/charts
records=$charts/records.jsonl

charts_only=false
case "${1-}" in
"") ;;
--charts-only) charts_only=true ;;
*)
	echo "usage: bash ci/bench.sh [--charts-only]" >&2
	exit 2
	;;
esac

# The chart tool is a module of its own, outside the workspace (like ci/testreport). Built first,
# so a run of tens of minutes does not end on a tool that does not build.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOWORK=off go -C ci/benchchart build -o "$tmp/benchchart" .
draw() { echo "== benchchart -in $records -out $charts"; "$tmp/benchchart" -in "$records" -out "$charts" -prune; }

if $charts_only; then
	[ -s "$records" ] || { echo "ci/bench.sh: no records in $records: run bash ci/bench.sh first" >&2; exit 1; }
	draw
	exit 0
fi

mkdir -p "$charts"
: >"$records" # a fresh file: the records of this run only
# Absolute: go test runs each benchmark in its package's folder.
export SETTLE_BENCH_RECORD="$PWD/$records"

run() { echo "== $*"; "$@"; }
run go -C core test -run '^$' -bench Dispatch -benchtime 300000x .
run go -C dialect-sqlite test -run '^$' -bench Drain -benchtime 50000x .
run go -C bench test -run '^$' -bench 'BenchmarkSQLite$' -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench 'BenchmarkSQLiteDefaults$' -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench 'BenchmarkSQLitePeers$' -benchtime 1x -timeout 30m .
run go -C examples test -run '^$' -bench Payouts -benchtime 2000x ./outbox
run go -C eventplugin test -run '^$' -bench . -benchtime 3000x .
run go -C bench test -run '^$' -bench 'BenchmarkPostgresSettle$' -benchtime 1x -timeout 60m .
run go -C bench test -run '^$' -bench 'BenchmarkPostgresDefaults$' -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench 'BenchmarkPostgresLatency$' -benchtime 1x -timeout 20m .
run go -C bench test -run '^$' -bench 'BenchmarkMariaDB$' -benchtime 1x -timeout 60m .
run go -C bench test -run '^$' -bench 'BenchmarkMariaDBDefaults$' -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench 'BenchmarkWatermill' -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench BenchmarkAMQP -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench BenchmarkNATS -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench 'BenchmarkScaling$' -benchtime 1x -timeout 90m .
run go -C bench test -run '^$' -bench 'BenchmarkLatency$' -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench 'BenchmarkBacklog$' -benchtime 1x -timeout 60m .

draw
