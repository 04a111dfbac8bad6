package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseTableRef(t *testing.T) {
	t.Parallel()
	ok := []struct {
		in   string
		want TableRef
	}{
		{"jobs", TableRef{Name: "jobs"}},
		{"s.jobs", TableRef{Schema: "s", Name: "jobs"}},
		{"_s$1.j_2", TableRef{Schema: "_s$1", Name: "j_2"}},
	}
	for _, c := range ok {
		if got, err := ParseTableRef(c.in); err != nil || got != c.want {
			t.Errorf("ParseTableRef(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	// ".jobs" was read as the unqualified "jobs"; an empty schema part is as wrong as an
	// empty name part.
	for _, in := range []string{"", ".", ".jobs", "jobs.", "a.b.c", "a..b", " jobs", "1jobs", "s.1jobs", "jobs;", `"jobs"`} {
		if got, err := ParseTableRef(in); err == nil {
			t.Errorf("ParseTableRef(%q) = %+v, want an error", in, got)
		}
	}
}

// timeDialect is a dialect whose Time stores what store returns and whose catalogue reports
// cols.
type timeDialect struct {
	pgLike
	store func(time.Time) any
	cols  []ColumnInfo
}

func (d timeDialect) Time(t time.Time) any { return d.store(t) }
func (d timeDialect) Columns(context.Context, Queryer, TableRef) ([]ColumnInfo, error) {
	return d.cols, nil
}

// TestTimeColumnKinds: a time column must be a time type, or of the kind the dialect stores
// times as (text on SQLite); a boolean or integer locked_until is refused at start, naming
// table and column, instead of failing every claim afterwards.
func TestTimeColumnKinds(t *testing.T) {
	t.Parallel()
	tb := Table{Name: "jobs", Columns: Columns{LockedUntil: "locked_until"}}
	asTime := func(t time.Time) any { return t }
	asText := func(t time.Time) any { return t.Format(time.RFC3339Nano) }
	for _, c := range []struct {
		name  string
		store func(time.Time) any
		kind  ColumnKind
		ok    bool
	}{
		{"time on a time dialect", asTime, KindTime, true},
		{"unclassified", asTime, KindUnknown, true},
		{"boolean", asTime, KindBool, false},
		{"integer on a time dialect", asTime, KindInteger, false},
		{"text on a time dialect", asTime, KindText, false},
		{"float", asTime, KindFloat, false},
		{"other", asTime, KindOther, false},
		{"text on a text dialect", asText, KindText, true},
		{"time on a text dialect", asText, KindTime, true},
		{"integer on a text dialect", asText, KindInteger, false},
	} {
		d := timeDialect{store: c.store, cols: []ColumnInfo{
			{Name: "id", Type: "bigint", Kind: KindInteger}, {Name: "payload", Type: "bytea", Kind: KindBytes},
			{Name: "locked_until", Type: "sometype", Kind: c.kind},
		}}
		err := CheckColumns(context.Background(), d, nil, tb, tb.Ref())
		if c.ok != (err == nil) {
			t.Errorf("%s: err = %v; want ok = %v", c.name, err, c.ok)
			continue
		}
		var ce *ColumnError
		if err != nil && (!errors.As(err, &ce) || ce.Table != "jobs" || ce.Column != "locked_until" || !strings.Contains(err.Error(), "sometype")) {
			t.Errorf("%s: error %v does not name table, column and type", c.name, err)
		}
	}
}
