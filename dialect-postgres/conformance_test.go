package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// TestConformance runs the whole sqlqueuetest suite against the real PostgreSQL, each test on
// a schema of its own that is dropped after it.
func TestConformance(t *testing.T) {
	sqlqueuetest.Run(t, fixture)
}

// TestConformanceNotify runs the outcome cases again on a DB with Notify(true), so that every
// publish also sends pg_notify and every subscription listens.
func TestConformanceNotify(t *testing.T) {
	sqlqueuetest.RunOutcomes(t, func(t *testing.T) *sqlqueuetest.Fixture { return fixtureWith(t, postgres.Notify(true)) })
}

func fixture(t *testing.T) *sqlqueuetest.Fixture { return fixtureWith(t) }

func fixtureWith(t *testing.T, opts ...postgres.Option) *sqlqueuetest.Fixture {
	e := setup(t, opts...)
	return &sqlqueuetest.Fixture{
		DB:      e.db.Queue(),
		Dialect: e.db.Dialect(),
		Schema:  e.schema,
		CreateTable: func(ctx context.Context, tb sqlqueue.Table) error {
			return e.db.CreateTable(ctx, tb)
		},
		Exec: func(ctx context.Context, sql string, args ...any) error {
			_, err := e.pool.Exec(ctx, sql, args...)
			return err
		},
		Count: func(ctx context.Context, table string) (int, error) {
			ref, err := sqlqueue.ParseTableRef(table)
			if err != nil {
				return 0, err
			}
			var n int
			err = e.pool.QueryRow(ctx, "SELECT count(*) FROM "+quoteTableRef(ref)).Scan(&n)
			return n, err
		},
		Rows: func(ctx context.Context, tb sqlqueue.Table) ([]sqlqueuetest.Row, error) {
			return readRows(ctx, e, tb)
		},
		Lease:     func(tb sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.Lease(e.db, tb, g) },
		RowLock:   func(tb sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.RowLock(e.db, tb, g) },
		Advisory:  func(tb sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.Advisory(e.db, tb, g) },
		LeakCheck: leakCheck,
	}
}

func quoteTableRef(r sqlqueue.TableRef) string {
	if r.Schema != "" {
		return ident(r.Schema, r.Name)
	}
	return ident(r.Name)
}

// readRows reads every row of tb with pgx, a column the table does not name as its zero value.
func readRows(ctx context.Context, e *env, tb sqlqueue.Table) ([]sqlqueuetest.Row, error) {
	c := tb.Columns
	col := func(name, zero string) string {
		if name == "" {
			return zero
		}
		return ident(name)
	}
	id, payload := c.ID, c.Payload
	if id == "" {
		id = "id"
	}
	if payload == "" {
		payload = "payload"
	}
	sel := []string{
		ident(id), ident(payload) + "::bytea",
		col(c.Group, "''"), col(c.Attempt, "0"),
		col(c.RetryAfter, "NULL::timestamptz"), col(c.LockedUntil, "NULL::timestamptz"), col(c.ProcessedAt, "NULL::timestamptz"),
		col(c.Headers, "NULL::jsonb"), col(c.LastError, "NULL::text"),
	}
	rows, err := e.pool.Query(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM "+quoteTableRef(tb.Ref())+" ORDER BY "+ident(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlqueuetest.Row
	for rows.Next() {
		var r sqlqueuetest.Row
		var attempt int64
		var ra, lu, pa *time.Time
		var lastError *string
		if err := rows.Scan(&r.ID, &r.Payload, &r.Group, &attempt, &ra, &lu, &pa, &r.Headers, &lastError); err != nil {
			return nil, err
		}
		if lastError != nil {
			r.LastError = *lastError
		}
		r.Attempt = int(attempt)
		if len(r.Headers) > 0 {
			// jsonb prints {"k": "v"}; the suite compares the compact form.
			var buf bytes.Buffer
			if err := json.Compact(&buf, r.Headers); err != nil {
				return nil, err
			}
			r.Headers = buf.Bytes()
		}
		r.RetryAfter, r.LockedUntil, r.ProcessedAt = ra, lu, pa
		out = append(out, r)
	}
	return out, rows.Err()
}
