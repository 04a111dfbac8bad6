// Package advisory is the advisory-lock claim form of settle's SQL queue engine: a row is taken
// by locking its key on a connection dedicated to one worker, its finishing statement commits on
// that connection, and the key is unlocked after it. The path of one delivery:
//
//	source.go      Next hands out the rows taken; Finish settles on the row's connection
//	taker.go       the candidates, their keys locked, their attempts counted
//	conns.go       the dedicated connections and which of them hold a key
//	rescue.go      the rescue of rows whose taker went away without settling them
//	statements.go  the form's statements, over the ones every form shares (internal/engine)
package advisory
