// Package mysql is settle's SQL dialect for MySQL 8.0.1+ and MariaDB 10.6+, on
// github.com/go-sql-driver/mysql. It lives in the folder dialect-mysql; the package name is the
// last word, mysql.
//
// Open connects, reads the server's flavour and version from SELECT VERSION() and refuses an
// older server with its version in the error. The DB it returns is the pool every endpoint and
// publisher of the service shares; register it with the App so that it closes last:
//
//	db, err := mysql.Open(ctx, "svc:pw@tcp(127.0.0.1:3306)/shop?parseTime=true")
//	app.Register(db)
//	ep, err := mysql.Lease(db, sqlqueue.StandardTable("refunds"), "refunds")
//	err = core.Subscribe(app, ep, handle, core.DeadLetterAfter(5, "refunds.dead"))
//
// # Claim forms
//
// All three forms are offered:
//
//	RowLock   SELECT … FOR UPDATE SKIP LOCKED in a READ COMMITTED transaction that stays
//	          open; retries, holds and custom events run in it as their deliveries finish,
//	          the claim's acks and drops run as one statement at the end, and its commit
//	          settles the whole claim
//	Lease     SELECT … FOR UPDATE SKIP LOCKED, then UPDATE locked_until = token,
//	          attempt = attempt + 1, commit; settlements are fenced by the token (DATETIME(6))
//	Advisory  GET_LOCK(name, 0) on a dedicated connection per worker; the statement commits
//	          there, then RELEASE_LOCK; candidates whose lock is taken are filtered out with
//	          IS_USED_LOCK
//
// A crashed process's rows (lease: locked_until past; advisory: the locked_until mark set when a
// row is taken, with its lock free; row lock: the mark a counted claim sets, with the row no
// longer locked) are taken again one at a time and run alone
// (core.Suspect), so a poison row cannot drag its neighbours to the cap.
//
// Neither flavour has UPDATE … RETURNING, so the lease claim selects and then stamps in one
// transaction. MariaDB has INSERT … RETURNING (Publish reads the new id from it) and
// DELETE … RETURNING; MySQL has neither and Publish reads LAST_INSERT_ID(). Without a group
// column the dead letter is a table, filled by INSERT … SELECT and then DELETE in one
// transaction.
//
// Advisory lock names are server-wide, so each name carries the database and the table:
// "settle:<database>:<table>:<key>". MySQL refuses names longer than 64 characters; longer
// names become "settle#" and 57 hex digits of their SHA-256, computed identically in Go and
// SQL. A release the server does not confirm (ErrUnlockUnconfirmed) closes the connection,
// which releases whatever it held.
//
// # Sessions and statements
//
// Open sets up every connection once, when it connects: claim transactions run at READ
// COMMITTED (Isolation changes it; REPEATABLE READ would make a claim's gap locks block
// publishers), affected-row counts report matched rows (clientFoundRows, which fenced
// statements rely on), and arguments are interpolated on the client, one round trip per
// statement. New wraps a pool the caller opened; it asks for the isolation level per
// transaction and needs clientFoundRows=true in the pool's DSN.
//
// InnoDB's statistics of a queue table are nearly always stale, and with a small row estimate
// the optimizer answers "DELETE … WHERE id IN (…)" with a scan that locks every row it reads.
// The dialect therefore sends the engine's grouped settlements with FORCE INDEX (PRIMARY), and
// checks at start-up that id is the table's primary key and that locked_until and retry_after
// keep microseconds (DATETIME(6) or TIMESTAMP(6)); TableDDL writes such a table.
//
// The row-lock form settles a claim's acks and drops with one statement just before the claim
// commits (driver.GroupedRowLockSQL), and not as "… WHERE id IN (…)": InnoDB reads such a list
// as ranges of the primary key and locks the row just past each range before it finds that row
// outside, and with concurrent claimants that row is often one another claim holds, so their
// settlements waited on each other and deadlocked. The dialect's statement joins a derived table
// of the ids, in ascending order, to the queue table (STRAIGHT_JOIN, FORCE INDEX (PRIMARY)):
// each row is a unique primary-key lookup (eq_ref, whatever the statistics say), which locks
// nothing the claim does not already hold, so the statement never waits. On a server with
// JSON_TABLE (MariaDB 10.6+, MySQL 8.0.4+) the ids travel as one argument, the text of a JSON
// array (driver.GroupedRowLockArray; about a tenth faster than one argument per id for a claim
// of 500 rows on MariaDB 10.11); older MySQL servers get a UNION ALL of one-row SELECTs. Should it fail all the
// same, the claim's transaction rolls back as a whole: nothing of it is settled and its rows come
// back to a later claim.
//
// Every claim of a table reads it through one index, pinned with FORCE INDEX: the index whose
// first columns are the group and processed_at columns (TableDDL's table_ready), or the primary
// key when the table has neither or no such index (a warning then names the index to create).
// InnoDB locks the index entry of each row a locking read reaches through a secondary index, and
// a SELECT … FOR UPDATE SKIP LOCKED that then skips the row keeps that lock; a claim holding the
// row by its primary key alone would wait for it when it settles the row. On one index, a claim
// that meets an entry another claim holds skips it without locking anything. A claim
// that InnoDB picks as a deadlock victim (1213) or that waits too long for a lock (1205) is run
// again in a fresh transaction inside the dialect (IsTransient), after the settlement statements
// that preceded it in the same transaction are replayed and found to match the same rows; when
// they do not, the error goes to the engine, which settles on its own and claims again after a
// backoff. Either way no handler sees it and no row is lost. A statement whose connection the
// server dropped reports ErrConnLost; the server has rolled its transaction back, so the rows
// come back to a later claim.
//
// # Tests
//
// The tests run the whole sqlqueuetest suite, a load test, a crash test and bad-input tests on
// the MariaDB at SETTLE_TEST_MARIADB_URL (default root@tcp(127.0.0.1:3306)/test), in a fresh
// database per test. When SETTLE_TEST_MYSQL_URL names a MySQL 8 server the server tests run
// there too; the MySQL flavour's statement set also runs against MariaDB, where it is valid.
package mysql
