package natsjs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/transporttest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// uniquePrefix is a subject prefix no other test (or helper) uses.
func uniquePrefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "settle_test_" + hex.EncodeToString(b[:])
}

// admin is a plain client for setting up and reading back a server, outside settle.
type admin struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newAdmin(t testing.TB, url string) *admin {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("admin connection to %s: %v", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("admin JetStream: %v", err)
	}
	t.Cleanup(nc.Close)
	return &admin{nc: nc, js: js}
}

// deleteStreamsOnCleanup deletes the streams whose names begin with prefix when the test ends.
func (a *admin) deleteStreamsOnCleanup(t testing.TB, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(10 * time.Second)
		defer cancel()
		names := a.js.StreamNames(ctx)
		var del []string
		for n := range names.Name() {
			if len(n) >= len(prefix) && n[:len(prefix)] == prefix {
				del = append(del, n)
			}
		}
		for _, n := range del {
			if err := a.js.DeleteStream(ctx, n); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete stream %s: %v", n, err)
			}
		}
	})
}

// stored is a message read back from a stream.
type stored struct {
	Seq     uint64
	Body    []byte
	Headers nats.Header
}

// take removes and returns the messages stream holds now, in order; none when it does not exist.
func (a *admin) take(ctx context.Context, stream string) ([]stored, error) {
	s, err := a.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []stored
	if info.State.Msgs == 0 {
		return nil, nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s sequence %d: %w", stream, seq, err)
		}
		if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("delete %s sequence %d: %w", stream, seq, err)
		}
		out = append(out, stored{Seq: seq, Body: m.Data, Headers: m.Header})
	}
	return out, nil
}

// takeAtLeast takes stream's messages until n have arrived (or ctx ends), re-reading whenever a
// message is published to subject and at least every 50ms (a core subscriber may hear of a
// message a moment before the stream has stored it).
func (a *admin) takeAtLeast(ctx context.Context, stream, subject string, n int) ([]stored, error) {
	sub, err := a.nc.SubscribeSync(subject)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var out []stored
	for {
		got, err := a.take(ctx, stream)
		if err != nil {
			return out, err
		}
		out = append(out, got...)
		if len(out) >= n {
			return out, nil
		}
		arrived := make(chan struct{})
		go func() { _, _ = sub.NextMsg(50 * time.Millisecond); close(arrived) }()
		select {
		case <-arrived:
		case <-tick.C:
		case <-ctx.Done():
			<-arrived
			return out, fmt.Errorf("%d of %d messages in stream %s: %w", len(out), n, stream, ctx.Err())
		}
	}
}

// backend is a transporttest.Backend on one NATS server: logical queue names become subjects
// under a prefix of the test's, and the streams go when the test ends.
type backend struct {
	t      testing.TB
	url    string
	prefix string
	admin  *admin
	opts   []natsjs.QueueOption

	mu     sync.Mutex
	conn   *natsjs.Conn
	opened map[string]chan struct{}
}

func newBackend(t testing.TB, url string, opts ...natsjs.QueueOption) *backend {
	b := &backend{t: t, url: url, prefix: uniquePrefix(t), admin: newAdmin(t, url), opts: opts, opened: map[string]chan struct{}{}}
	b.admin.deleteStreamsOnCleanup(t, b.prefix)
	return b
}

func (b *backend) subject(queue string) string { return b.prefix + "." + queue }
func (b *backend) stream(queue string) string  { return b.prefix + "_" + nameOf(queue) }

func nameOf(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == '.' {
			out[i] = '_'
		}
	}
	return string(out)
}

// Register gives app a Conn of its own that declares topology.
func (b *backend) Register(app *core.App) {
	c, err := natsjs.New(b.url, natsjs.DeclareTopology(true), natsjs.WithLogger(app.Logger()), natsjs.WithClock(app.Clock()))
	if err != nil {
		b.t.Fatalf("natsjs.New: %v", err)
	}
	app.Register(c)
	b.mu.Lock()
	b.conn = c
	b.mu.Unlock()
}

func (b *backend) Endpoint(queue string) core.Endpoint {
	b.mu.Lock()
	c := b.conn
	b.mu.Unlock()
	q, err := natsjs.NewQueue(c, b.subject(queue), b.opts...)
	if err != nil {
		b.t.Fatalf("endpoint %q: %v", queue, err)
	}
	opened := make(chan struct{})
	b.mu.Lock()
	b.opened[queue] = opened
	b.mu.Unlock()
	return prefixed{q, b, opened}
}

// prefixed puts the subscription's dead letter under the test's prefix and tells Publish when
// the queue's stream is declared.
type prefixed struct {
	q      *natsjs.Queue
	b      *backend
	opened chan struct{}
}

func (p prefixed) Queue() string { return p.q.Queue() }

func (p prefixed) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	if sub.Options.Cap > 0 && !strings.HasPrefix(sub.Options.DeadLetterTo, p.b.prefix) {
		sub.Options.DeadLetterTo = p.b.subject(sub.Options.DeadLetterTo)
	}
	src, fin, err := p.q.Open(ctx, sub)
	if err == nil {
		close(p.opened)
	}
	return src, fin, err
}

func (b *backend) Publish(ctx context.Context, queue string, body []byte, headers map[string]string) error {
	b.mu.Lock()
	opened := b.opened[queue]
	b.mu.Unlock()
	if opened != nil {
		select {
		case <-opened:
		case <-ctx.Done():
			return fmt.Errorf("queue %q was never opened: %w", queue, ctx.Err())
		}
	}
	msg := nats.NewMsg(b.subject(queue))
	msg.Data = body
	for k, v := range headers {
		msg.Header.Set(k, v)
	}
	_, err := b.admin.js.PublishMsg(ctx, msg)
	return err
}

func (b *backend) Drain(ctx context.Context, queue string, atLeast int) ([]transporttest.Message, error) {
	var got []stored
	var err error
	if atLeast > 0 {
		got, err = b.admin.takeAtLeast(ctx, b.stream(queue), b.subject(queue), atLeast)
	} else {
		got, err = b.admin.take(ctx, b.stream(queue))
	}
	if err != nil {
		return nil, err
	}
	out := make([]transporttest.Message, len(got))
	for i, m := range got {
		h := map[string]string{}
		for k, v := range m.Headers {
			h[k] = v[0]
		}
		n, _ := core.ParseCount(h[core.HeaderRetryCount])
		out[i] = transporttest.Message{Body: m.Body, Headers: h, Count: n}
	}
	return out, nil
}

func TestTransport(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		transporttest.Run(t, func(t *testing.T) transporttest.Env {
			return transporttest.Env{Backend: newBackend(t, url), Clock: clock.Real(), Features: transporttest.Features{CountsAtTake: true}}
		})
	})
}
