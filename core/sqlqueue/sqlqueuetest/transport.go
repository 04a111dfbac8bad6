package sqlqueuetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/transporttest"
)

// RunTransport runs the outcome suite every backend runs, core/transporttest, on the dialect:
// for every claim form the fixture offers, on a table with a group column (the queues are
// groups of one table, the dead letter a group) and on tables without one (each queue a table,
// the dead letter another table). Lease and advisory claims count the attempt when they take a
// row, so their cases include a delivery that is never settled reaching its dead letter.
//
//	func TestTransportConformance(t *testing.T) { sqlqueuetest.RunTransport(t, openFixture) }
func RunTransport(t *testing.T, open Open) {
	probe := open(t)
	for _, fm := range forms(probe) {
		for _, grouped := range []bool{true, false} {
			shape := "grouped"
			if !grouped {
				shape = "tables"
			}
			t.Run(fm.name+"/"+shape, func(t *testing.T) {
				transporttest.Run(t, func(t *testing.T) transporttest.Env {
					return TransportEnv(t, open(t), fm.f, grouped)
				})
			})
		}
	}
}

// TransportEnv turns a fresh Fixture into a transporttest environment for one claim form:
// messages are published through sqlqueue's Publisher and read back with the dialect's own
// client (Fixture.Rows), and a message's Count is its attempt column. The Apps run on real
// time: the engine finds a delayed row by polling, and a virtual clock advanced by the suite
// could pass a poll before the engine arms it (sqlqueuetest checks the exact times on a
// virtual clock). grouped picks the table shape: one standard table whose groups are the
// queues (acks mark processed_at), or one table per queue without group and processed_at
// columns (acks delete; the dead letter is the table "<queue>_dead").
func TransportEnv(t *testing.T, f *Fixture, form sqlqueue.Form, grouped bool) transporttest.Env {
	t.Helper()
	var ep Endpoint
	switch form {
	case sqlqueue.FormLease:
		ep = f.Lease
	case sqlqueue.FormRowLock:
		ep = f.RowLock
	case sqlqueue.FormAdvisory:
		ep = f.Advisory
	}
	if ep == nil {
		t.Fatalf("sqlqueuetest.TransportEnv: the fixture offers no %v form", form)
	}
	b := &sqlBackend{t: t, f: f, ep: ep, grouped: grouped, tables: map[string]sqlqueue.Table{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if grouped {
		tb := sqlqueue.StandardTable("tq")
		if err := f.CreateTable(ctx, tb); err != nil {
			t.Fatalf("creating table %s: %v", tb.Name, err)
		}
		b.shared = tb
	}
	return transporttest.Env{
		Backend: b,
		// The lease and advisory forms count the attempt when they take a row; the row-lock
		// form counts it in the statement that settles the row.
		Features:  transporttest.Features{CountsAtTake: form != sqlqueue.FormRowLock},
		Clock:     clock.Real(),
		LeakCheck: f.LeakCheck,
	}
}

// sqlBackend is a transporttest.Backend on one fixture.
type sqlBackend struct {
	t       *testing.T
	f       *Fixture
	ep      Endpoint
	grouped bool
	shared  sqlqueue.Table            // grouped: the one table
	tables  map[string]sqlqueue.Table // ungrouped: by logical queue, created on first use
}

// Register adds nothing: a SQL endpoint carries its database.
func (b *sqlBackend) Register(*core.App) {}

// DeadLetterName maps a logical dead-letter queue to the engine's destination: the group
// itself, or the table that holds it (a table name takes no dot).
func (b *sqlBackend) DeadLetterName(queue string) string {
	if b.grouped {
		return queue
	}
	return b.table(queue).Name
}

// table returns where a logical queue lives, creating its table on first use when each queue
// is a table.
func (b *sqlBackend) table(queue string) sqlqueue.Table {
	b.t.Helper()
	if b.grouped {
		return b.shared
	}
	if tb, ok := b.tables[queue]; ok {
		return tb
	}
	tb := sqlqueue.StandardTable(strings.ReplaceAll(queue, ".", "_"))
	tb.Columns.Group, tb.Columns.ProcessedAt = "", ""
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.f.CreateTable(ctx, tb); err != nil {
		b.t.Fatalf("creating table %s for queue %q: %v", tb.Name, queue, err)
	}
	b.tables[queue] = tb
	return tb
}

func (b *sqlBackend) group(queue string) string {
	if b.grouped {
		return queue
	}
	return ""
}

// Endpoint returns the form's endpoint on the queue's table (and group). The dead-letter
// table of an ungrouped queue is created with it, since the engine checks it at start.
func (b *sqlBackend) Endpoint(queue string) core.Endpoint {
	b.t.Helper()
	if !b.grouped {
		b.table(queue + ".dead")
	}
	ep, err := b.ep(b.table(queue), b.group(queue))
	if err != nil {
		b.t.Fatalf("endpoint on queue %q: %v", queue, err)
	}
	return ep
}

// Publish inserts a row through sqlqueue's Publisher.
func (b *sqlBackend) Publish(ctx context.Context, queue string, body []byte, headers map[string]string) error {
	p, err := sqlqueue.NewPublisher(b.f.Dialect, b.f.DB, b.table(queue), b.group(queue), sqlqueue.PublishCodec(core.Raw))
	if err != nil {
		return err
	}
	var opts []sqlqueue.PublishOption
	if headers != nil {
		opts = append(opts, sqlqueue.WithHeaders(headers))
	}
	_, err = p.PublishRaw(ctx, body, opts...)
	return err
}

// Drain reads the queue's unfinished rows (not marked processed) with the dialect's own
// client, deletes them and returns them in id order, each with its headers column decoded
// and its attempt as Count. The engine settles before it reports a settlement, so what a
// settlement moved is already there; atLeast > 0 still polls (bounded by ctx) for safety.
func (b *sqlBackend) Drain(ctx context.Context, queue string, atLeast int) ([]transporttest.Message, error) {
	tb, group := b.table(queue), b.group(queue)
	var out []transporttest.Message
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := b.f.Rows(ctx, tb)
		if err != nil {
			return out, fmt.Errorf("reading table %s: %w", tb.Name, err)
		}
		for _, r := range rows {
			if r.Group != group || r.ProcessedAt != nil {
				continue
			}
			m := transporttest.Message{Body: r.Payload, Count: r.Attempt}
			if len(r.Headers) > 0 && string(r.Headers) != "null" {
				if err := json.Unmarshal(r.Headers, &m.Headers); err != nil {
					return out, fmt.Errorf("row %d of table %s: headers column %q is not a JSON object of strings: %w",
						r.ID, tb.Name, r.Headers, err)
				}
			}
			del := "DELETE FROM " + b.f.Dialect.Quote(tb.Name) + " WHERE " + b.f.Dialect.Quote(tb.Columns.ID) + " = " + b.f.Dialect.Placeholder(1)
			if err := b.f.Exec(ctx, del, r.ID); err != nil {
				return out, fmt.Errorf("deleting row %d of table %s: %w", r.ID, tb.Name, err)
			}
			out = append(out, m)
		}
		if len(out) >= atLeast {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("queue %q holds %d messages, want at least %d: %w", queue, len(out), atLeast, ctx.Err())
		case <-tick.C:
		}
	}
}
