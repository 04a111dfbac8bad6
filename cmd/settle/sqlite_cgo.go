//go:build cgo

package main

import (
	"context"

	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// A build with cgo reads SQLite files through dialect-sqlite (mattn/go-sqlite3, C); one without
// (CGO_ENABLED=0, or no C compiler, which makes the go command turn cgo off) through
// dialect-sqlite-purego (sqlite_purego.go). Both read and write the same files, so
// `go install` works on a machine without a C compiler, and for static builds.

// sqliteDialect names the SQLite dialect of the build.
const sqliteDialect = "dialect-sqlite (cgo)"

// openSQLite opens the SQLite database file at path.
func openSQLite(ctx context.Context, path string) (sqlDB, error) {
	return sqlDBOf(sqlite.Open(ctx, path))
}
