package sqlqueuetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// RunBadInput checks that bad descriptions and options are refused with errors naming what is
// wrong: an unknown table, a missing column, a column of the wrong kind, a cap without an
// attempt column, a missing dead-letter table, an invalid identifier, a lease ≤ 0, an option of
// another claim form (which the form would ignore).
func RunBadInput(t *testing.T, open Open) {
	f := open(t)
	fm := forms(f)[0]
	nop := func(ctx context.Context, m *core.Message[Refund]) error { return nil }
	startErr := func(t *testing.T, f *Fixture, tb sqlqueue.Table, group string, opts ...core.Option) error {
		e := newEnv(t, f)
		a := e.app(nil)
		ep, err := formOf(f, fm.f).ep(tb, group)
		if err != nil {
			return err
		}
		if err := core.Subscribe(a, ep, nop, opts...); err != nil {
			return err
		}
		return e.runErr(a)
	}
	mustMention := func(t *testing.T, err error, words ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("no error; want one mentioning %q", words)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
	}
	t.Run("unknown_table", func(t *testing.T) {
		err := startErr(t, open(t), sqlqueue.StandardTable("nowhere"), "q")
		mustMention(t, err, "nowhere", "no such table")
	})
	t.Run("missing_column", func(t *testing.T) {
		f := open(t)
		e := newEnv(t, f)
		tb := sqlqueue.StandardTable("q")
		tb.Columns.Headers = ""
		e.create(tb)
		err := startErr(t, f, sqlqueue.StandardTable("q"), "q")
		mustMention(t, err, "q", "headers", "no such column")
		var ce *sqlqueue.ColumnError
		if !errors.As(err, &ce) || ce.Column != "headers" {
			t.Errorf("error %v is not a ColumnError for headers", err)
		}
	})
	t.Run("wrong_kind", func(t *testing.T) {
		f := open(t)
		e := newEnv(t, f)
		d := f.Dialect
		if err := f.Exec(e.ctx, "CREATE TABLE "+d.Quote("q")+" ("+d.Quote("id")+" INTEGER PRIMARY KEY, "+d.Quote("payload")+" TEXT, "+
			d.Quote("attempt")+" TEXT, "+d.Quote("locked_until")+" TEXT)"); err != nil {
			t.Fatal(err)
		}
		tb := sqlqueue.Table{Name: "q", Columns: sqlqueue.Columns{Attempt: "attempt", LockedUntil: "locked_until"}}
		mustMention(t, startErr(t, f, tb, ""), "q", "attempt", "integer")
	})
	// A time column of an integer type passed the check, and every claim then failed with an
	// error that named neither table nor column.
	for _, role := range []string{"locked_until", "retry_after", "processed_at", "created_at"} {
		t.Run("time_column_kind/"+role, func(t *testing.T) {
			f := open(t)
			e := newEnv(t, f)
			e.create(sqlqueue.StandardTable("q"))
			if err := f.Exec(e.ctx, "ALTER TABLE "+f.Dialect.Quote("q")+" ADD COLUMN "+f.Dialect.Quote("bad_time")+" BIGINT"); err != nil {
				t.Fatal(err)
			}
			tb := sqlqueue.StandardTable("q")
			c := &tb.Columns
			*map[string]*string{"locked_until": &c.LockedUntil, "retry_after": &c.RetryAfter,
				"processed_at": &c.ProcessedAt, "created_at": &c.CreatedAt}[role] = "bad_time"
			err := startErr(t, f, tb, "q")
			mustMention(t, err, "table q", "bad_time", role, "time")
			var ce *sqlqueue.ColumnError
			if !errors.As(err, &ce) || ce.Column != "bad_time" || ce.Role != role {
				t.Errorf("error %v is not a ColumnError for column bad_time (%s)", err, role)
			}
		})
	}
	t.Run("cap_without_attempt", func(t *testing.T) {
		f := open(t)
		e := newEnv(t, f)
		tb := sqlqueue.StandardTable("q")
		tb.Columns.Attempt = ""
		e.create(tb)
		mustMention(t, startErr(t, f, tb, "q", core.DeadLetterAfter(3, "dead")), "q", "attempt", "DeadLetterAfter")
	})
	t.Run("missing_dead_letter_table", func(t *testing.T) {
		f := open(t)
		e := newEnv(t, f)
		tb := sqlqueue.StandardTable("q")
		tb.Columns.Group = ""
		e.create(tb)
		mustMention(t, startErr(t, f, tb, "", core.DeadLetterAfter(3, "q_dead")), "q_dead", "no such table")
	})
	t.Run("invalid_identifier", func(t *testing.T) {
		f := open(t)
		tb := sqlqueue.StandardTable(`q"; DROP TABLE q; --`)
		_, err := fm.ep(tb, "q")
		mustMention(t, err, "invalid table name")
		tb = sqlqueue.StandardTable("q")
		tb.Columns.Attempt = "at tempt"
		_, err = fm.ep(tb, "q")
		mustMention(t, err, "attempt", "at tempt")
		_ = f
	})
	t.Run("group_rules", func(t *testing.T) {
		_, err := fm.ep(sqlqueue.StandardTable("q"), "")
		mustMention(t, err, "group")
		tb := sqlqueue.StandardTable("q")
		tb.Columns.Group = ""
		_, err = fm.ep(tb, "refunds")
		mustMention(t, err, "no group column", "refunds")
	})
	if f.Advisory != nil {
		t.Run("advisory_custom_claim", func(t *testing.T) {
			f := open(t)
			e := newEnv(t, f)
			e.create(sqlqueue.StandardTable("q"))
			ep, err := f.Advisory(sqlqueue.StandardTable("q"), "q")
			if err != nil {
				t.Fatal(err)
			}
			a := e.app(nil)
			ev := func(context.Context, sqlqueue.EventInput) ([]sqlqueue.Statement, error) { return nil, nil }
			if err := core.Subscribe(a, ep, nop, sqlqueue.OnEvent(sqlqueue.EventClaim, ev)); err != nil {
				t.Fatal(err)
			}
			mustMention(t, e.runErr(a), "advisory", "custom claim")
		})
	}
	t.Run("option_of_another_form", func(t *testing.T) { optionOfAnotherForm(t, open) })
	if f.Lease != nil {
		t.Run("lease_not_positive", func(t *testing.T) {
			e := newEnv(t, open(t))
			ep, err := e.f.Lease(sqlqueue.StandardTable("q"), "q")
			if err != nil {
				t.Fatal(err)
			}
			err = core.Subscribe(e.app(nil), ep, nop, sqlqueue.LeaseFor(0))
			mustMention(t, err, "LeaseFor", "positive")
		})
	}
}

