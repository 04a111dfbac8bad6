// Command settle looks at settle's queues and their dead letters on any backend — SQLite,
// PostgreSQL, MySQL/MariaDB queue tables, RabbitMQ queues and NATS JetStream subjects — and
// redrives or purges them:
//
//	settle stats                      depth by state, oldest ready age, dead letters
//	settle queues                     every queue of the target with its figures
//	settle health                     exit 0 when the target answers and is within limits
//	settle dead ls                    dead letters with why they died (count, origin, age, reason)
//	settle dead show ID               one dead letter: headers and payload
//	settle dead redrive ID… | --all   back to the queue they came from, attempts reset
//	settle dead purge ID… | --all     deleted for good
//	settle stranded                   NATS: messages the stream holds and will never deliver again
//	settle stranded repair SEQ… | --all [--to dead|queue]   moved to the dead letter or the queue
//	settle console                    the web console (package console); a target that is
//	                                  down is shown down and reopened in the background
//	settle asyncapi -- COMMAND…       the AsyncAPI document of a program's App
//
// The target is a DSN plus a table and group, or a queue: --dsn, --table, --queue and --dead,
// or SETTLE_DSN, SETTLE_TABLE, SETTLE_QUEUE and SETTLE_DEAD. --json prints machine-readable
// output. Exit codes: 0 done, 1 the backend failed, 2 usage error, 3 backend unreachable, 4 no
// such table or queue, 5 unknown dead-letter id, 6 settle health: over a limit. Install with
//
//	go install github.com/settlehq/settle/cmd/settle@latest
//
// Everything it does goes through core/ops, which every backend implements.
package main
