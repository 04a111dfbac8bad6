// Package driver is the contract between settle's SQL queue engine (package sqlqueue) and a
// dialect module: the service-provider interface, kept apart from the package services import,
// as database/sql keeps database/sql/driver. The engine never imports a database driver; it runs
// statements through the connection surface of this package (Queryer, Transaction, Conn, DB)
// and spells them with a Dialect. A dialect module
//
//   - adapts its driver to DB (database/sql drivers use StdDB; pgx writes a small adapter),
//   - implements Dialect, plus LeaseDialect, RowLockDialect and/or AdvisoryDialect for the claim
//     forms it supports (a form it lacks has no constructor, so it cannot be mounted),
//   - offers endpoint constructors that call sqlqueue.NewLease, NewRowLock or NewAdvisory,
//   - runs sqlqueuetest.Run from its own tests, and keeps the SQL the engine renders for it in
//     golden files (sqlqueuetest.Golden: go test -run TestGolden -update rewrites them).
//
// The table a queue lives in is described by Table (sqlqueue.Table is the same type) and spelled
// for a dialect by Schema; a dialect renders its claims from a Schema with the engine's helpers
// (UpdateReturningClaim, SelectThenUpdateClaim, SelectClaim) or with Schema.Ready, Schema.Order,
// Schema.Returned and a Binder when it spells its own.
//
// These interfaces only grow: methods are never removed or changed, and new capabilities come as
// optional interfaces discovered by type assertion.
//
// # Optional capabilities
//
// What a dialect (or its DB) can do beyond the required methods, grouped by what it is about;
// each is discovered by a type assertion when a subscription opens, and each is refused or
// ignored without harm when absent:
//
//	capability           implemented by         what the engine does without it
//
//	spelling and catalogue (caps_catalogue.go)
//	SQLFamily            all four               custom events, plugins and telemetry see family ""
//	IdentifierLimit      postgres, mysql        sets no limit on identifiers
//	DDLTypes             all four               outbox.DDL and similar helpers refuse the dialect
//	TableIdentity        all four               names advisory keys after the table as spelled
//	ByIDHints            mysql                  starts statements by id with plain UPDATE/DELETE
//
//	row locks (caps_rowlocks.go)
//	RowLocking           postgres, mysql        bounds waits by a client deadline only; extends
//	                                            leases without locking; no counting at claim
//	ReturnedRowLocks     postgres               looks for lapsed rows between claims, not beside
//	ClaimIndex           mysql                  lets the planner choose the claims' index
//	GroupOrder           postgres               compares the group with = and orders by id
//
//	grouped settlement (caps_grouped.go)
//	GroupedRowLock       postgres, mysql        settles a row-lock claim one statement per row
//	GroupedRowLockSQL    mysql                  groups with "… WHERE id IN (…)"
//	GroupedRowLockArray  postgres, mysql        binds one argument per id
//	Mover                postgres               copies to the dead-letter table, then deletes
//
//	round trips (caps_roundtrips.go)
//	Pipeliner            postgres (its DB)      settles and claims in a transaction of its own
//	TxPipeliner          postgres (its DB)      sends a row-lock claim's BEGIN and COMMIT alone
//	DriverOwnedBytes     sqlite (mattn)         copies each payload once more
//	StepClaim            the engine's claims    (of a Claim) no pipelined claim
//	LockingClaim         SelectClaim with lock  (of a Claim) checks the grouped row count on COMMIT
//
//	connections (caps_connections.go)
//	ConnLoss             postgres, mysql        fails Next into core's backoff on a lost server
//	Notifier             postgres (Notify)      wakes claimants of this process only
//	SingleWriter         sqlite, sqlite-purego  claims ahead in the row-lock form (two writers)
//
//	advisory keys (caps_advisory.go)
//	AdvisoryFilter       postgres, mysql        tries every candidate's key with TryLock
//
// "all four" are dialect-postgres, dialect-mysql (MySQL and MariaDB), dialect-sqlite and
// dialect-sqlite-purego.
package driver
