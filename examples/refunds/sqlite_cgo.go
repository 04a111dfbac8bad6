//go:build cgo

package main

import sqlite "github.com/settlehq/settle/dialect-sqlite"

// The SQLite dialect of a build with cgo: dialect-sqlite, on mattn/go-sqlite3 (C). A build
// without cgo takes dialect-sqlite-purego instead (sqlite_purego.go); both have the same API
// and read and write the same file.

// SQLiteDialect names the dialect the build uses.
const SQLiteDialect = "dialect-sqlite (cgo)"

var (
	openSQLite         = sqlite.Open
	sqliteLease        = sqlite.Lease
	sqliteNewPublisher = sqlite.NewPublisher
)
