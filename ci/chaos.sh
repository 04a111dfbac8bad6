#!/usr/bin/env bash
# The fault suite (chaos/): builds the driver, the worker and the eventplugin example plugin,
# then runs every trial against the suite's own servers (a PostgreSQL cluster, a MariaDB server
# and a RabbitMQ node on loopback ports of its own, in a temporary directory).
#
#   bash ci/chaos.sh            # the bounded profile (CI: every trial, small, a few minutes)
#   bash ci/chaos.sh --long     # the full profile (2,000 messages, 100+ kills per backend × form)
#   bash ci/chaos.sh -run 'kill/postgres' -keep    # any other flag goes to the driver
#
# The servers, data directories and worker processes are removed even when the run fails or
# is interrupted: the driver stops them, and this script's trap kills every process group the
# driver recorded if the driver itself dies.
set -u
cd "$(dirname "$0")/.."

args=() keep=
for a in "$@"; do
	case "$a" in
	--long) args+=(-profile long) ;;
	-keep | --keep) args+=(-keep) keep=1 ;;
	*) args+=("$a") ;;
	esac
done

work=$(mktemp -d /tmp/settle-chaos.XXXXXX)
chmod 755 "$work"
cleanup() {
	if [ -f "$work/run/groups" ]; then
		while read -r pgid _; do
			[ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null
		done <"$work/run/groups"
	fi
	if [ -n "$keep" ]; then
		rm -rf "$work/bin"
		echo "chaos.sh: kept $work/run"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bin="$work/bin"
(cd chaos && go build -o "$bin/" ./cmd/chaos ./cmd/chaos-worker) || exit 1
(cd eventplugin && go build -o "$bin/audit" ./examples/audit) || exit 1

"$bin/chaos" -dir "$work/run" -worker "$bin/chaos-worker" -plugin "$bin/audit" "${args[@]}"
