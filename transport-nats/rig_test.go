package natsjs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// rig is one test's App on one server, with its own subject prefix, a recorder of settlements
// and kept logs.
type rig struct {
	t      *testing.T
	url    string
	prefix string
	admin  *admin
	clock  clock.Clock
	conn   *natsjs.Conn
	app    *core.App
	rec    *coretest.Recorder
	logs   *coretest.Logs
	events *events
	cancel context.CancelFunc
	done   chan error
}

func newRig(t *testing.T, url string, clk clock.Clock, opts ...natsjs.Option) *rig {
	t.Helper()
	r := &rig{t: t, url: url, prefix: uniquePrefix(t), admin: newAdmin(t, url), clock: clk,
		rec: coretest.NewRecorder(t), logs: &coretest.Logs{}, events: &events{}}
	r.admin.deleteStreamsOnCleanup(t, r.prefix)
	r.app = core.New(core.WithClock(clk), core.WithLogger(logTo(r.logs)), core.WithoutSignals(),
		core.WithObserver(r.rec.Observe), core.WithEventObserver(r.events.observe), core.WithShutdownTimeout(5*time.Second))
	c, err := natsjs.New(url, append([]natsjs.Option{natsjs.WithLogger(logTo(r.logs)), natsjs.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("natsjs.New: %v", err)
	}
	r.conn = c
	r.app.Register(c)
	return r
}

// logTo keeps records in logs and, with SETTLE_TEST_LOG set, prints them too.
func logTo(logs *coretest.Logs) *slog.Logger {
	if testLogger().Handler().Enabled(context.Background(), slog.LevelDebug) {
		return slog.New(teeHandler{logs, testLogger().Handler()})
	}
	return slog.New(logs)
}

func (r *rig) subject(name string) string { return r.prefix + "." + name }
func (r *rig) stream(name string) string  { return r.prefix + "_" + nameOf(name) }

func (r *rig) queue(name string, opts ...natsjs.QueueOption) *natsjs.Queue {
	r.t.Helper()
	q, err := natsjs.NewQueue(r.conn, r.subject(name), opts...)
	if err != nil {
		r.t.Fatalf("NewQueue(%q): %v", name, err)
	}
	return q
}

// start runs the App; it returns Run's error when the App stops before it is ready.
func (r *rig) start() error {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- r.app.Run(ctx) }()
	select {
	case <-r.app.Ready():
		r.t.Cleanup(r.stop)
		return nil
	case err := <-r.done:
		cancel()
		return err
	case <-time.After(coretest.WaitTimeout):
		r.t.Fatalf("App not ready within %v", coretest.WaitTimeout)
		return nil
	}
}

func (r *rig) mustStart() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatalf("App.Run: %v", err)
	}
}

func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("App.Run: %v", err)
		}
	case <-time.After(coretest.WaitTimeout):
		r.t.Errorf("App.Run did not return after stop")
	}
}

func (r *rig) publish(name, body string, headers map[string]string) {
	r.t.Helper()
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	msg := nats.NewMsg(r.subject(name))
	msg.Data = []byte(body)
	for k, v := range headers {
		msg.Header.Set(k, v)
	}
	if _, err := r.admin.js.PublishMsg(ctx, msg); err != nil {
		r.t.Fatalf("publish to %s: %v", name, err)
	}
}

// acks spies on the acknowledgements the subscription sends for stream/durable: JetStream's ack
// subjects are ordinary subjects that any client of the account can listen to.
func (r *rig) acks(stream, durable string) *nats.Subscription {
	r.t.Helper()
	return r.spy("$JS.ACK." + stream + "." + durable + ".>")
}

// spy subscribes the admin connection to subject until the test ends.
func (r *rig) spy(subject string) *nats.Subscription {
	r.t.Helper()
	return r.admin.spy(r.t, subject)
}

// spy subscribes a's connection to subject until the test ends.
func (a *admin) spy(t *testing.T, subject string) *nats.Subscription {
	t.Helper()
	sub, err := a.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("spy on %s: %v", subject, err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

// nextAck returns the next acknowledgement body the spy sees within d, or "" when none comes.
func nextAck(t *testing.T, sub *nats.Subscription, d time.Duration) string {
	t.Helper()
	m, err := sub.NextMsg(d)
	if err != nil {
		return ""
	}
	return string(m.Data)
}

// waitLog waits until a record with message msg has been logged, and returns every such record.
func waitLog(t *testing.T, logs *coretest.Logs, msg string) []coretest.Record {
	t.Helper()
	deadline := time.Now().Add(coretest.WaitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if recs := logs.Find(msg); len(recs) > 0 {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log %q within %v", msg, coretest.WaitTimeout)
		}
		<-tick.C
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
