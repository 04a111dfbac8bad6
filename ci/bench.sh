#!/usr/bin/env bash
# Runs settle's benchmarks: core's dispatch path, the SQLite drain, the outbox, the plugin round
# trip, and the side-by-side bench module (both SQLite dialects, PostgreSQL vs River, MariaDB,
# RabbitMQ vs Watermill, NATS JetStream vs raw nats.go).
# Servers as for the tests (ci/services.sh). Ratios only compare within one run; the figures and
# their reading are in bench/README.md. Not part of .ci/run: it takes tens of minutes.
set -eu
cd "$(dirname "$0")/.."
run() { echo "== $*"; "$@"; }
run go -C core test -run '^$' -bench Dispatch -benchtime 300000x .
run go -C dialect-sqlite test -run '^$' -bench Drain -benchtime 50000x .
run go -C bench test -run '^$' -bench 'BenchmarkSQLite$' -benchtime 1x -timeout 30m .
run go -C examples test -run '^$' -bench Payouts -benchtime 2000x ./outbox
run go -C eventplugin test -run '^$' -bench . -benchtime 3000x .
run go -C bench test -run '^$' -bench 'BenchmarkPostgresSettle$' -benchtime 1x -timeout 60m .
run go -C bench test -run '^$' -bench 'BenchmarkPostgresLatency$' -benchtime 1x -timeout 20m .
run go -C bench test -run '^$' -bench 'BenchmarkMariaDB$' -benchtime 1x -timeout 60m .
run go -C bench test -run '^$' -bench BenchmarkAMQP -benchtime 1x -timeout 30m .
run go -C bench test -run '^$' -bench BenchmarkNATS -benchtime 1x -timeout 30m .
