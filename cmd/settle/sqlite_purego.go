//go:build !cgo

package main

import (
	"context"

	sqlite "github.com/settlehq/settle/dialect-sqlite-purego"
)

// A build without cgo reads SQLite files through dialect-sqlite-purego (modernc.org/sqlite,
// pure Go); one with cgo through dialect-sqlite (sqlite_cgo.go).

// sqliteDialect names the SQLite dialect of the build.
const sqliteDialect = "dialect-sqlite-purego (no cgo)"

// openSQLite opens the SQLite database file at path.
func openSQLite(ctx context.Context, path string) (sqlDB, error) {
	return sqlDBOf(sqlite.Open(ctx, path))
}
