package driver

import (
	"context"
	"strconv"
	"time"
)

// pgLike is a dialect with numbered placeholders, so the tests see that every statement
// numbers its arguments in the order they are bound.
type pgLike struct{}

func (pgLike) Name() string             { return "pglike" }
func (pgLike) Quote(s string) string    { return `"` + s + `"` }
func (pgLike) Placeholder(n int) string { return "$" + strconv.Itoa(n) }
func (pgLike) Time(t time.Time) any     { return t }
func (pgLike) Returning() bool          { return true }
func (pgLike) Columns(context.Context, Queryer, TableRef) ([]ColumnInfo, error) {
	return nil, nil
}
