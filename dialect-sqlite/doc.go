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
// the process but may lose the last commits on power loss or an OS crash; where syncing is
// slow it is several times faster (on the reference machine kind a raw lease loop ran ~39k
// msgs/s under FULL, ~112k under NORMAL). A lost settlement only redelivers; a lost publish
// loses the message, hence the default.
//
// SQLite has one writer at a time: concurrent writes (claims, settlements, publishes, other
// processes) wait for the write lock in SQLite's busy handler, up to the busy timeout. A handler
// mounted with sqlqueue.Transactional() holds that lock while it works (its transaction is a
// write transaction from its first statement), so claims and settlements wait for it: keep such
// handlers short. (Earlier versions queued the process's own writes on an in-process lock; it
// bought nothing measurable and is gone: see bench/README.md.)
//
// The engine's transactions (claims, settlements, extensions) end, rolled back, when their
// context does, but their BEGIN and writes are not interrupted once started: the driver would
// run each on a goroutine of its own to be able to, and none of them waits for anything an
// interrupt ends (the busy handler's wait for the write lock is not one). A Transactional
// handler's own statements on the *sql.Tx keep their contexts.
//
// Throughput: the lease form settles a batch of deliveries in the transaction of the next
// claim, one commit per batch. BenchmarkDrain drains rows through the service and through a
// raw go-sqlite3 loop running the same statements in the same process:
//
//	go test -run '^$' -bench Drain -benchtime 50000x ./dialect-sqlite
//
// On the development machine (2 vCPU, shared with other test runs at load 5–10) the service
// drained 72–224k msgs/s with batches of 100; over eight runs its ratio to the raw loop ranged
// 0.66–1.31 (median 1.04; each run reports medians of five paired drains, and the spread is
// the machine's), at 7.8 allocations per message against the raw loop's 8.7. FULL and NORMAL
// differed less there than on a disk whose sync is slow.
//
// Advisory keys are an in-process registry (driver.LocalKeys): they serialise rows with the
// same key among the subscriptions of one process, and while an advisory subscription runs the
// process holds an exclusive lock on the companion file <database>-settle-keys, so an advisory
// subscription of a second process on the same file is refused at start. Several processes on
// one file use the lease form.
//
// Crash loops: the lease and advisory forms count an attempt when they take a row, so a
// message whose handler kills the process is delivered again with a higher attempt, and with
// core.DeadLetterAfter(n, dest) it goes to the dead letter at attempt n+1 without the handler
// running ("not settled after n attempts"). The rows claimed beside it are not dragged along:
// a row whose claim lapsed without a settlement is taken again alone, as core.Suspect, so a
// crash charges only the row being handled (the advisory form marks a taken row in
// locked_until for this; see sqlqueue's "Crash loops end at the cap").
//
// Times are stored as TEXT in UTC with microseconds ("2026-01-01T00:00:00.000000Z"), which
// compare in time order.
package sqlite
