package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"time"

	"github.com/settlehq/settle/asyncapi"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	amqp "github.com/settlehq/settle/transport-amqp"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// Version is the refunds service's version, in its AsyncAPI document.
const Version = "0.1.0"

// The defaults of the -backoff and -poll flags, with which the committed documents
// (docs/asyncapi/) are made.
const (
	DefaultBackoff = 100 * time.Millisecond
	DefaultPoll    = 200 * time.Millisecond
)

// Info names the service: its App's name, version and description.
func Info() []core.AppOption {
	return []core.AppOption{core.WithInfo("refunds", Version),
		core.WithDescription("Refunds card payments through a fake processor: busy cards back off, unavailable ones retry, closed ones are dropped, and a refund still failing at its fifth attempt moves to its dead letter. On RabbitMQ, payouts run beside the refunds.")}
}

// DescribedApp builds the App of the mode c asks for (-amqp, -nats, SQLite otherwise) with
// everything mounted as Run, RunAMQP and RunNATS mount it, without connecting or running: its
// description is the service's contract. done releases what it opened (for SQLite a scratch
// database file: the description reads nothing from the real one).
func DescribedApp(ctx context.Context, c Config) (app *core.App, done func(), err error) {
	app = core.New(append(Info(), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals())...)
	switch {
	case c.AMQP != "":
		b, err := amqp.New(amqp.URL(c.AMQP), amqp.DeclareTopology(true))
		if err != nil {
			return nil, nil, err
		}
		app.Register(b)
		return app, func() {}, MountAMQP(app, b, NamesWith(c.Prefix), c.Backoff)
	case c.NATS != "":
		conn, err := natsjs.New(c.NATS, natsjs.DeclareTopology(true))
		if err != nil {
			return nil, nil, err
		}
		app.Register(conn)
		return app, func() {}, MountNATS(app, conn, NATSSubjectsWith(c.Prefix), c.Backoff)
	}
	dir, err := os.MkdirTemp("", "refunds-describe-")
	if err != nil {
		return nil, nil, err
	}
	db, err := openSQLite(ctx, filepath.Join(dir, "refunds.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	done = func() { db.Close(); os.RemoveAll(dir) }
	table := sqlqueue.StandardTable("refunds")
	main, err := sqliteLease(db, table, Queue)
	if err == nil {
		var dead core.Endpoint
		if dead, err = sqliteLease(db, table, DeadQueue); err == nil {
			err = Mount(app, main, dead, c.Backoff, sqlqueue.PollInterval(c.Poll))
		}
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return app, done, nil
}

// DocOptions are the AsyncAPI document's options: the payloads' descriptions from this
// package's doc comments, where its source is at hand (go run, go test; not a binary built
// with -trimpath or moved elsewhere).
func DocOptions() []asyncapi.Option {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "refunds.go")); err != nil {
		return nil
	}
	// The package's import path: "main" in the binary, its folder's path under go test.
	return []asyncapi.Option{asyncapi.GoComments(reflect.TypeFor[Refund]().PkgPath(), dir)}
}

// asyncAPIAsked reports whether settle asyncapi runs the program for its document.
func asyncAPIAsked() bool {
	_, asked := os.LookupEnv(asyncapi.EnvVar)
	return asked
}

// ExportAsyncAPI writes the AsyncAPI document of the mode c asks for where SETTLE_ASYNCAPI
// says (asyncapi.Export): what `settle asyncapi -- go run ./examples/refunds [-amqp URL | -nats
// URL]` runs.
func ExportAsyncAPI(ctx context.Context, c Config) error {
	app, done, err := DescribedApp(ctx, c)
	if err != nil {
		return err
	}
	defer done()
	if _, err := asyncapi.Export(app, DocOptions()...); err != nil {
		return fmt.Errorf("the AsyncAPI document: %w", err)
	}
	return nil
}
