package natsjs_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/transporttest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

var raw = core.WithCodec(core.Raw)

// TestNakDelayHeldByServer: RetryAfter(d) is a -NAK with delay; the server delivers the message
// again no earlier than d after the handler returned, and not much later (bounded by 2s).
func TestNakDelayHeldByServer(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const delay = 1200 * time.Millisecond
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		returned := make(chan time.Time, 1)
		again := make(chan time.Time, 1)
		h := func(_ context.Context, m *core.Message[string]) error {
			if m.Attempt() == 1 {
				defer func() { returned <- time.Now() }()
				return core.RetryAfter(delay)
			}
			again <- time.Now()
			return nil
		}
		if err := core.Subscribe(r.app, r.queue("work"), h, raw); err != nil {
			t.Fatal(err)
		}
		acks := r.acks(r.stream("work"), r.stream("work"))
		r.mustStart()
		r.publish("work", "m1", nil)
		t0 := <-returned
		if got := nextAck(t, acks, coretest.WaitTimeout); got != `-NAK {"delay": 1200000000}` {
			t.Fatalf("acknowledgement %q; want -NAK with a delay of 1.2s in nanoseconds", got)
		}
		select {
		case t1 := <-again:
			if waited := t1.Sub(t0); waited < delay || waited > delay+2*time.Second {
				t.Fatalf("delivered again %v after the handler returned RetryAfter(%v)", waited, delay)
			}
		case <-time.After(delay + coretest.WaitTimeout):
			t.Fatal("never delivered again")
		}
		s := r.rec.WaitSettled(2)
		if s[1].Delivery.Attempt() != 2 || s[1].Verdict.Action != core.ActAck {
			t.Fatalf("second settlement %v at attempt %d", s[1].Verdict, s[1].Delivery.Attempt())
		}
	})
}

// TestOutcomeFrames: each verdict sends its JetStream acknowledgement, read off the ack subject.
func TestOutcomeFrames(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		outcomes := map[string]error{"ack": nil, "drop": core.Drop(), "retry": core.Retry()}
		h := func(_ context.Context, m *core.Message[string]) error {
			if m.Attempt() > 1 {
				return nil
			}
			return outcomes[m.Payload]
		}
		if err := core.Subscribe(r.app, r.queue("work"), h, raw); err != nil {
			t.Fatal(err)
		}
		acks := r.acks(r.stream("work"), r.stream("work"))
		r.mustStart()
		for _, body := range []string{"ack", "drop", "retry"} {
			r.publish("work", body, nil)
			want := map[string]string{"ack": "+ACK", "drop": "+TERM", "retry": "-NAK"}[body]
			if got := nextAck(t, acks, coretest.WaitTimeout); got != want {
				t.Fatalf("%s sent %q; want %q", body, got, want)
			}
		}
		if got := nextAck(t, acks, coretest.WaitTimeout); got != "+ACK" { // the retried one, again
			t.Fatalf("redelivered retry sent %q", got)
		}
	})
}

// TestDeadLetterCarriesCountAndReason: the copy in the dead-letter stream has the final count,
// the origin, the time and the handler's cause as headers, beside the original's own headers,
// and a message id derived from the original's stream sequence.
func TestDeadLetterCarriesCountAndReason(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		cause := errors.New("issuer refused: card 4000 blocked")
		h := func(context.Context, *core.Message[string]) error { return core.Retry().Because(cause) }
		if err := core.Subscribe(r.app, r.queue("work"), h, raw, core.DeadLetterAfter(2, r.subject("work.dead"))); err != nil {
			t.Fatal(err)
		}
		r.mustStart()
		before := time.Now().UTC().Add(-time.Second)
		r.publish("work", "m1", map[string]string{"tenant": "acme"})
		s := r.rec.WaitSettled(2)
		if s[1].Verdict.Action != core.ActDeadLetter || s[1].Err != nil {
			t.Fatalf("second settlement %v (err %v); want a stored dead letter", s[1].Verdict, s[1].Err)
		}
		ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
		defer cancel()
		dead, err := r.admin.takeAtLeast(ctx, r.stream("work.dead"), r.subject("work.dead"), 1)
		if err != nil {
			t.Fatal(err)
		}
		h0 := dead[0].Headers
		if len(dead) != 1 || string(dead[0].Body) != "m1" {
			t.Fatalf("dead letters %+v", dead)
		}
		if h0.Get(core.HeaderRetryCount) != "2" || h0.Get(core.HeaderOrigin) != r.subject("work") || h0.Get("tenant") != "acme" {
			t.Fatalf("dead-letter headers %v", h0)
		}
		if !contains(h0.Get(core.HeaderError), cause.Error()) {
			t.Fatalf("settle-error %q does not carry the cause %q", h0.Get(core.HeaderError), cause)
		}
		at, err := time.Parse(time.RFC3339Nano, h0.Get(core.HeaderDeadAt))
		if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
			t.Fatalf("settle-dead-at %q: %v", h0.Get(core.HeaderDeadAt), err)
		}
		if id := h0.Get(jetstream.MsgIDHeader); id != r.stream("work")+":1" {
			t.Fatalf("dead letter's Nats-Msg-Id %q; want the original's stream and sequence", id)
		}
	})
}

