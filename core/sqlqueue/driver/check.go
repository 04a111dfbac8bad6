package driver

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ColumnError is the start-up error for a table that lacks a column it was described with,
// or has it with a type of the wrong kind.
type ColumnError struct {
	// Table is the table checked.
	Table string
	// Column is the column's name; Role is which column of the description it is (attempt,
	// locked_until, …).
	Column, Role string
	// Reason says what is wrong.
	Reason string
}

func (e *ColumnError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("sqlqueue: table %s: %s", e.Table, e.Reason)
	}
	return fmt.Sprintf("sqlqueue: table %s, column %s (%s): %s", e.Table, e.Column, e.Role, e.Reason)
}

// CheckColumns asks d's catalogue (Dialect.Columns) for the table ref and checks that it has
// every column t describes, each of a kind that holds what the engine writes into it (see
// Columns); a *ColumnError says what is missing or wrong. ref is t's own table, or one that must
// have t's columns (a dead-letter table).
func CheckColumns(ctx context.Context, d Dialect, q Queryer, t Table, ref TableRef) error {
	cols, err := d.Columns(ctx, q, ref)
	if err != nil {
		return fmt.Errorf("sqlqueue: reading the columns of table %s: %w", ref, err)
	}
	if len(cols) == 0 {
		return &ColumnError{Table: ref.String(), Reason: "no such table"}
	}
	have := make(map[string]ColumnInfo, len(cols))
	for _, c := range cols {
		have[strings.ToLower(c.Name)] = c
	}
	for _, c := range t.withDefaults().ColumnList() {
		if c.Name == "" {
			continue
		}
		info, ok := have[strings.ToLower(c.Name)]
		if !ok {
			return &ColumnError{Table: ref.String(), Column: c.Name, Role: c.Role, Reason: "no such column"}
		}
		if err := checkKind(d, ref, c, info); err != nil {
			return err
		}
	}
	return nil
}

// checkKind refuses info, the catalogue's column c, when its kind cannot hold what the engine
// writes into c.
func checkKind(d Dialect, ref TableRef, c Column, info ColumnInfo) error {
	if info.Kind == KindUnknown {
		return nil
	}
	kinds := c.Kinds
	if kinds == nil {
		kinds = TimeKinds(d)
	}
	for _, k := range kinds {
		if k == info.Kind {
			return nil
		}
	}
	want := make([]string, len(kinds))
	for i, k := range kinds {
		want[i] = k.String()
	}
	return &ColumnError{Table: ref.String(), Column: c.Name, Role: c.Role,
		Reason: fmt.Sprintf("type %s is %s; want %s", info.Type, info.Kind, strings.Join(want, " or "))}
}

// TimeKinds are the kinds a time column (retry_after, locked_until, processed_at, created_at)
// may have on dialect d: a time type, or the kind of what d.Time stores, since the engine
// compares the stored values as d.Time's values order (SQLite keeps times as text).
func TimeKinds(d Dialect) []ColumnKind {
	switch d.Time(time.Unix(0, 0).UTC()).(type) {
	case string, []byte:
		return []ColumnKind{KindTime, KindText}
	case int64, int, int32, uint64:
		return []ColumnKind{KindTime, KindInteger}
	}
	return []ColumnKind{KindTime}
}
