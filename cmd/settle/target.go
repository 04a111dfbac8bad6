package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/sqlqueue"
	mysql "github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
	amqp "github.com/settlehq/settle/transport-amqp"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// target is one queue and its dead letter on one backend, as the flags, the environment or a
// --target string name it.
type target struct {
	kind  string // sqlite, postgres, mysql, amqp, nats
	raw   string // the DSN as given (settle's own parameters removed), for messages, redacted
	dsn   string // what the driver takes
	table string // SQL: the queue table
	queue string // the group (SQL tables with a group column), the AMQP queue, or the NATS subject
	dead  string // the dead-letter group, table, queue or subject
	wait  []string
	// management is RabbitMQ's management API (amqp.ManagementAPI), which counts what AMQP
	// cannot: messages in flight and messages a quorum queue is dead-lettering.
	management string
}

// settleParams are the query parameters of a --target string that belong to settle, not to
// the driver.
var settleParams = []string{"table", "queue", "dead", "waiting", "management"}

// parseTarget reads a --target string: a DSN or URL whose query may carry settle's own
// parameters (table, queue, dead, waiting; waiting may repeat), e.g.
// "sqlite:///var/lib/app/queue.db?table=jobs&queue=refunds&dead=refunds.dead".
func parseTarget(s string) (target, error) {
	base, query, _ := strings.Cut(s, "?")
	var t target
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return t, usageErr("target %q: the query after ? is not key=value pairs: %v", redact(s), err)
		}
		t.table, t.queue, t.dead, t.wait = vals.Get("table"), vals.Get("queue"), vals.Get("dead"), vals["waiting"]
		t.management = vals.Get("management")
		for _, k := range settleParams {
			vals.Del(k)
		}
		if rest := vals.Encode(); rest != "" {
			base += "?" + rest
		}
	}
	var err error
	t.kind, t.dsn, err = splitDSN(base)
	t.raw = base
	return t, err
}

// splitDSN tells the backend from the DSN's scheme and returns what its driver takes.
func splitDSN(dsn string) (kind, driverDSN string, err error) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		switch {
		case strings.HasPrefix(dsn, "sqlite:"):
			return "sqlite", strings.TrimPrefix(dsn, "sqlite:"), nil
		case dsn == "":
			return "", "", usageErr("no target: give --dsn (or SETTLE_DSN)")
		}
		return "", "", usageErr("DSN %q has no scheme: write sqlite:///path/to/file.db, postgres://…, mysql://user:pw@tcp(host:3306)/db, amqp://… or nats://…", redact(dsn))
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		return "sqlite", rest, nil
	case "postgres", "postgresql":
		return "postgres", dsn, nil
	case "mysql", "mariadb":
		return "mysql", rest, nil // go-sql-driver's own form: user:pw@tcp(host:3306)/db?…
	case "amqp", "amqps":
		return "amqp", dsn, nil
	case "nats", "tls":
		return "nats", dsn, nil
	}
	return "", "", usageErr("DSN scheme %q is not one settle reads (sqlite, postgres, mysql, mariadb, amqp, amqps, nats)", scheme)
}

// name is how the console and messages call the target.
func (t target) name() string {
	switch {
	case t.kind == "amqp" || t.kind == "nats":
		return t.queue
	case t.queue != "":
		return t.table + "/" + t.queue
	}
	return t.table
}

// errUnreachable marks a target whose backend could not be reached or opened (exit code 3).
var errUnreachable = errors.New("cannot reach the backend")

func unreachable(t target, err error) error {
	return fmt.Errorf("%w: %s at %s: %w", errUnreachable, t.kind, redact(t.raw), err)
}

// open connects to the target's backend and returns its ops.Queue; closing the Closer
// disconnects.
func (t target) open(ctx context.Context) (ops.Queue, io.Closer, error) {
	if t.management != "" && t.kind != "amqp" {
		return nil, nil, usageErr("--management names RabbitMQ's management API; a %s target has none", t.kind)
	}
	switch t.kind {
	case "amqp":
		return t.openAMQP(ctx)
	case "nats":
		return t.openNATS(ctx)
	case "sqlite", "postgres", "mysql":
		return t.openSQL(ctx)
	}
	return nil, nil, usageErr("no target: give --dsn (or SETTLE_DSN)")
}

