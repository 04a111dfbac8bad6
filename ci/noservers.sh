#!/usr/bin/env bash
# The README's test command as a user without any server runs it: ci/test.sh in a network
# namespace of its own, where nothing listens on PostgreSQL's, MariaDB's, RabbitMQ's or NATS's
# port. Every server suite must skip with its reason and nothing else may fail (a test whose
# cleanup dials the server it skipped for, say). Without -race, to stay quick; ci/test.sh has
# run the same tests with it. The module cache must hold every dependency already (ci/test.sh
# filled it): the namespace reaches no proxy.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then
	ns=(unshare --net)
else
	ns=(unshare --map-root-user --net)
fi
"${ns[@]}" true 2>/dev/null || {
	echo "ci/noservers.sh: cannot make a network namespace with ${ns[*]} (needs root or unprivileged user namespaces)" >&2
	exit 1
}
exec "${ns[@]}" env -u SETTLE_REQUIRE_SERVERS SETTLE_TEST_RACE=0 GOPROXY=off GOFLAGS="${GOFLAGS:-}" \
	bash -c 'ip link set lo up && exec bash ci/test.sh "$@"' noservers "$@"
