#!/usr/bin/env bash
# RabbitMQ nodes of a test's own on loopback: one node or a cluster, each with its own node name,
# AMQP and Erlang distribution ports, data and log directories, all under DIR (the caller removes
# DIR). Nodes share an Erlang cookie (DIR/.erlang.cookie, through HOME) so that they can join and
# rabbitmqctl can reach them; no plugin is enabled. Processes are ended by their own pids only.
#
#   ci/rabbitmq-cluster.sh start DIR NODES AMQP_PORT DIST_PORT [NAME]
#       start NODES nodes NAME-1@localhost … (default name settle-amqp) on AMQP ports
#       AMQP_PORT, AMQP_PORT+1, … and distribution ports DIST_PORT, …; nodes 2.. join node 1.
#       On DIR's data from an earlier start (the cluster stopped), every node starts at once.
#       SETTLE_RABBITMQ_PLUGINS (comma-separated, e.g. rabbitmq_management) enables plugins; the
#       management plugin listens on 127.0.0.1 at AMQP_PORT+10000 (statistics every 500 ms).
#       Prints the AMQP URLs, one a line.
#   ci/rabbitmq-cluster.sh stop DIR                 kill every node of DIR (teardown)
#   ci/rabbitmq-cluster.sh stop-node DIR I          stop node I gracefully (rabbitmqctl stop)
#   ci/rabbitmq-cluster.sh kill-node DIR I          kill -9 node I's Erlang VM
#   ci/rabbitmq-cluster.sh start-node DIR I         start node I again (it rejoins its cluster)
#   ci/rabbitmq-cluster.sh leader DIR QUEUE         print the node holding QUEUE's leader (quorum)
#   ci/rabbitmq-cluster.sh ctl DIR I ARGS…          rabbitmqctl ARGS against node I
#
# The settle AMQP helper's range is AMQP 5690-5699, distribution 25690-25699.
set -euo pipefail

bin=/usr/lib/rabbitmq/bin # the scripts there keep the RABBITMQ_* environment (/usr/sbin's switch user)
[ -x "$bin/rabbitmq-server" ] || bin=$(dirname "$(command -v rabbitmq-server)")

die() { echo "rabbitmq-cluster.sh: $*" >&2; exit 1; }

# node_env DIR I: the environment of node I, from DIR/nodeI/settings (NAME PORT DIST).
node_env() {
	local dir=$1 i=$2 name port dist
	read -r name port dist <"$dir/node$i/settings" || die "no node $i in $dir"
	local nd="$dir/node$i"
	echo HOME="$dir" RABBITMQ_NODENAME="$name" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$dist" \
		RABBITMQ_MNESIA_BASE="$nd/mnesia" RABBITMQ_LOG_BASE="$nd/log" RABBITMQ_PID_FILE="$nd/beam.pid" \
		RABBITMQ_CONFIG_FILE="$nd/rabbitmq.conf" RABBITMQ_CONF_ENV_FILE="$nd/env.conf" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$nd/enabled_plugins" ERL_EPMD_ADDRESS=127.0.0.1 \
		ERL_CRASH_DUMP="$nd/erl_crash.dump"
}

node_name() { read -r name _ <"$1/node$2/settings"; echo "$name"; }

ctl() {
	local dir=$1 i=$2
	shift 2
	env $(node_env "$dir" "$i") timeout 120 "$bin/rabbitmqctl" -n "$(node_name "$dir" "$i")" "$@"
}

start_node() {
	local dir=$1 i=$2 nd="$1/node$2"
	rm -f "$nd/beam.pid"
	# setsid: the node runs in a process group of its own, ended by its id.
	env $(node_env "$dir" "$i") setsid "$bin/rabbitmq-server" >>"$nd/server.out" 2>&1 </dev/null &
	local group=$!
	echo $group >"$nd/group.pid"
	# await_startup needs the node registered with epmd first; poll until it answers.
	for _ in $(seq 180); do
		if ctl "$dir" "$i" await_startup --timeout 90 >>"$nd/ctl.out" 2>&1; then
			return 0
		fi
		kill -0 "$group" 2>/dev/null || break
		sleep 0.5
	done
	tail -n 30 "$nd/server.out" >&2 || true
	die "node $i ($(node_name "$dir" "$i")) did not start; see $nd"
}