func (t target) openAMQP(ctx context.Context) (ops.Queue, io.Closer, error) {
	if t.queue == "" {
		return nil, nil, usageErr("a RabbitMQ target needs its queue (--queue or SETTLE_QUEUE)")
	}
	if t.table != "" {
		return nil, nil, usageErr("a RabbitMQ target has no table (--table %q)", t.table)
	}
	conn, err := amqp.URL(t.dsn)()
	if err != nil {
		return nil, nil, unreachable(t, err)
	}
	var opts []amqp.OpsOption
	if len(t.wait) > 0 {
		opts = append(opts, amqp.OpsWaitingQueues(t.wait...))
	}
	if t.management != "" {
		uri, err := amqp091.ParseURI(t.dsn)
		if err != nil {
			conn.Close()
			return nil, nil, usageErr("RabbitMQ target %s: %v", redact(t.dsn), err)
		}
		counts, err := amqp.ManagementAPI(t.management, uri.Vhost)
		if err != nil {
			conn.Close()
			return nil, nil, usageErr("--management: %v", err)
		}
		opts = append(opts, amqp.OpsCounts(counts))
	}
	q, err := amqp.NewOps(ctx, conn, t.queue, t.dead, opts...)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return q, conn, nil
}

func (t target) openNATS(ctx context.Context) (ops.Queue, io.Closer, error) {
	if t.queue == "" {
		return nil, nil, usageErr("a NATS target needs its queue's subject (--queue or SETTLE_QUEUE)")
	}
	if t.table != "" || len(t.wait) > 0 {
		return nil, nil, usageErr("a NATS target has no table and no waiting queues")
	}
	c, err := natsjs.New(t.dsn, natsjs.WithLogger(slog.New(slog.DiscardHandler)),
		natsjs.NATSOptions(nats.MaxReconnects(0), nats.Timeout(5*time.Second)))
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, nil, unreachable(t, err)
	}
	q, err := natsjs.NewOps(ctx, c, t.queue, t.dead)
	if err != nil {
		c.Close()
		if errors.Is(err, ops.ErrTargetNotFound) {
			return nil, nil, err
		}
		return nil, nil, unreachable(t, err)
	}
	return q, c, nil
}

// sqlDB is what the three dialects' pools give the engine.
type sqlDB struct {
	d      sqlqueue.Dialect
	db     sqlqueue.DB
	closer io.Closer
}

// sqliteFile is what both SQLite dialects' *DB offer (sqlite_cgo.go, sqlite_purego.go).
type sqliteFile interface {
	Dialect() sqlqueue.Dialect
	Queue() sqlqueue.DB
	Close() error
}

// sqlDBOf is the sqlDB of an SQLite dialect's Open.
func sqlDBOf[D sqliteFile](db D, err error) (sqlDB, error) {
	if err != nil {
		return sqlDB{}, err
	}
	return sqlDB{db.Dialect(), db.Queue(), db}, nil
}

func (t target) openSQL(ctx context.Context) (ops.Queue, io.Closer, error) {
	s, tb, ref, err := t.openTable(ctx)
	if err != nil {
		return nil, nil, err
	}
	return t.sqlOps(ctx, s, tb, ref)
}

