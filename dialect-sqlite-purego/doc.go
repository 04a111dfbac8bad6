// Package sqlitepure is settle's cgo-free SQLite dialect (module dialect-sqlite-purego,
// package sqlitepure): queue tables in a SQLite file through modernc.org/sqlite, SQLite
// translated to Go, so it builds with CGO_ENABLED=0 and needs no C compiler. It offers the lease
// and advisory claim forms; SQLite has no row locks, so it has no row-lock constructor.
//
// It has the API of dialect-sqlite (the cgo dialect on mattn/go-sqlite3): Open, New, TableDDL,
// CreateTable, Lease, Advisory, NewPublisher, Tx, InTx, IsTransient, CheckHealth, the options
// Synchronous, BusyTimeout, MaxOpenConns, WithLogger and WithClock, and the same table layout
// and time format, so a file written by one is read by the other and a service switches by
// changing its import. Choose this one where a C compiler is not at hand (a scratch container,
// cross-compiling); choose dialect-sqlite for the C SQLite build many distributions ship. Their
// drain rates are compared in bench/README.md.
//
// It is written only against settle's exported API, and is the worked example of the guide to
// writing a dialect (docs/custom-dialect.md): it declares its SQL family (driver.SQLFamily:
// SQLite, so custom events and plugins treat its SQL as SQLite's), one writer at a time
// (driver.SingleWriter), its column types (driver.DDLTypes, for outbox.DDL) and its
// tables' identity (driver.TableIdentity); advisory keys live in the process
// (driver.LocalKeys); its tests run sqlqueuetest and core/transporttest.
//
// Open sets WAL journaling and a busy timeout, and begins every transaction with BEGIN
// IMMEDIATE, so that concurrent claimants queue for the write lock instead of deadlocking on a
// lock upgrade. Claims are one UPDATE … RETURNING per batch, and the lease form settles a
// batch in the transaction of the next claim.
//
// Durability: the default is synchronous=FULL, under which a commit (a publish, a claim, a
// grouped settlement) survives power loss. Synchronous(Normal) keeps WAL's crash safety for the
// process but may lose the last commits on power loss or an OS crash. A lost settlement only
// redelivers; a lost publish loses the message, hence the default.
//
// SQLite has one writer at a time: concurrent writes (claims, settlements, publishes, other
// processes) wait for the write lock in SQLite's busy handler, up to the busy timeout. A
// handler mounted with sqlqueue.Transactional() holds that lock while it works, so keep such
// handlers short.
//
// Advisory keys are an in-process registry (driver.LocalKeys), shared with every DB of the
// process on the same file (this dialect's and dialect-sqlite's alike): they serialise rows
// with the same key among the subscriptions of one process, and while an advisory subscription
// runs the process holds an exclusive lock on the companion file <database>-settle-keys, so an
// advisory subscription of a second process on the same file is refused at start. Several
// processes on one file use the lease form.
//
// Times are stored as TEXT in UTC with microseconds ("2026-01-01T00:00:00.000000Z"), which
// compare in time order.
package sqlitepure
