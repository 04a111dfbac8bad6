// Package postgres is settle's PostgreSQL dialect: queue tables on PostgreSQL 11 or later,
// through pgx/v5's native protocol (pgxpool), in all three claim forms of the sqlqueue engine.
// The module lives in the folder dialect-postgres; its package is named postgres.
//
// A DB wraps a pgxpool.Pool (New) or opens one (Open). Register it with the App, then mount
// handlers on endpoints built from it:
//
//	db, _ := postgres.Open(ctx, "postgres://app@localhost/app", postgres.Notify(true))
//	app := core.New()
//	app.Register(db)
//	jobs, _ := postgres.Lease(db, sqlqueue.StandardTable("jobs"), "refunds")
//	core.Subscribe(app, jobs, handle, core.DeadLetterAfter(5, "refunds.dead"), core.Workers(8))
//	app.Run(ctx)
//
// The three forms, and what each costs on PostgreSQL:
//
//   - Lease: one UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING stamps
//     locked_until (the delivery's token) and attempt + 1 and commits; handlers hold no
//     transaction, settlements are grouped into one token-fenced statement per flush, and a
//     flush of acks and drops travels with the next claim as one pgx batch: one round trip and
//     one commit per cycle (each grouped statement's row count is checked on the server, so a
//     lease lost in the group rolls the cycle back and the flush is settled on its own). The
//     fastest form; a crashed process's rows come back when their lease runs out, one at a
//     time and each run alone (core.Suspect), so a poison row cannot drag its neighbours to
//     the cap.
//   - RowLock: the claim transaction holds the rows (FOR UPDATE SKIP LOCKED) until they are
//     settled, and its commit is the settlement. Outside transactional mode a claim costs two
//     round trips: its BEGIN travels with the claim's SELECT, and its grouped settlement (one
//     DELETE or UPDATE … = ANY($1)) with its COMMIT, each as one pgx batch on the claim's
//     connection. The claim's lock holds every row the settlement names, so it changes each
//     one and its row count is not checked; a service's own claim (sqlqueue.EventClaim), which
//     need not lock its rows, keeps the check on the server. A crashed process's rows come back at once
//     (those of a claim that counted its attempts marked in locked_until, and taken again one
//     at a time, alone); each claimed batch keeps one connection busy while its handlers run.
//   - Advisory: pg_try_advisory_lock on a key per row (sqlqueue.AdvisoryKey; by default the id,
//     hashed with hashtextextended) on a connection reserved for the delivery; rows that share a
//     key are worked one at a time across processes. One connection per in-flight delivery.
//     Taking a row marks it in locked_until (where the table has the column) and settling
//     clears it, so the rows a crashed process held are taken again one at a time, alone.
//
// Pool sizing: a lease subscription borrows connections only for its statements; a row-lock
// subscription keeps one connection per open claim (a claimed batch waiting for its handlers)
// plus one to claim with; an advisory subscription keeps one connection per worker for as long
// as it runs, plus one for its candidate queries, and Open refuses it when the pool is too
// small for that (pgxpool's default is max(4, number of CPUs); set pool_max_conns in the URL).
//
// Transactional mode (sqlqueue.Transactional) hands the handler its delivery's pgx.Tx through
// Tx. Without a group column a dead letter is a table with the same columns, and the move is
// one statement: WITH moved AS (DELETE … RETURNING *) INSERT … SELECT … FROM moved.
//
// With Notify(true) every publish through the DB sends pg_notify inside its transaction, and
// one LISTEN connection per DB wakes the table's subscriptions in every process at once; it
// reconnects with backoff when its connection drops, and wakes everyone after a reconnect.
// Without it, subscriptions poll (sqlqueue.PollInterval) and publishes in the same process
// still wake them at once.
//
// Errors of statements whose connection was closed under them (a terminated backend, a server
// restart) match ErrConnLost: the server rolled back that connection's transaction and released
// its locks, so nothing settled and the rows come back. IsTransient tells a handler which of its
// own database errors are worth a retry.
//
// Start (called by App.Run) refuses servers older than PostgreSQL 11, with the version in the
// error; endpoints refuse identifiers longer than 63 bytes (MaxIdentifier), which PostgreSQL would
// truncate;
// subscriptions check the table's columns and their types in the catalogue and name a missing
// schema, table or column. TableDDL and CreateTable make a standard queue table.
package postgres
