// Package sqlite is settle's SQLite dialect (module dialect-sqlite, package sqlite): queue
// tables in a SQLite file through mattn/go-sqlite3 (cgo), in the lease and advisory claim forms.
// SQLite has no row locks, so this package offers no row-lock constructor.
//
// Open sets WAL journaling and a busy timeout, and begins every transaction with BEGIN
// IMMEDIATE, so that concurrent claimants queue for the write lock instead of deadlocking on
// a lock upgrade. Claims are one UPDATE … RETURNING per batch.
//
// Durability: the default is synchronous=FULL, under which a commit (a publish, a claim, a
// grouped settlement) survives power loss. Synchronous(Normal) keeps WAL's crash safety for
// the process but may lose the last commits on power loss or an OS crash; it roughly triples
// throughput for small batches (see the benchmark in this package). A lost settlement only
// redelivers; a lost publish loses the message, hence the default.
//
// SQLite has one writer at a time. Within a process, settle's writes (claims, grouped
// settlements, publishes) take turns on an in-process lock instead of SQLite's busy handler,
// which sleeps for milliseconds between tries. A handler mounted with sqlqueue.Transactional()
// holds that write lock while it works (its transaction is a write transaction from its first
// statement), so claims and settlements wait for it: keep such handlers short. Writes of other
// processes, or through SQL() directly, meet SQLite's busy timeout as usual.
//
// Advisory keys are an in-process registry: they serialise rows with the same key among the
// subscriptions of one process only. Several processes on one file need the lease form.
//
// Times are stored as TEXT in UTC with microseconds ("2026-01-01T00:00:00.000000Z"), which
// compare in time order.
package sqlite