// TestLeaseExtendedWhileHandling: while a handler works, the subscription sends +WPI every
// third of the AckWait on the App's clock (virtual here), and not before.
func TestLeaseExtendedWhileHandling(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		vc := clock.NewVirtual(coretest.Epoch)
		r := newRig(t, url, vc, natsjs.DeclareTopology(true))
		entered, release := make(chan struct{}), make(chan struct{})
		h := func(context.Context, *core.Message[string]) error {
			close(entered)
			<-release
			return nil
		}
		if err := core.Subscribe(r.app, r.queue("work", natsjs.AckWait(9*time.Second)), h, raw); err != nil {
			t.Fatal(err)
		}
		acks := r.acks(r.stream("work"), r.stream("work"))
		r.mustStart()
		r.publish("work", "m1", nil)
		<-entered
		vc.Advance(3*time.Second - time.Millisecond)
		if got := nextAck(t, acks, 200*time.Millisecond); got != "" {
			t.Fatalf("sent %q before a third of the AckWait passed", got)
		}
		for i := range 3 {
			armed := vc.Pending() // the extension's timer among them
			vc.Advance(time.Millisecond)
			if got := nextAck(t, acks, coretest.WaitTimeout); got != "+WPI" {
				t.Fatalf("extension %d: sent %q; want +WPI", i+1, got)
			}
			// The loop arms its timer again after sending: the clock moves on only then (under
			// load the test used to advance first, and the next extension fell past the test).
			ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
			err := vc.BlockUntil(ctx, armed)
			cancel()
			if err != nil {
				t.Fatalf("extension %d: the extension timer was not armed again: %v", i+1, err)
			}
			vc.Advance(3*time.Second - time.Millisecond)
		}
		close(release)
		if got := nextAck(t, acks, coretest.WaitTimeout); got != "+ACK" {
			t.Fatalf("settled with %q", got)
		}
		vc.Advance(3 * time.Second)
		if got := nextAck(t, acks, 200*time.Millisecond); got != "" {
			t.Fatalf("a settled delivery was extended: %q", got)
		}
	})
}