// optionOfAnotherForm: a mount option that configures another claim form than the endpoint's
// (the lease's length on a row-lock queue, the advisory key on a lease queue, …) is refused when
// the subscription starts, with an error naming the option and the form, instead of being
// accepted and ignored.
func optionOfAnotherForm(t *testing.T, open Open) {
	nop := func(ctx context.Context, m *core.Message[Refund]) error { return nil }
	others := map[sqlqueue.Form][]struct {
		name string
		opt  core.Option
	}{
		sqlqueue.FormLease:    {{"sqlqueue.CountAtClaim", sqlqueue.CountAtClaim(true)}, {"sqlqueue.AdvisoryKey", sqlqueue.AdvisoryKey("id")}},
		sqlqueue.FormRowLock:  {{"sqlqueue.LeaseFor", sqlqueue.LeaseFor(time.Minute)}, {"sqlqueue.AdvisoryKey", sqlqueue.AdvisoryKey("id")}},
		sqlqueue.FormAdvisory: {{"sqlqueue.LeaseFor", sqlqueue.LeaseFor(time.Minute)}, {"sqlqueue.PerMessage()", sqlqueue.PerMessage()}, {"sqlqueue.FlushLimits", sqlqueue.FlushLimits(10, 0)}, {"sqlqueue.CountAtClaim", sqlqueue.CountAtClaim(true)}},
	}
	for _, fm := range forms(open(t)) {
		for _, o := range others[fm.f] {
			t.Run(strings.ReplaceAll(fm.f.String(), " ", "")+"/"+strings.TrimSuffix(strings.TrimPrefix(o.name, "sqlqueue."), "()"), func(t *testing.T) {
				f := open(t)
				e := newEnv(t, f)
				tb := sqlqueue.StandardTable("q")
				e.create(tb)
				ep, err := fm.ep(tb, "q")
				if err != nil {
					t.Fatal(err)
				}
				a := e.app(nil)
				if err := core.Subscribe(a, ep, nop, o.opt); err != nil {
					t.Fatal(err)
				}
				err = e.runErr(a)
				if err == nil {
					t.Fatalf("%s on the %v form started; want it refused", o.name, fm.f)
				}
				for _, w := range []string{o.name, fm.f.String() + " form"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			})
		}
	}
}
