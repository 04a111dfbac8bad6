#!/usr/bin/env bash
# Starts PostgreSQL, MariaDB, RabbitMQ, NATS (with JetStream) and Redis when they are not answering, and
# waits (bounded) until each accepts connections. Idempotent: a running service is left alone.
set -u

wait_for() { # name, check command, seconds
	local name=$1 check=$2 limit=$3 i
	for ((i = 0; i < limit * 2; i++)); do
		if eval "$check" >/dev/null 2>&1; then
			echo "services: $name is up"
			return 0
		fi
		sleep 0.5
	done
	echo "services: $name did not accept connections within ${limit}s (check: $check)" >&2
	return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pg_up() { command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432 || port_open 5432; }
maria_up() {
	if command -v mariadb-admin >/dev/null; then mariadb-admin -h 127.0.0.1 -uroot ping; else port_open 3306; fi
}
rabbit_up() { port_open 5672; }
nats_up() { port_open 4222; }
redis_up() {
	if command -v redis-cli >/dev/null; then [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; else port_open 6379; fi
}

status=0
if ! pg_up >/dev/null 2>&1; then
	echo "services: starting PostgreSQL"
	pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
wait_for PostgreSQL pg_up 60 || status=1

if ! maria_up >/dev/null 2>&1; then
	echo "services: starting MariaDB"
	# --pidfile, not just --exec: a test's own mariadbd (another datadir and port) must not make
	# start-stop-daemon think the shared server is running.
	rm -f /run/mysqld/mysqld.pid
	mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null
	start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid --exec /usr/sbin/mariadbd || true
fi
wait_for MariaDB maria_up 60 || status=1

if ! rabbit_up; then
	echo "services: starting RabbitMQ"
	rabbitmq-server -detached || true
fi
wait_for RabbitMQ rabbit_up 120 || status=1

if ! nats_up; then
	echo "services: starting NATS"
	mkdir -p /var/lib/nats-server
	start-stop-daemon --start --oknodo --background --pidfile /run/settle-nats.pid --make-pidfile --exec /usr/sbin/nats-server -- \
		-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server || true
fi
wait_for NATS nats_up 30 || status=1

if ! redis_up; then
	echo "services: starting Redis"
	# No persistence: the shared server holds test streams only. Tests that restart Redis start
	# their own redis-server (transport-redis/redistest).
	redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save "" --appendonly no \
		--pidfile /run/settle-redis.pid --logfile /tmp/settle-redis.log || true
fi
wait_for Redis redis_up 30 || status=1

# The web console's browser test (cmd/settle) drives Debian's chromium headless.
if ! command -v chromium >/dev/null 2>&1; then
	echo "services: installing chromium (the console's browser test)"
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/tmp/settle-chromium-install.log 2>&1; then
		echo "services: installing chromium failed (see /tmp/settle-chromium-install.log)" >&2
		status=1
	fi
fi

exit $status