kill_node() {
	local nd="$1/node$2" pid
	if ! { [ -f "$nd/beam.pid" ] && kill -0 "$(cat "$nd/beam.pid")" 2>/dev/null; }; then
		# No pid file (the node is still starting, or it was removed): ask the node its pid.
		pid=$(ctl "$1" "$2" eval 'list_to_integer(os:getpid()).' 2>/dev/null | tr -dc '0-9') || true
		[ -n "$pid" ] && echo "$pid" >"$nd/beam.pid"
	fi
	for f in beam.pid group.pid; do
		[ -f "$nd/$f" ] || continue
		pid=$(cat "$nd/$f")
		if [ "$f" = group.pid ]; then
			kill -9 -- "-$pid" 2>/dev/null || true
		else
			kill -9 "$pid" 2>/dev/null || true
		fi
	done
	# wait until the VM is gone, so that a restart can take its ports
	for _ in $(seq 100); do
		[ -f "$nd/beam.pid" ] && kill -0 "$(cat "$nd/beam.pid")" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$nd/beam.pid" "$nd/group.pid"
}

cmd=${1:-}
shift || true
case "$cmd" in
start)
	[ $# -ge 4 ] || die "usage: start DIR NODES AMQP_PORT DIST_PORT [NAME]"
	dir=$1 nodes=$2 port=$3 dist=$4 name=${5:-settle-amqp}
	mkdir -p "$dir"
	[ -f "$dir/.erlang.cookie" ] || { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/.erlang.cookie"; chmod 400 "$dir/.erlang.cookie"; }
	for i in $(seq "$nodes"); do
		nd="$dir/node$i"
		mkdir -p "$nd"
		p=$((port + i - 1)) d=$((dist + i - 1))
		echo "$name-$i@localhost $p $d" >"$nd/settings"
		{
			printf 'listeners.tcp.default = 127.0.0.1:%d\nloopback_users.guest = true\n' "$p"
			# Nodes 2.. join node 1 when they first boot (classic peer discovery), without
			# the stop_app/join_cluster/start_app round of rabbitmqctl calls.
			printf 'cluster_formation.peer_discovery_backend = classic_config\n'
			printf 'cluster_formation.classic_config.nodes.1 = %s-1@localhost\n' "$name"
			printf 'cluster_formation.randomized_startup_delay_range.min = 0\n'
			printf 'cluster_formation.randomized_startup_delay_range.max = 0\n'
			case ",${SETTLE_RABBITMQ_PLUGINS:-}," in
			*,rabbitmq_management,*)
				printf 'management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = %d\n' $((p + 10000))
				printf 'collect_statistics_interval = 500\n'
				;;
			esac
		} >"$nd/rabbitmq.conf"
		: >"$nd/env.conf"
		echo "[${SETTLE_RABBITMQ_PLUGINS:-}]." >"$nd/enabled_plugins"
	done
	# A fresh cluster: node 1 boots first, the others boot in parallel and join it. On the data
	# of a cluster that ran before, every node boots at once: each waits at boot for the peers it
	# last saw running (node 1 too), so starting node 1 alone would wait for peers not started.
	first=1
	for i in $(seq "$nodes"); do [ -d "$dir/node$i/mnesia" ] && first=0; done
	pids=()
	if [ "$first" = 1 ]; then start_node "$dir" 1; fi
	for i in $(seq $((1 + first)) "$nodes"); do start_node "$dir" "$i" & pids+=($!); done
	for p in "${pids[@]}"; do wait "$p" || die "a node did not start"; done
	running=$(ctl "$dir" 1 eval 'length(rabbit_nodes:all_running()).' 2>/dev/null | tr -d '[:space:]')
	[ "$running" = "$nodes" ] || die "cluster formed with $running running nodes of $nodes; see $dir/node*/log"
	for i in $(seq "$nodes"); do echo "amqp://guest:guest@127.0.0.1:$((port + i - 1))/"; done
	;;
stop)
	dir=$1
	for nd in "$dir"/node*; do
		[ -d "$nd" ] && kill_node "$dir" "${nd##*/node}"
	done
	;;
stop-node)
	ctl "$1" "$2" stop >/dev/null
	kill_node "$1" "$2"
	;;
kill-node) kill_node "$1" "$2" ;;
start-node) start_node "$1" "$2" ;;
leader)
	# ask each node in turn: the one that answers first (a node may be down)
	for nd in "$1"/node*; do
		out=$(ctl "$1" "${nd##*/node}" list_queues -q --no-table-headers name leader 2>/dev/null) || continue
		echo "$out" | awk -v q="$2" '$1 == q { print $2 }'
		break
	done
	;;
ctl) ctl "$@" ;;
*) die "unknown command '$cmd' (start, stop, stop-node, kill-node, start-node, leader, ctl)" ;;
esac
