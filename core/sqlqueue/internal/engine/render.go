package engine

import (
	"context"
	"reflect"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// This file lists a subscription's rendered statements by name, for the golden files every
// dialect keeps of them (sqlqueuetest.Golden), without a server: the catalogue's answers are
// given (Hints) instead of asked.

// Named is one rendered statement: its name in the golden files, its SQL, and the values its
// placeholders take where a Binder bound them (nil otherwise: the statement's own doc says).
type Named struct {
	Name string
	SQL  string
	Args []string
}

// Hints are the answers Open asks the catalogue for beyond the table's columns, given instead:
// the index the claims read (Schema.ClaimHint, for a ClaimIndex dialect), whether the table has
// the group-ordered index (Schema.GroupOrder, for a GroupOrder dialect), and the table's
// canonical name (keys, for a TableIdentity dialect).
type Hints struct {
	ClaimHint  string
	GroupOrder bool
	Keys       string
}

// InList is the length golden files render statements that name a list of rows at.
const InList = 3

// Add appends the statement named name, with the values b bound (nil b: none listed), unless sql
// is "".
func Add(list []Named, name, sql string, b *driver.Binder) []Named {
	if sql == "" {
		return list
	}
	n := Named{Name: name, SQL: sql}
	if b != nil {
		for _, a := range b.Args() {
			n.Args = append(n.Args, a.String())
		}
	}
	return append(list, n)
}

// Named lists the settlements every form shares, each name prefixed with prefix.
func (st *Settlements) Named(prefix string) []Named {
	var list []Named
	for _, s := range []struct{ name, sql string }{
		{"done", st.Done}, {"retry", st.Retry}, {"retryAfter", st.RetryAfter}, {"dlGroup", st.DLGroup},
		{"dlNote", st.DLNote}, {"dlCopy", st.DLCopy}, {"dlDelete", st.DLDelete}, {"dlMove", st.DLMove}, {"hold", st.Hold},
	} {
		list = Add(list, prefix+s.name, s.sql, nil)
	}
	return list
}

// The values a golden claim is run with: each is told apart from the others by its value.
var (
	goldenNow   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	goldenToken = goldenNow.Add(DefaultLease)
)

const goldenLimit = 7

// ClaimStatements lists the statements claim c runs, named name, name.2, …: it runs c against a
// recorder that answers every query with three rows (ids 1 to 3), and names each argument by its
// value (now, token, limit, group, id).
func (rt *Runtime) ClaimStatements(name string, c driver.Claim) ([]Named, error) {
	if c == nil {
		return nil, nil
	}
	rec := &recorder{}
	p := driver.ClaimParams{Now: goldenNow, Token: goldenToken, Limit: goldenLimit, Group: rt.Q.Group}
	if _, err := c.Claim(context.Background(), rec, p, nil); err != nil {
		return nil, err
	}
	var list []Named
	for i, r := range rec.runs {
		n := Named{Name: name, SQL: r.sql}
		if i > 0 {
			n.Name += "." + string(rune('1'+i))
		}
		for _, a := range r.args {
			n.Args = append(n.Args, rt.argName(a, p))
		}
		list = append(list, n)
	}
	return list, nil
}

// argName names a value a claim bound: the params' values, or a row's id.
func (rt *Runtime) argName(a any, p driver.ClaimParams) string {
	switch {
	case reflect.DeepEqual(a, rt.D.Time(p.Now)):
		return "now"
	case reflect.DeepEqual(a, rt.D.Time(p.Token)):
		return "token"
	case reflect.DeepEqual(a, int64(p.Limit)) || reflect.DeepEqual(a, p.Limit):
		return "limit"
	case a == any(p.Group):
		return "group"
	}
	return "id"
}

// recorder is a Queryer that keeps the statements run on it, and answers every query with the
// rows of ids 1 to 3 in the columns of a claim.
type recorder struct {
	runs []struct {
		sql  string
		args []any
	}
}

func (r *recorder) keep(sql string, args []any) {
	r.runs = append(r.runs, struct {
		sql  string
		args []any
	}{sql, append([]any(nil), args...)}) // a claim may reuse its arguments' slice
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (driver.Result, error) {
	r.keep(sql, args)
	return driver.Result{RowsAffected: 3}, nil
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (driver.Rows, error) {
	r.keep(sql, args)
	return &recordedRows{}, nil
}

// recordedRows are ids 1 to 3, each with an empty payload, attempt 1, no headers, no created_at.
type recordedRows struct{ at int64 }

func (r *recordedRows) Next() bool { r.at++; return r.at <= 3 }
func (r *recordedRows) Err() error { return nil }
func (r *recordedRows) Close() error {
	r.at = 3
	return nil
}

func (r *recordedRows) Scan(dest ...any) error {
	if len(dest) > 0 {
		if p, ok := dest[0].(*int64); ok {
			*p = r.at
		}
	}
	if len(dest) > 2 {
		if p, ok := dest[2].(*int64); ok {
			*p = 1
		}
	}
	return nil
}
