package sqlqueue

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/golden"
)

// pgLike is a dialect with numbered placeholders, so the tests see that every statement
// numbers its arguments in the order the engine binds them.
type pgLike struct{}

func (pgLike) Name() string               { return "pglike" }
func (pgLike) Quote(s string) string      { return `"` + s + `"` }
func (pgLike) Placeholder(n int) string   { return "$" + strconv.Itoa(n) }
func (pgLike) Time(t time.Time) any       { return t }
func (pgLike) Returning() bool            { return true }
func (pgLike) KeyText(expr string) string { return expr + "::text" }
func (pgLike) LeaseClaim(s *Schema) (Claim, error) {
	return UpdateReturningClaim(s, " FOR UPDATE SKIP LOCKED"), nil
}
func (pgLike) RowLockClaim(s *Schema) (Claim, error) {
	return SelectClaim(s, " FOR UPDATE SKIP LOCKED"), nil
}
func (pgLike) Columns(context.Context, Queryer, TableRef) ([]ColumnInfo, error) {
	return nil, nil
}
func (pgLike) TryLock(context.Context, Conn, string) (bool, error) { return true, nil }
func (pgLike) Unlock(context.Context, Conn, string) error          { return nil }

// rendered renders the statements of a subscription of form f to table tb (its group "g" when
// it has a group column) whose dead letter is dest, by name.
func rendered(t *testing.T, f Form, tb Table, dest string, opts ...core.Option) map[string]string {
	t.Helper()
	group := ""
	if tb.Columns.Group != "" {
		group = "g"
	}
	var err error
	switch f {
	case FormLease:
		_, err = NewLease(pgLike{}, nil, tb, group)
	case FormRowLock:
		_, err = NewRowLock(pgLike{}, nil, tb, group)
	default:
		_, err = NewAdvisory(pgLike{}, nil, tb, group)
	}
	if err == nil {
		t.Fatal("a nil database must be refused")
	}
	if dest != "" {
		opts = append(opts, core.DeadLetterAfter(3, dest))
	}
	list, err := golden.Statements(pgLike{}, f, tb, group, engine.Hints{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return golden.Map(list)
}

// args lists the values the placeholders of the statement named name take, by name.
func args(t *testing.T, f Form, tb Table, name string) []string {
	t.Helper()
	list, err := golden.Statements(pgLike{}, f, tb, "g", engine.Hints{}, core.DeadLetterAfter(3, "dead"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list {
		if n.Name == name {
			return n.Args
		}
	}
	t.Fatalf("%v renders no %s", f, name)
	return nil
}

type stubDB struct{ DB }

func TestLeaseStatements(t *testing.T) {
	st := rendered(t, FormLease, StandardTable("jobs"), "g.dead")
	for name, c := range map[string][2]string{
		"done":       {st["done"], `UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3`},
		"doneMany":   {st["doneMany"], `UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "locked_until" = $2 AND "id" IN ($3, $4, $5)`},
		"release":    {st["release"], `UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2`},
		"retryAfter": {st["retryAfter"], `UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3`},
		"retry":      {st["retry"], `UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2`},
		"dlGroup":    {st["dlGroup"], `UPDATE "jobs" SET "grp" = $1, "retry_after" = NULL, "locked_until" = NULL, "headers" = $2 WHERE "id" = $3 AND "locked_until" = $4`},
		"extend":     {st["extend"], `UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3`},
		"claim":      {st["claim"], `UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" = $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "locked_until" IS NULL ORDER BY "id" LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", "headers", "created_at"`},
		"rescue":     {st["rescue"], `UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" = $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "locked_until" IS NOT NULL AND "locked_until" <= $4 ORDER BY "id" LIMIT $5 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", "headers", "created_at"`},
		"unclaim":    {st["unclaim"], `UPDATE "jobs" SET "locked_until" = NULL, "attempt" = "attempt" - 1 WHERE "id" = $1 AND "locked_until" = $2`},
		"hold":       {st["hold"], `UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3`},
	} {
		if c[0] != c[1] {
			t.Errorf("%s:\n got %s\nwant %s", name, c[0], c[1])
		}
	}
}

func TestRowLockStatements(t *testing.T) {
	tb := StandardTable("jobs")
	tb.Columns.Group, tb.Columns.ProcessedAt, tb.Columns.LockedUntil = "", "", ""
	st := rendered(t, FormRowLock, tb, "jobs_dead", CountAtClaim(false))
	for name, c := range map[string][2]string{
		"done":       {st["done"], `DELETE FROM "jobs" WHERE "id" = $1`},
		"retry":      {st["retry"], `UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1`},
		"retryAfter": {st["retryAfter"], `UPDATE "jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1 WHERE "id" = $2`},
		"dlCopy":     {st["dlCopy"], `INSERT INTO "jobs_dead" ("id", "payload", "attempt", "retry_after", "headers", "created_at") SELECT "id", "payload", "attempt" + 1, NULL, "headers", "created_at" FROM "jobs" WHERE "id" = $1`},
		"dlDelete":   {st["dlDelete"], `DELETE FROM "jobs" WHERE "id" = $1`},
		"claim":      {st["claim"], `SELECT "id", "payload", "attempt" + 1, "headers", "created_at" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED`},
	} {
		if c[0] != c[1] {
			t.Errorf("%s:\n got %s\nwant %s", name, c[0], c[1])
		}
	}
}

func TestAdvisoryStatements(t *testing.T) {
	st := rendered(t, FormAdvisory, StandardTable("jobs"), "g.dead")
	for name, c := range map[string][2]string{
		"candidates": {st["candidates"], `SELECT "id", "id"::text, CASE WHEN "locked_until" IS NULL THEN 0 ELSE 1 END FROM "jobs" WHERE "grp" = $1 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $2) ORDER BY "id" LIMIT $3`},
		"takeStamp":  {st["takeStamp"], `UPDATE "jobs" SET "attempt" = "attempt" + 1, "locked_until" = $1 WHERE "id" = $2 AND "grp" = $3 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $4)`},
		"retryAfter": {st["retryAfter"], `UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2`},
		"done":       {st["done"], `UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2`},
		"retry":      {st["retry"], `UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1`},
		"untake":     {st["untake"], `UPDATE "jobs" SET "locked_until" = NULL, "attempt" = "attempt" - 1 WHERE "id" = $1`},
	} {
		if c[0] != c[1] {
			t.Errorf("%s:\n got %s\nwant %s", name, c[0], c[1])
		}
	}
	if a := args(t, FormAdvisory, StandardTable("jobs"), "takeStamp"); strings.Join(a, ", ") != "now, id, group, now" {
		t.Errorf("takeStamp arguments = %v; want now, the id, group, now", a)
	}
	// Without locked_until the advisory form marks nothing and its retry writes nothing.
	tb := StandardTable("jobs")
	tb.Columns.LockedUntil = ""
	st = rendered(t, FormAdvisory, tb, "g.dead")
	if st["retry"] != "" || st["untake"] != "" {
		t.Errorf("without locked_until: retry %q, untake %q; want none", st["retry"], st["untake"])
	}
}

// TestLastErrorStatements: with a last_error column every failed attempt records its reason,
// and a dead letter also its headers, in the order the engine binds them: the values set, the
// id, the token.
func TestLastErrorStatements(t *testing.T) {
	tb := StandardTable("jobs")
	tb.Columns.LastError = "last_error"
	st := rendered(t, FormLease, tb, "g.dead")
	for name, c := range map[string][2]string{
		"release":    {st["release"], `UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2`},
		"retry":      {st["retry"], `UPDATE "jobs" SET "locked_until" = NULL, "last_error" = $1 WHERE "id" = $2 AND "locked_until" = $3`},
		"retryAfter": {st["retryAfter"], `UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3 AND "locked_until" = $4`},
		"dlGroup":    {st["dlGroup"], `UPDATE "jobs" SET "grp" = $1, "retry_after" = NULL, "locked_until" = NULL, "headers" = $2, "last_error" = $3 WHERE "id" = $4 AND "locked_until" = $5`},
	} {
		if c[0] != c[1] {
			t.Errorf("lease %s:\n got %s\nwant %s", name, c[0], c[1])
		}
	}
	tb.Columns.Group, tb.Columns.LockedUntil, tb.Columns.ProcessedAt = "", "", ""
	for _, f := range []Form{FormRowLock, FormAdvisory} {
		st := rendered(t, f, tb, "jobs_dead", rowLockCount(f)...)
		retry := `UPDATE "jobs" SET "last_error" = $1 WHERE "id" = $2`
		if f == FormRowLock {
			retry = `UPDATE "jobs" SET "attempt" = "attempt" + 1, "last_error" = $1 WHERE "id" = $2`
		}
		for name, c := range map[string][2]string{
			"retry":  {st["retry"], retry},
			"dlNote": {st["dlNote"], `UPDATE "jobs" SET "headers" = $1, "last_error" = $2 WHERE "id" = $3`},
		} {
			if c[0] != c[1] {
				t.Errorf("%v %s:\n got %s\nwant %s", f, name, c[0], c[1])
			}
		}
		if !strings.Contains(st["dlCopy"], `"last_error") SELECT`) {
			t.Errorf("%v: the dead-letter copy leaves last_error out: %s", f, st["dlCopy"])
		}
	}
}

func TestPublisherSQL(t *testing.T) {
	p, err := NewPublisher(pgLike{}, stubDB{}, StandardTable("jobs"), "g")
	if err != nil {
		t.Fatal(err)
	}
	if want := `INSERT INTO "jobs" ("payload", "grp", "attempt", "created_at", "retry_after", "headers") VALUES ($1, $2, $3, $4, $5, $6) RETURNING "id"`; p.sql[3] != want {
		t.Errorf("insert:\n got %s\nwant %s", p.sql[3], want)
	}
}

func TestTableValidation(t *testing.T) {
	bad := []Table{
		{Name: ""},
		{Name: "1jobs"},
		{Name: `jobs"; drop`},
		{Name: "jobs", Schema: "my schema"},
		{Name: "jobs", Columns: Columns{Attempt: "n-1"}},
		{Name: "jobs", Columns: Columns{Attempt: "x", RetryAfter: "X"}},
	}
	for _, tb := range bad {
		if err := tb.Validate(); err == nil {
			t.Errorf("%+v validated", tb)
		}
	}
	if err := StandardTable("jobs").Validate(); err != nil {
		t.Errorf("StandardTable: %v", err)
	}
	if _, err := ParseTableRef("a.b.c"); err == nil {
		t.Errorf("ParseTableRef(a.b.c) passed")
	}
	if r, err := ParseTableRef("s.t"); err != nil || r != (TableRef{Schema: "s", Name: "t"}) {
		t.Errorf("ParseTableRef(s.t) = %v, %v", r, err)
	}
}

func TestConstructorsRefuse(t *testing.T) {
	tb := StandardTable("jobs")
	tb.Columns.LockedUntil = ""
	if _, err := NewLease(pgLike{}, stubDB{}, tb, "g"); err == nil || !strings.Contains(err.Error(), "locked_until") {
		t.Errorf("lease without locked_until: %v", err)
	}
	if _, err := NewLease(pgLike{}, stubDB{}, StandardTable("jobs"), ""); err == nil || !strings.Contains(err.Error(), "group") {
		t.Errorf("grouped table without a group: %v", err)
	}
	for _, o := range []core.Option{LeaseFor(0), LeaseFor(-time.Second), BatchSize(0), PollInterval(0), FlushLimits(0, time.Second),
		FlushLimits(1, -1), AdvisoryKey(" "), OnEvent(EventAck, nil), OnEvent(engine.NumEvents, func(context.Context, EventInput) ([]Statement, error) { return nil, nil })} {
		if err := core.Subscribe(core.New(), mustLease(t), func(context.Context, *core.Message[[]byte]) error { return nil }, o); err == nil {
			t.Errorf("option accepted")
		}
	}
}

func mustLease(t *testing.T) core.Endpoint {
	ep, err := NewLease(pgLike{}, stubDB{}, StandardTable("jobs"), "g")
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// rowLockCount is the options that keep a row-lock subscription with a dead letter from
// counting at claim, whose settlements the tests compare with the form's plain ones.
func rowLockCount(f Form) []core.Option {
	if f == FormRowLock {
		return []core.Option{CountAtClaim(false)}
	}
	return nil
}
