package natsjs_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/ops/opstest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// opsStreams creates the queue's stream and the dead-letter stream (work-queue retention, as
// DeclareTopology does) under a unique prefix, deleted after the test.
func opsStreams(t testing.TB, a *admin) (prefix, subject, dead string) {
	t.Helper()
	prefix = uniquePrefix(t)
	a.deleteStreamsOnCleanup(t, prefix)
	subject, dead = prefix+".refunds", prefix+".refunds.dead"
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	for _, s := range []string{subject, dead} {
		if _, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: nameOf(s), Subjects: []string{s},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
			t.Fatalf("creating the stream of %s: %v", s, err)
		}
	}
	return prefix, subject, dead
}

// read returns the messages stored on subject, in order, without removing them.
func (a *admin) read(t testing.TB, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	st, err := a.js.Stream(ctx, nameOf(subject))
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
}

func newOpsConn(t testing.TB, url string) *natsjs.Conn {
	t.Helper()
	c, err := natsjs.New(url, natsjs.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestOps runs the operations suite on the real nats-server and the embedded one, reading
// back with nats.go's jetstream client.
func TestOps(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		opstest.Run(t, opstest.Features{Ready: true, Dead: true, OldestReady: true, CannotKeepAttempts: true}, func(t *testing.T) opstest.Backend {
			a := newAdmin(t, url)
			_, subject, dead := opsStreams(t, a)
			q, err := natsjs.NewOps(context.Background(), newOpsConn(t, url), subject, dead)
			if err != nil {
				t.Fatal(err)
			}
			var n atomic.Int64
			publish := func(t testing.TB, subj string, payload []byte, h map[string]string) uint64 {
				msg := nats.NewMsg(subj)
				msg.Data = payload
				for k, v := range h {
					msg.Header.Set(k, v)
				}
				msg.Header.Set(jetstream.MsgIDHeader, "m-"+strconv.FormatInt(n.Add(1), 10))
				ack, err := a.js.PublishMsg(context.Background(), msg)
				if err != nil {
					t.Fatal(err)
				}
				return ack.Sequence
			}
			return opstest.Backend{
				Queue:  q,
				Origin: subject,
				AddDead: func(t testing.TB, payload []byte, h map[string]string) string {
					return strconv.FormatUint(publish(t, dead, payload, h), 10)
				},
				AddReady: func(t testing.TB, payload []byte) { publish(t, subject, payload, nil) },
				Ready: func(t testing.TB) []opstest.Message {
					var out []opstest.Message
					for _, m := range a.read(t, subject) {
						if m.Header.Get(core.HeaderRetryCount) != "" || m.Header.Get(core.HeaderError) != "" {
							t.Errorf("redriven copy carries dead-letter headers: %v", m.Header)
						}
						out = append(out, opstest.Message{Payload: m.Data})
					}
					return out
				},
				Dead: func(t testing.TB) [][]byte {
					var out [][]byte
					for _, m := range a.read(t, dead) {
						out = append(out, m.Data)
					}
					return out
				},
			}
		})
	})
}

// TestOpsEndToEnd: a subscription moves a failing message to its dead-letter subject; Ops says
// why, redrives it, and the subscription then processes it; a redrive repeated with the same
// dead letter (an interrupted run) is dropped by the duplicate window.
func TestOpsEndToEnd(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		a := newAdmin(t, url)
		prefix := uniquePrefix(t)
		a.deleteStreamsOnCleanup(t, prefix)
		subject, dead := prefix+".payouts", prefix+".payouts.dead"
		var up atomic.Bool
		handled := make(chan int, 4)
		deadLettered := make(chan struct{}, 1)
		app := core.New(core.WithLogger(testLogger()), core.WithoutSignals(), core.WithObserver(func(s core.Settlement) {
			if s.Verdict.Action == core.ActDeadLetter && s.Err == nil {
				deadLettered <- struct{}{}
			}
		}))
		c, err := natsjs.New(url, natsjs.DeclareTopology(true), natsjs.WithLogger(testLogger()))
		if err != nil {
			t.Fatal(err)
		}
		app.Register(c)
		q, err := natsjs.NewQueue(c, subject)
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(app, q, func(ctx context.Context, m *core.Message[[]byte]) error {
			if !up.Load() {
				return core.Retry().Because(errors.New("bank API: 503"))
			}
			handled <- m.Attempt()
			return nil
		}, core.WithCodec(core.Raw), core.DeadLetterAfter(2, dead)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		defer func() {
			cancel()
			<-done
		}()
		<-app.Ready()
		if _, err := natsjs.PublishRaw(ctx, c, subject, []byte(`{"payout":7}`), nil, "payout-7"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-deadLettered:
		case <-time.After(coretest.WaitTimeout):
			t.Fatal("the message was not dead-lettered")
		}
		o, err := natsjs.NewOps(ctx, newOpsConn(t, url), subject, dead)
		if err != nil {
			t.Fatal(err)
		}
		page, err := o.ListDead(ctx, ops.Filter{}, ops.Page{})
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("ListDead = %+v, %v", page, err)
		}
		d := page.Items[0]
		if d.Count != 2 || d.Origin != subject || d.Reason != "retry at attempt 2 of 2: bank API: 503" {
			t.Errorf("dead letter: count %d, origin %q, reason %q", d.Count, d.Origin, d.Reason)
		}
		if s, err := o.Stats(ctx); err != nil || s.Dead != 1 || s.Ready != 0 || !s.Measured(ops.FigureInFlight) {
			t.Errorf("stats: %+v, %v", s, err)
		}
		// Publish the copy a redrive would, as an interrupted run left it, then redrive: the
		// duplicate window drops the second copy.
		dup := nats.NewMsg(subject)
		dup.Data = d.Payload
		dup.Header.Set(jetstream.MsgIDHeader, "payout-7/redrive/"+nameOf(dead)+":"+d.ID)
		up.Store(true)
		first, err := a.js.PublishMsg(ctx, dup)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := o.Redrive(ctx, ops.IDs(d.ID), ops.RedriveOptions{}); err != nil || n != 1 {
			t.Fatalf("Redrive = %d, %v", n, err)
		}
		select {
		case att := <-handled:
			if att != 1 {
				t.Errorf("the redriven message came back as attempt %d, want 1", att)
			}
		case <-time.After(coretest.WaitTimeout):
			t.Fatal("the redriven message was not processed")
		}
		st, err := a.js.Stream(ctx, nameOf(subject))
		if err != nil {
			t.Fatal(err)
		}
		if info, err := st.Info(ctx); err != nil || info.State.LastSeq != first.Sequence {
			t.Errorf("the queue's stream ends at sequence %d (%v), want %d: the repeated redrive's copy was stored again",
				info.State.LastSeq, err, first.Sequence)
		}
		if left := a.read(t, dead); len(left) != 0 {
			t.Errorf("the dead-letter subject still holds %d", len(left))
		}
		if _, err := natsjs.NewOps(ctx, newOpsConn(t, url), prefix+".nowhere", ""); !errors.Is(err, ops.ErrTargetNotFound) ||
			!strings.Contains(err.Error(), "nowhere") {
			t.Errorf("NewOps on an uncaptured subject: %v", err)
		}
	})
}
