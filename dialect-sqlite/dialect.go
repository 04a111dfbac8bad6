package sqlite

import (
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/sqlitecore"
)

// dialect spells SQL for SQLite: the dialect both SQLite modules share (sqlitecore), as this
// module's driver hands values over. It supports the lease and advisory forms.
type dialect struct{ *sqlitecore.Dialect }

// newDialect returns the dialect whose advisory keys live in keys (nil: one that only renders).
func newDialect(keys *driver.LocalKeys) *dialect {
	return &dialect{sqlitecore.NewDialect("sqlite", "sqlite", keys)}
}

var _ driver.DriverOwnedBytes = (*dialect)(nil)

// DriverOwnedBytes is true: mattn/go-sqlite3 copies every BLOB it reads into a slice of its own
// (C.GoBytes), which the engine may keep without copying it again.
func (*dialect) DriverOwnedBytes() bool { return true }

// TimeFormat is how times are stored: UTC, microseconds, fixed width, so text order is time
// order.
const TimeFormat = sqlitecore.TimeFormat

// ParseTime reads a time stored by the dialect.
func ParseTime(s string) (time.Time, error) { return sqlitecore.ParseTime(s) }
