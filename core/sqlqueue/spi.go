package sqlqueue

import (
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// The dialect SPI moved to package driver (core/sqlqueue/driver). These names keep code written
// against it here compiling for one release; each is deprecated in favour of driver's, which
// CHANGELOG.md lists.

// TimeDest is the destination the engine passes to Rows.Scan for a timestamp.
//
// Deprecated: use driver.TimeDest.
type TimeDest = driver.TimeDest

// Conn is one connection reserved from the pool.
//
// Deprecated: use driver.Conn.
type Conn = driver.Conn

// ColumnKind is the broad kind of a column as the catalogue reports it.
//
// Deprecated: use driver.ColumnKind.
type ColumnKind = driver.ColumnKind

// ColumnInfo is one column of a table as the catalogue has it.
//
// Deprecated: use driver.ColumnInfo.
type ColumnInfo = driver.ColumnInfo

// ClaimParams is the values of one claim.
//
// Deprecated: use driver.ClaimParams.
type ClaimParams = driver.ClaimParams

// Claimed is one claimed row.
//
// Deprecated: use driver.Claimed.
type Claimed = driver.Claimed

// Claim is what takes ready rows.
//
// Deprecated: use driver.Claim.
type Claim = driver.Claim

// LeaseDialect is a Dialect that can claim by lease.
//
// Deprecated: use driver.LeaseDialect.
type LeaseDialect = driver.LeaseDialect

// RowLockDialect is a Dialect that can claim by row lock.
//
// Deprecated: use driver.RowLockDialect.
type RowLockDialect = driver.RowLockDialect

// AdvisoryDialect is a Dialect with advisory key locks held by a connection.
//
// Deprecated: use driver.AdvisoryDialect.
type AdvisoryDialect = driver.AdvisoryDialect

// Schema is a validated Table spelled by a dialect.
//
// Deprecated: use driver.Schema.
type Schema = driver.Schema

// ColumnTypes is one dialect's SQL types for the columns of a queue table.
//
// Deprecated: use driver.ColumnTypes.
type ColumnTypes = driver.ColumnTypes

// QueueRef is a table and, in a table with a group column, a group.
//
// Deprecated: use driver.QueueRef.
type QueueRef = driver.QueueRef

// AdvisoryFilter is an optional interface of an AdvisoryDialect.
//
// Deprecated: use driver.AdvisoryFilter.
type AdvisoryFilter = driver.AdvisoryFilter

// GroupedRowLock is an optional interface of a RowLockDialect.
//
// Deprecated: use driver.GroupedRowLock.
type GroupedRowLock = driver.GroupedRowLock

// GroupedRowLockSQL is an optional interface of a GroupedRowLock dialect.
//
// Deprecated: use driver.GroupedRowLockSQL.
type GroupedRowLockSQL = driver.GroupedRowLockSQL

// GroupedRowLockArray is an optional interface of a GroupedRowLock dialect.
//
// Deprecated: use driver.GroupedRowLockArray.
type GroupedRowLockArray = driver.GroupedRowLockArray

// RowLocking is an optional interface of a Dialect whose database locks rows one by one.
//
// Deprecated: use driver.RowLocking.
type RowLocking = driver.RowLocking

// ReturnedRowLocks is an optional interface of a RowLocking dialect.
//
// Deprecated: use driver.ReturnedRowLocks.
type ReturnedRowLocks = driver.ReturnedRowLocks

// TableIdentity is an optional interface of an AdvisoryDialect.
//
// Deprecated: use driver.TableIdentity.
type TableIdentity = driver.TableIdentity

// SQLFamily is an optional interface of a Dialect that declares its family of SQL.
//
// Deprecated: use driver.SQLFamily.
type SQLFamily = driver.SQLFamily

// DriverOwnedBytes is an optional interface of a Dialect.
//
// Deprecated: use driver.DriverOwnedBytes.
type DriverOwnedBytes = driver.DriverOwnedBytes

// SingleWriter is an optional interface of a Dialect.
//
// Deprecated: use driver.SingleWriter.
type SingleWriter = driver.SingleWriter

// DDLTypes is an optional interface of a Dialect.
//
// Deprecated: use driver.DDLTypes.
type DDLTypes = driver.DDLTypes

// Types is a dialect's column types for the tables settle creates.
//
// Deprecated: use driver.Types.
type Types = driver.Types

// IdentifierLimit is an optional interface of a Dialect.
//
// Deprecated: use driver.IdentifierLimit.
type IdentifierLimit = driver.IdentifierLimit

// ByIDHints is an optional interface of a Dialect.
//
// Deprecated: use driver.ByIDHints.
type ByIDHints = driver.ByIDHints

// ClaimIndex is an optional interface of a RowLocking dialect.
//
// Deprecated: use driver.ClaimIndex.
type ClaimIndex = driver.ClaimIndex

// GroupOrder is an optional interface of a Dialect.
//
// Deprecated: use driver.GroupOrder.
type GroupOrder = driver.GroupOrder

// ConnLoss is an optional interface of a Dialect.
//
// Deprecated: use driver.ConnLoss.
type ConnLoss = driver.ConnLoss

// Pipeliner is an optional interface of a DB.
//
// Deprecated: use driver.Pipeliner.
type Pipeliner = driver.Pipeliner

// Step is one statement of a pipeline.
//
// Deprecated: use driver.Step.
type Step = driver.Step

// TxPipeliner is an optional interface of a DB.
//
// Deprecated: use driver.TxPipeliner.
type TxPipeliner = driver.TxPipeliner

// PipelinedTx is a transaction that a TxPipeliner began.
//
// Deprecated: use driver.PipelinedTx.
type PipelinedTx = driver.PipelinedTx

// Mover is an optional interface of a Dialect.
//
// Deprecated: use driver.Mover.
type Mover = driver.Mover

// Notifier is an optional interface of a Dialect.
//
// Deprecated: use driver.Notifier.
type Notifier = driver.Notifier

// LocalKeys is the advisory key registry of an embedded database.
//
// Deprecated: use driver.LocalKeys.
type LocalKeys = driver.LocalKeys

// The kinds of ColumnKind.
//
// Deprecated: use driver.KindUnknown and the other driver.Kind constants.
const (
	KindUnknown = driver.KindUnknown
	KindInteger = driver.KindInteger
	KindText    = driver.KindText
	KindBytes   = driver.KindBytes
	KindJSON    = driver.KindJSON
	KindTime    = driver.KindTime
	KindBool    = driver.KindBool
	KindFloat   = driver.KindFloat
	KindOther   = driver.KindOther
)

// ErrRowCount is the error a Pipeliner returns when a step changed another number of rows than
// it wants.
//
// Deprecated: use driver.ErrRowCount.
var ErrRowCount = driver.ErrRowCount

// ErrKeysHeldElsewhere is wrapped by LocalKeys.Hold's error when another process holds the
// companion file's lock.
//
// Deprecated: use driver.ErrKeysHeldElsewhere.
var ErrKeysHeldElsewhere = driver.ErrKeysHeldElsewhere

// NewSchema validates t and quotes its names with d.
//
// Deprecated: use driver.NewSchema.
func NewSchema(d Dialect, t Table) (*Schema, error) { return driver.NewSchema(d, t) }

// CheckIdentifier refuses name when it is longer than d's IdentifierLimit allows.
//
// Deprecated: use driver.CheckIdentifier.
func CheckIdentifier(d Dialect, what, name string) error {
	return driver.CheckIdentifier(d, what, name)
}

// IsSingleWriter reports whether d declares one writer at a time.
//
// Deprecated: use driver.IsSingleWriter.
func IsSingleWriter(d Dialect) bool { return driver.IsSingleWriter(d) }

// LocalKeysFor returns the advisory key registry of the database file at path.
//
// Deprecated: use driver.LocalKeysFor.
func LocalKeysFor(path string) *LocalKeys { return driver.LocalKeysFor(path) }

// UpdateReturningClaim is the lease claim of a dialect with UPDATE … RETURNING.
//
// Deprecated: use driver.UpdateReturningClaim.
func UpdateReturningClaim(s *Schema, lockSuffix string) Claim {
	return driver.UpdateReturningClaim(s, lockSuffix)
}

// SelectClaim is the row-lock claim: it selects up to Limit ready rows, oldest first.
//
// Deprecated: use driver.SelectClaim.
func SelectClaim(s *Schema, lockSuffix string) Claim { return driver.SelectClaim(s, lockSuffix) }

// SelectThenUpdateClaim is the lease claim of a dialect without UPDATE … RETURNING.
//
// Deprecated: use driver.SelectThenUpdateClaim.
func SelectThenUpdateClaim(s *Schema, lockSuffix string) Claim {
	return driver.SelectThenUpdateClaim(s, lockSuffix)
}
