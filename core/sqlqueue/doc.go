// Package sqlqueue is settle's dialect-neutral SQL queue engine: queue tables in PostgreSQL,
// MySQL/MariaDB or SQLite, claimed in one of three forms, with every handler outcome turned
// into the finishing statement the form calls for.
//
// A queue table is described by a Table (StandardTable gives the default column names). A
// dialect module (dialect-sqlite, dialect-postgres, dialect-mysql) spells SQL for its database
// (Dialect) and offers constructors only for the claim forms it supports:
//
//	form      what holds the row                  where the finishing statement runs
//	lease     locked_until = the delivery token   any connection, fenced by the token
//	row lock  FOR UPDATE SKIP LOCKED              the claim transaction; its commit settles
//	advisory  a key lock on a dedicated conn      that connection, then the key is unlocked
//
// What each outcome writes:
//
//	outcome          row lock                      lease                          advisory
//	ack, drop        DELETE or set processed_at    same, WHERE locked_until=token same, then unlock
//	retry            attempt+1 (no attempt: none)  locked_until = NULL            none: unlock returns the row
//	retry_after(d)   retry_after, attempt+1        retry_after, locked_until=NULL retry_after, then unlock
//	cap reached      group := dead letter group, or the row moves to the dead-letter table
//	abandoned        rollback                      lease released at once         unlock
//
// (With a last_error column, retry, retry_after and the dead letter also record why; in the
// row-lock form with CountAtClaim the attempt is already counted and the settlement does not
// count it again.)
//
// Attempts are counted at the claim, durably, in the lease form (the claim commits attempt + 1
// with the lease) and the advisory form (when the row is taken, on its connection); in the
// row-lock form at the claim too with CountAtClaim (by default, for a subscription with
// DeadLetterAfter, in its small claims: see below), and otherwise by the statement that settles
// the row, inside the claim's transaction. Message.Attempt is 1 on the first delivery in every form. Delays stay in the
// database (retry_after), so they survive restarts.
//
// # Crash loops end at the cap
//
// A message whose handler never returns — it kills the process, hangs past its lease, or is
// abandoned at every shutdown — is delivered again with a higher attempt, because the attempt
// was committed when it was claimed. Past the DeadLetterAfter cap, core moves it to the dead
// letter without calling the handler, with the reason "not settled after N attempts" (in
// last_error and the dead-letter headers) and a warning carrying queue, message_id and
// attempt. This holds in every form (the row-lock form: with its default CountAtClaim, below).
//
// A poison row does not take its neighbours down. A crash charges an attempt to every row its
// process had claimed, handled or not; in the lease and advisory forms such a row is then
// recognisable: its claim lapsed without a settlement (lease: locked_until set and past, since
// every settlement and release clears it and a failed settlement's hold goes into retry_after;
// advisory: taking a row marks it in locked_until, where the table has the column, every settlement
// clears the mark, and its key is free). Such a row is taken only by a rescue, one at a time, when
// the process holds nothing else and takes nothing else while it runs, and it is handed out as
// core.Suspect, which core runs with no other handler of the subscription. A crash in its handler
// charges that row alone: the poison row reaches the cap, the rows claimed beside it were charged
// at most the attempt of the claim they shared with it. In the lease form a rescued row is counted
// as its handler starts, not by its rescue claim (which takes the attempt back in its transaction;
// core calls the delivery's Charge, a committed UPDATE, right before the handler): a process that
// dies while the rescued row waits for the subscription's other handlers to finish charges it
// nothing. The ordinary claim never takes a lapsed row, and a claimant looks for lapsed rows when
// it starts and then once per half lease, with one SELECT … LIMIT 1 (beside its claims, except on
// MySQL and MariaDB): nothing more per claim. While
// lapsed rows wait, the subscription takes no ordinary row until its handlers are done, for at most
// a second; then it takes ordinary rows for five times that before it tries again, so a handler
// that runs long does not stop the subscription. Rows claimed but never handed to a handler when a
// subscription stops are released with their attempt taken back. (Without locked_until the advisory
// form has no mark, and a crash charges every row its process held.) The row-lock form does the
// same for the rows of its counted claims (below): the count marks them in locked_until, every
// settlement clears the mark, and a marked row no claim holds (its claim's transaction died with
// its process or connection) is taken again only by the rescue, alone, when the process holds no
// other claimed row. A claimant looks for such rows when it starts, after a counted claim of its
// own failed, and every two seconds; rows of a counted claim never handed out when it stops are
// given back with their count taken back.
//
// The row-lock form's default, and what it costs: a crash rolls back the claim's transaction,
// and with it a count made there, so the row came back at attempt 0 forever. With
// DeadLetterAfter, the row-lock form therefore counts at claim (CountAtClaim), committing the
// count before it locks the rows, in the claims it makes while its claim size is below
// BatchSize: after it starts and after a failed claim, which is exactly when a process that
// crashed on a poison row meets that row again (it claims the oldest rows first, in small
// claims). Full-size claims, the steady state, are not counted at claim and cost nothing
// more; a poison row first met in one runs at most once more than the cap. Counting at every
// claim (CountAtClaim(true)) costs a second commit and an UPDATE per claim: with claims of 100
// rows on PostgreSQL 15 a drain ran at about a third of the rate (bench/README.md). Without a
// cap there is nothing for a count to end, and the form counts in the settling statement.
//
// A claim whose transaction keeps dying takes its neighbours with it, since they settle in
// the same commit. So the row-lock claim size adapts: it starts at one row, doubles with every
// claim that commits cleanly up to BatchSize, and halves with every claim that rolls back or
// gives rows back abandoned. A process restarted after a crash claims the oldest rows, where a
// poison row is, in the smallest claims: the poison row ends up claimed alone, a claim of one
// row that fails is that row's own failure (held back, below), and the rows around it settle in
// claims of their own.
//
// # When the settlement itself fails
//
// A settlement can fail while the handler succeeded: a custom event that errors, a trigger that
// refuses the dialect's statement, an event plugin that crashes, a row lock held by another
// session past the lock timeout. The row is then held back, per row, for a backoff on the App's
// clock that doubles with each consecutive failure of that row, FailureBackoff (1 s) up to
// FailureBackoffMax (1 min): its retry_after is set (in the lease form, fenced by the token,
// with the lease cleared; a lease table without retry_after moves its lease end instead, and
// the row comes back as a lapsed one; in memory only where the table has neither), and
// last_error says why. Other ready rows keep flowing; the attempt still counts (see above), so
// DeadLetterAfter ends the loop; and the failures are logged at most once per
// FailureLogInterval, with their count. (Core also reports each failed settlement to its
// observers and events.) In the lease form a grouped flush that fails is settled again
// delivery by delivery, so that the failure is only the failing row's.
//
// # Rows held by other sessions, deadlines, restarts
//
// On a dialect with RowLocking (PostgreSQL, MySQL, MariaDB), a service's own SELECT … FOR
// UPDATE on a claimed row stalls nothing: lease extensions lock the free rows with SKIP LOCKED
// and wait for a held row alone, taking its new lease end from the clock once the lock is
// granted (so an end is never written in the past); settling transactions give up a row-lock
// wait after LockTimeout (default 5 s, at most a quarter of the lease). A grouped lease
// settlement that gave up such a wait waits no second time: it locks the rows that are free
// with SKIP LOCKED, settles those together, and fails the held ones at once with ErrRowHeld
// (they are held back and retried as above). Every statement the
// engine runs on its own behalf has a deadline (StatementTimeout, default 30 s), so nothing
// blocks a subscription's close forever. When a subscription stops, the rows it claimed but
// did not hand out are given back at once, so what has finished settles without waiting for
// the shutdown timeout. On a dialect with ConnLoss, a claim that meets a lost or refused
// connection waits for the server itself (at most ReconnectMax between tries) instead of
// failing into core's backoff, and stale advisory connections are replaced at once: a
// subscription claims again within a fraction of a second of a restarted server accepting
// connections.
//
// Settlement is grouped by default, because a commit per message caps a queue at a few
// thousand messages a second while a commit per batch reaches tens of thousands: in the lease
// form finished deliveries are settled together (one token-fenced statement per token for ack
// and drop, the others in the same transaction), in the transaction of the next claim or on
// their own when a claim's worth has finished, when nothing else is outstanding, or after a
// short linger (FlushLimits), always well inside the lease; in the row-lock form a claim of
// BatchSize rows settles in its one transaction. The
// cost is latency: a settlement becomes durable up to the linger later, and in the row-lock
// form only when the claim's last row finishes. PerMessage commits each settlement on its own.
//
// # Why a row failed
//
// A table with a last_error column (Columns.LastError; StandardTable leaves it out) records,
// on every failed attempt — retry, retry after a delay, dead letter — why it failed:
// core.Reason of the outcome, the handler's cause or error text, at most core.MaxReasonBytes.
// A row waiting for its next attempt says why its last one failed; acks and drops leave the
// column as it was. A dead letter (a row moved to the dead-letter group, or copied to the
// dead-letter table) also gets core's dead-letter headers merged into its headers column, where
// the table has one: core.HeaderRetryCount (its final attempt), core.HeaderOrigin (the queue it
// came from), core.HeaderDeadAt and core.HeaderError (the reason); core.ParseDeadLetterInfo
// reads them back. Custom events receive the reason in EventInput.Reason.
//
// # Where the code is
//
// This package is what services use. The engine behind it is split by claim form, so that one
// delivery's path is read in one folder: internal/lease, internal/rowlock and internal/advisory
// each own their form's state, statements and goroutines (each package's doc lists its files in
// a delivery's order), over internal/engine, the part every form shares and that names no form
// (the settlement statements, holds, deadlines, wake-ups, custom events). The dialect SPI is
// package driver; sqlitecore is the SQLite dialect both SQLite modules share.
//
// All time comes from the App's clock (core/clock): the engine computes every timestamp it
// writes, so tests run on virtual time. Dialect authors start from package driver (core/sqlqueue/driver),
// the service-provider interface; every dialect proves itself with the conformance suite in
// sqlqueuetest.
package sqlqueue
