package driver

// AdvisoryFilter is an optional interface of an AdvisoryDialect whose database can tell, inside
// a query, whether an advisory key is held by any session (PostgreSQL's pg_locks, MySQL's
// IS_USED_LOCK). The engine then adds it to the advisory form's candidates query, so rows whose
// key another claimant holds are skipped without a TryLock round trip and never fill the
// candidate window while free rows wait behind them.
type AdvisoryFilter interface {
	// KeyFree returns a SQL predicate that holds when the key TryLock would be given for a row
	// is held by no session. That key is prefix (the table's name, canonical where the dialect
	// is a TableIdentity, and a colon: text to spell as a string literal, escaped as the
	// dialect escapes literals, since a schema from the catalogue may hold any character)
	// followed by the text of keyText (the KeyText expression over the row).
	KeyFree(prefix, keyText string) string
}
