package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	mysql "github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
	"github.com/settlehq/settle/eventplugin"
)

// queueTable returns the queue table of a -table flag: "name" or "schema.name", every standard
// column (processed_at keeps finished rows, so the checker reads every message's end state).
func queueTable(spec string) (sqlqueue.Table, error) {
	schema, name, ok := strings.Cut(spec, ".")
	if !ok {
		schema, name = "", spec
	}
	t := sqlqueue.StandardTable(name)
	t.Schema = schema
	if err := t.Validate(); err != nil {
		return sqlqueue.Table{}, fmt.Errorf("-table %q: %w", spec, err)
	}
	return t, nil
}

// setupSQL opens the database, registers it with the App and returns the endpoint of the
// configured form and the SQL mount options.
func setupSQL(ctx context.Context, app *core.App, w *worker) (core.Endpoint, []core.Option, func(), error) {
	cfg := w.cfg
	t, err := queueTable(cfg.table)
	if err != nil {
		return nil, nil, nil, err
	}
	var (
		ep          core.Endpoint
		dialect     sqlqueue.Dialect
		placeholder func(n int) string
		quote       func(string) string
	)
	dollar := func(n int) string { return fmt.Sprintf("$%d", n) }
	question := func(int) string { return "?" }
	dq := func(s string) string { return `"` + s + `"` }
	bq := func(s string) string { return "`" + s + "`" }
	switch cfg.backend {
	case "postgres":
		db, err := postgres.Open(ctx, cfg.dsn, postgres.Notify(cfg.notify), postgres.WithLogger(w.log))
		if err != nil {
			return nil, nil, nil, err
		}
		app.Register(db)
		dialect, placeholder, quote = db.Dialect(), dollar, dq
		switch cfg.form {
		case "lease":
			ep, err = postgres.Lease(db, t, cfg.queue)
		case "rowlock":
			ep, err = postgres.RowLock(db, t, cfg.queue)
		case "advisory":
			ep, err = postgres.Advisory(db, t, cfg.queue)
		}
		if err != nil {
			return nil, nil, nil, err
		}
	case "mariadb":
		db, err := mysql.Open(ctx, cfg.dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		app.Register(db)
		dialect, placeholder, quote = db.Dialect(), question, bq
		switch cfg.form {
		case "lease":
			ep, err = mysql.Lease(db, t, cfg.queue)
		case "rowlock":
			ep, err = mysql.RowLock(db, t, cfg.queue)
		case "advisory":
			ep, err = mysql.Advisory(db, t, cfg.queue)
		}
		if err != nil {
			return nil, nil, nil, err
		}
	case "sqlite":
		db, err := sqlite.Open(ctx, cfg.dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		app.Register(db)
		dialect, placeholder, quote = db.Dialect(), question, dq
		switch cfg.form {
		case "lease":
			ep, err = sqlite.Lease(db, t, cfg.queue)
		case "advisory":
			ep, err = sqlite.Advisory(db, t, cfg.queue)
		}
		if err != nil {
			return nil, nil, nil, err
		}
	}

	opts := []core.Option{sqlqueue.PollInterval(cfg.poll)}
	if cfg.form == "lease" {
		opts = append(opts, sqlqueue.LeaseFor(cfg.lease))
	}
	if cfg.batch > 0 {
		opts = append(opts, sqlqueue.BatchSize(cfg.batch))
	}
	w.describe = func(d core.Delivery, e *chaos.Entry) {
		if id, ok := sqlqueue.RowID(d); ok {
			e.Row = id
		}
	}
	if cfg.transactional {
		opts = append(opts, sqlqueue.Transactional())
		if cfg.sideTable != "" {
			insert := "INSERT INTO " + quote(cfg.sideTable) + " (msg_id, attempt, worker) VALUES (" +
				placeholder(1) + ", " + placeholder(2) + ", " + placeholder(3) + ")"
			w.side = func(ctx context.Context, id string, attempt int) error {
				tx, err := sqlqueue.Tx(ctx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, insert, id, attempt, cfg.name)
				return err
			}
		}
	}
	var closeFn func()
	switch {
	case cfg.failAck:
		opts = append(opts, failingAck(w, t, placeholder, quote))
	case cfg.plugin != "":
		var args []string
		if cfg.pluginArgs != "" {
			args = strings.Fields(cfg.pluginArgs)
		}
		p, err := eventplugin.Load(ctx, cfg.plugin, eventplugin.Args(args...), eventplugin.WithLogger(w.log))
		if err != nil {
			return nil, nil, nil, err
		}
		closeFn = func() { _ = p.Close() }
		_ = w.ledger.Write(chaos.Entry{Ev: chaos.EvReady, Detail: fmt.Sprintf("plugin %s loaded", cfg.plugin)})
		opts = append(opts, p.Events(dialect, t, eventplugin.EventAck))
	}
	return ep, opts, closeFn, nil
}

// failingAck replaces the ack statement: the standard ack (fenced by the lease token in the
// lease form), except for rows of fail_ack messages, whose ack runs a statement the server
// refuses (a table that does not exist), as a trigger refusing the dialect's ack would.
func failingAck(w *worker, t sqlqueue.Table, ph func(int) string, quote func(string) string) core.Option {
	var failing sync.Map // row id → true
	w.noteRow = func(d core.Delivery, k chaos.Kind) {
		if id, ok := sqlqueue.RowID(d); ok && k == chaos.FailAck {
			failing.Store(id, true)
		}
	}
	table := quote(t.Name)
	if t.Schema != "" {
		table = quote(t.Schema) + "." + quote(t.Name)
	}
	c := t.Columns
	return sqlqueue.OnEvent(sqlqueue.EventAck, func(ctx context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		if _, bad := failing.Load(in.ID); bad {
			return []sqlqueue.Statement{{SQL: "INSERT INTO chaos_no_such_table (id) VALUES (" + ph(1) + ")", Args: []any{in.ID}}}, nil
		}
		where := quote(c.ID) + " = " + ph(2)
		args := []any{in.Now, in.ID}
		if in.Form == sqlqueue.FormLease {
			where += " AND " + quote(c.LockedUntil) + " = " + ph(3)
			args = append(args, in.Token)
		}
		if c.ProcessedAt == "" {
			return nil, errors.New("chaos: the failing ack needs a processed_at column")
		}
		return []sqlqueue.Statement{{SQL: "UPDATE " + table + " SET " + quote(c.ProcessedAt) + " = " + ph(1) + " WHERE " + where, Args: args}}, nil
	})
}
