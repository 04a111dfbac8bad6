// Package golden renders every statement a subscription of each claim form would run, without a
// database, in the text of the golden files the dialects keep (sqlqueuetest.Golden): a change to
// the SQL settle runs is a reviewable diff of those files.
package golden

import (
	"fmt"
	"strings"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/advisory"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/lease"
	"github.com/settlehq/settle/core/sqlqueue/internal/rowlock"
)

// Statements renders the statements of a subscription of form f to queue group of table t on
// dialect d, mounted with opts (core.DeadLetterAfter, the sqlqueue options), with hints in the
// catalogue's place. Publisher statements are not among them (see Publish).
func Statements(d driver.Dialect, f driver.Form, t driver.Table, group string, hints engine.Hints, opts ...core.Option) ([]engine.Named, error) {
	o := &core.Options{Workers: 1}
	if err := o.Apply(opts...); err != nil {
		return nil, err
	}
	q, err := engine.NewQueue(f.String()+" queue", d, stubDB{}, t, group)
	if err != nil {
		return nil, err
	}
	cfg := engine.ConfigOf(o)
	cfg.SizeClaims(o.Workers, f != driver.FormAdvisory)
	sub := core.Subscription{Name: q.Name, Options: o}
	switch f {
	case driver.FormLease:
		ld, ok := d.(driver.LeaseDialect)
		if !ok {
			return nil, fmt.Errorf("golden: %s has no lease form", d.Name())
		}
		return lease.Statements(q, ld, sub, cfg, hints)
	case driver.FormRowLock:
		rd, ok := d.(driver.RowLockDialect)
		if !ok {
			return nil, fmt.Errorf("golden: %s has no row-lock form", d.Name())
		}
		return rowlock.Statements(q, rd, sub, cfg, hints)
	default:
		ad, ok := d.(driver.AdvisoryDialect)
		if !ok {
			return nil, fmt.Errorf("golden: %s has no advisory form", d.Name())
		}
		return advisory.Statements(q, ad, sub, cfg, hints)
	}
}

// Text is the golden file of list: each statement under a comment naming it (and the values of
// its placeholders, where a binder bound them), ended with a semicolon.
func Text(list []engine.Named) string {
	var b strings.Builder
	for _, n := range list {
		fmt.Fprintf(&b, "-- %s\n", n.Name)
		if len(n.Args) > 0 {
			fmt.Fprintf(&b, "-- args: %s\n", strings.Join(n.Args, ", "))
		}
		fmt.Fprintf(&b, "%s;\n\n", n.SQL)
	}
	return b.String()
}

// Map is list by name.
func Map(list []engine.Named) map[string]string {
	m := make(map[string]string, len(list))
	for _, n := range list {
		m[n.Name] = n.SQL
	}
	return m
}

// stubDB stands for a database nothing is asked of.
type stubDB struct{ driver.DB }

// Publish renders the INSERTs a publisher of queue group of table t on dialect d runs.
func Publish(d driver.Dialect, t driver.Table, group string) ([]engine.Named, error) {
	q, err := engine.NewQueue("publisher", d, stubDB{}, t, group)
	if err != nil {
		return nil, err
	}
	var list []engine.Named
	for i, sql := range engine.Inserts(q) {
		list = engine.Add(list, fmt.Sprintf("publish delay=%v headers=%v", i&1 != 0, i&2 != 0), sql, nil)
	}
	return list, nil
}