// TestDeadLetterNotStoredIsHeldThenReturned: when the dead-letter copy is not stored (no stream
// captures the subject any more), the original is not terminated; it is held for a doubling
// backoff on the clock, returned with -NAK, and moved once the copy can be stored. The failure
// is logged once at error level for the run.
func TestDeadLetterNotStoredIsHeldThenReturned(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		vc := clock.NewVirtual(coretest.Epoch)
		r := newRig(t, url, vc, natsjs.DeclareTopology(true), natsjs.DeadLetterBackoff(100*time.Millisecond, time.Second))
		h := func(context.Context, *core.Message[string]) error { return core.Retry() }
		if err := core.Subscribe(r.app, r.queue("work"), h, raw, core.DeadLetterAfter(1, r.subject("work.dead"))); err != nil {
			t.Fatal(err)
		}
		acks := r.acks(r.stream("work"), r.stream("work"))
		r.mustStart()
		ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
		defer cancel()
		if err := r.admin.js.DeleteStream(ctx, r.stream("work.dead")); err != nil {
			t.Fatalf("delete the dead-letter stream: %v", err)
		}
		r.publish("work", "m1", nil)
		for i, wait := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
			s := r.rec.WaitSettled(i + 1)[i]
			if s.Verdict.Action != core.ActDeadLetter || !errors.Is(s.Err, natsjs.ErrDeadLetterNotStored) {
				t.Fatalf("settlement %d: %v, err %v; want a dead letter not stored", i+1, s.Verdict, s.Err)
			}
			vc.Advance(wait - time.Millisecond)
			if got := nextAck(t, acks, 200*time.Millisecond); got != "" {
				t.Fatalf("failure %d: sent %q before the backoff of %v passed", i+1, got, wait)
			}
			if i == 1 { // the destination is back before the third delivery
				if _, err := r.admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: r.stream("work.dead"), Subjects: []string{r.subject("work.dead")}}); err != nil {
					t.Fatal(err)
				}
			}
			vc.Advance(time.Millisecond)
			if got := nextAck(t, acks, coretest.WaitTimeout); got != "-NAK" {
				t.Fatalf("failure %d: after the backoff sent %q; want -NAK", i+1, got)
			}
		}
		s := r.rec.WaitSettled(3)[2]
		if s.Verdict.Action != core.ActDeadLetter || s.Err != nil || s.Delivery.Attempt() != 3 {
			t.Fatalf("third settlement %v at attempt %d, err %v", s.Verdict, s.Delivery.Attempt(), s.Err)
		}
		if got := nextAck(t, acks, coretest.WaitTimeout); got != "+TERM" {
			t.Fatalf("after the stored dead letter sent %q; want +TERM", got)
		}
		dead, err := r.admin.takeAtLeast(ctx, r.stream("work.dead"), r.subject("work.dead"), 1)
		if err != nil || len(dead) != 1 || dead[0].Headers.Get(core.HeaderRetryCount) != "3" {
			t.Fatalf("dead letters %+v, %v; want one with count 3", dead, err)
		}
		if n := len(r.logs.Find("nats: dead-letter copy not stored; the message is held, then delivered again")); n != 1 {
			t.Fatalf("logged the failure %d times; want once for the run", n)
		}
	})
}

// TestMaxDeliveriesAdvisoryLogged: the server's backstop stops a message at MaxDeliver and
// publishes an advisory, which the subscription logs with the stream, consumer and sequence.
func TestMaxDeliveriesAdvisoryLogged(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		h := func(context.Context, *core.Message[string]) error { return core.Retry() }
		if err := core.Subscribe(r.app, r.queue("work", natsjs.MaxDeliver(2)), h, raw); err != nil {
			t.Fatal(err)
		}
		r.mustStart()
		r.publish("work", "m1", nil)
		r.rec.WaitSettled(2)
		recs := waitLog(t, r.logs, "nats: the server stopped delivering a message: it reached the consumer's MaxDeliver; it stays in the stream, stranded, until an operator moves it (settle stranded repair)")
		a := recs[0].Attrs
		if a["stream"] != r.stream("work") || a["consumer"] != r.stream("work") || a["stream_seq"] != uint64(1) || a["deliveries"] != int64(2) {
			t.Fatalf("advisory logged with %v", a)
		}
		if a["queue"] != r.subject("work") || a["message_id"] != r.stream("work")+":1" || a["attempt"] != int64(2) {
			t.Fatalf("advisory log lacks queue, message_id, attempt: %v", a)
		}
	})
}

// TestUnconfirmedAcks runs the conformance suite with batched, unconfirmed acks (the default,
// double acks, runs in TestTransport).
func TestUnconfirmedAcks(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Env {
		return transporttest.Env{Backend: newBackend(t, embedded.URL(), natsjs.UnconfirmedAcks()), Clock: clock.Real(), Features: transporttest.Features{CountsAtTake: true}}
	})
}