// openTable connects to a SQL target's database and reads its queue table's columns.
func (t target) openTable(ctx context.Context) (sqlDB, sqlqueue.Table, sqlqueue.TableRef, error) {
	if t.table == "" {
		return sqlDB{}, sqlqueue.Table{}, sqlqueue.TableRef{}, usageErr("a %s target needs its queue table (--table or SETTLE_TABLE)", t.kind)
	}
	ref, err := sqlqueue.ParseTableRef(t.table)
	if err != nil {
		return sqlDB{}, sqlqueue.Table{}, ref, usageErr("--table: %v", err)
	}
	var s sqlDB
	switch t.kind {
	case "sqlite":
		path := t.dsn
		if u, err := url.Parse("sqlite://" + t.dsn); err == nil && u.Path != "" && u.Host == "" {
			path = u.Path
		}
		if _, err := os.Stat(path); err != nil {
			// sqlite.Open would create an empty database: an operator's typo must not.
			return sqlDB{}, sqlqueue.Table{}, ref, unreachable(t, fmt.Errorf("no database file at %s (settle does not create one)", path))
		}
		if s, err = openSQLite(ctx, path); err != nil {
			return sqlDB{}, sqlqueue.Table{}, ref, unreachable(t, err)
		}
	case "postgres":
		db, err := postgres.Open(ctx, t.dsn)
		if err != nil {
			return sqlDB{}, sqlqueue.Table{}, ref, unreachable(t, err)
		}
		if err := db.Pool().Ping(ctx); err != nil {
			db.Close()
			return sqlDB{}, sqlqueue.Table{}, ref, unreachable(t, err)
		}
		s = sqlDB{db.Dialect(), db.Queue(), db}
	case "mysql":
		db, err := mysql.Open(ctx, t.dsn)
		if err != nil {
			return sqlDB{}, sqlqueue.Table{}, ref, unreachable(t, err)
		}
		s = sqlDB{db.Dialect(), db.Queue(), db}
	}
	tb, err := sqlqueue.DetectTable(ctx, s.d, s.db, ref)
	if err != nil {
		s.closer.Close()
		if errors.Is(err, ops.ErrTargetNotFound) {
			return sqlDB{}, tb, ref, err
		}
		return sqlDB{}, tb, ref, unreachable(t, err)
	}
	return s, tb, ref, nil
}

// sqlOps is the ops.Queue of a SQL target's queue, on its opened table.
func (t target) sqlOps(ctx context.Context, s sqlDB, tb sqlqueue.Table, ref sqlqueue.TableRef) (ops.Queue, io.Closer, error) {
	var err error
	switch {
	case tb.Columns.Group != "" && t.queue == "":
		err = usageErr("table %s has a group column: name the queue's group (--queue or SETTLE_QUEUE)", ref)
	case tb.Columns.Group == "" && t.queue != "" && t.queue != ref.String():
		err = usageErr("table %s has no group column, so it is one queue: leave --queue out", ref)
	}
	var q *sqlqueue.Ops
	var so *sqlOps
	if err == nil {
		group := t.queue
		if tb.Columns.Group == "" {
			group = ""
		}
		q, err = sqlqueue.NewOps(ctx, s.d, s.db, tb, group, t.dead)
		if err == nil {
			so, err = newSQLOps(q, s.d, s.db, tb, ref, group, t.dead)
		}
	}
	if err != nil {
		s.closer.Close()
		if errors.Is(err, ops.ErrTargetNotFound) || isUsage(err) {
			return nil, nil, err
		}
		return nil, nil, unreachable(t, err)
	}
	return so, s.closer, nil
}

// host is where the target's backend runs, for people: host:port of a server, or the path of
// an SQLite file. It never carries credentials.
func (t target) host() string {
	switch t.kind {
	case "sqlite":
		if u, err := url.Parse("sqlite://" + t.dsn); err == nil && u.Path != "" && u.Host == "" {
			return u.Path
		}
		return t.dsn
	case "mysql":
		// user:pw@tcp(host:3306)/db
		rest := t.dsn
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			rest = rest[i+1:]
		}
		if open, end := strings.Index(rest, "("), strings.Index(rest, ")"); open >= 0 && end > open {
			return rest[open+1 : end]
		}
		host, _, _ := strings.Cut(rest, "/")
		return host
	}
	if u, err := url.Parse(t.dsn); err == nil {
		return u.Host
	}
	return ""
}
