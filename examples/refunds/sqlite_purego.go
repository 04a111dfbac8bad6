//go:build !cgo

package main

import sqlite "github.com/settlehq/settle/dialect-sqlite-purego"

// The SQLite dialect of a build without cgo (CGO_ENABLED=0, or no C compiler, which makes the go
// command turn cgo off): dialect-sqlite-purego, on modernc.org/sqlite (pure Go). A build with
// cgo takes dialect-sqlite instead (sqlite_cgo.go); both have the same API and read and write
// the same file.

// SQLiteDialect names the dialect the build uses.
const SQLiteDialect = "dialect-sqlite-purego (no cgo)"

var (
	openSQLite         = sqlite.Open
	sqliteLease        = sqlite.Lease
	sqliteNewPublisher = sqlite.NewPublisher
)