// TestPublishDedupeAndHeaders: a second publish with the same message id is dropped by the
// stream; headers arrive; the delivery's ID is the message id.
func TestPublishDedupeAndHeaders(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		ids := make(chan string, 2)
		h := func(_ context.Context, m *core.Message[map[string]int]) error {
			ids <- m.ID() + " " + m.Headers()["tenant"] + " " + strconv.Itoa(m.Payload["cents"])
			return nil
		}
		if err := core.Subscribe(r.app, r.queue("work"), h); err != nil {
			t.Fatal(err)
		}
		r.mustStart()
		ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
		defer cancel()
		for i, wantDup := range []bool{false, true} {
			ack, err := natsjs.Publish(ctx, r.conn, r.subject("work"), map[string]int{"cents": 500},
				natsjs.WithMsgID("refund-42"), natsjs.WithHeaders(map[string]string{"tenant": "acme"}))
			if err != nil {
				t.Fatal(err)
			}
			if ack.Duplicate != wantDup || ack.Stream != r.stream("work") {
				t.Fatalf("publish %d: %+v", i+1, ack)
			}
		}
		if got := <-ids; got != "refund-42 acme 500" {
			t.Fatalf("delivered %q", got)
		}
		r.rec.WaitSettled(1)
		pub := natsjs.OutboxPublisher(r.conn, "refunds-outbox-")
		for range 2 {
			if err := pub.Publish(ctx, r.subject("work"), []byte(`{"cents":7}`), map[string]string{"settle-outbox-id": "9"}); err != nil {
				t.Fatal(err)
			}
		}
		if got := <-ids; got != "refunds-outbox-9  7" {
			t.Fatalf("relayed %q", got)
		}
		r.stop()
		if s := r.rec.Settlements(); len(s) != 2 {
			t.Fatalf("%d deliveries; want 2 (each duplicate dropped by the stream)", len(s))
		}
	})
}

// TestLeaseCoversWaitingMessages: a fetched message waiting for a free worker is extended like
// those being handled, so slow handlers do not let it lapse. Two workers and four messages in
// the stream: the first fetch takes m1 and m2; m1 is acked at once, its worker fetches m3 and
// m4, takes m3 and blocks like m2's; m4 waits.
func TestLeaseCoversWaitingMessages(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		vc := clock.NewVirtual(coretest.Epoch)
		r := newRig(t, url, vc)
		declareWorkQueue(t, r, "work", jetstream.ConsumerConfig{AckWait: 9 * time.Second})
		for _, b := range []string{"m1", "m2", "m3", "m4"} {
			r.publish("work", b, nil)
		}
		entered, release := make(chan string, 4), make(chan struct{})
		h := func(_ context.Context, m *core.Message[string]) error {
			if m.Payload == "m1" {
				return nil
			}
			entered <- m.Payload
			<-release
			return nil
		}
		if err := core.Subscribe(r.app, r.queue("work", natsjs.AckWait(9*time.Second)), h, raw, core.Workers(2)); err != nil {
			t.Fatal(err)
		}
		acks := r.acks(r.stream("work"), r.stream("work"))
		r.mustStart()
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock) // before the App stops, should the test fail early
		<-entered
		<-entered
		// Wait until the server has delivered m4 and taken m1's ack (its account of pending
		// acknowledgements: m2, m3, m4).
		ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
		defer cancel()
		for {
			c, err := r.admin.js.Consumer(ctx, r.stream("work"), r.stream("work"))
			if err != nil {
				t.Fatal(err)
			}
			if c.CachedInfo().NumAckPending == 3 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the server has %d deliveries pending; want 3", c.CachedInfo().NumAckPending)
			case <-time.After(10 * time.Millisecond):
			}
		}
		// The client takes m4 off the wire a moment after the server counts it delivered: give
		// the loop up to three periods to extend all three.
		seen := map[string]bool{}
		for tick := 0; tick < 3 && len(seen) < 3; tick++ {
			vc.Advance(3 * time.Second)
			for {
				m, err := acks.NextMsg(500 * time.Millisecond)
				if err != nil {
					break
				}
				switch string(m.Data) {
				case "+WPI":
					seen[m.Subject] = true
				case "+ACK": // m1's
				default:
					t.Fatalf("sent %q while the handlers still work", m.Data)
				}
			}
		}
		if len(seen) != 3 {
			t.Fatalf("+WPI for %d distinct deliveries; want the two handled and the one waiting", len(seen))
		}
		unblock()
		r.rec.WaitSettled(4)
	})
}
