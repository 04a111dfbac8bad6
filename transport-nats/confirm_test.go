package natsjs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// replyMsg is a delivery's message as far as a confirmation uses it: its ack subject.
type replyMsg struct {
	jetstream.Msg
	reply string
}

func (m replyMsg) Reply() string { return m.reply }

type confirmResult struct {
	d   core.Delivery
	err error
}

// The confirmations of one subscription share its reply inbox and one timer: each is reported
// by the answer to its own token, by "no responders", by its deadline, by its context's end or
// by a dropped connection, exactly once, and leaves nothing waiting behind. The inbox is under the
// connection's inbox prefix. A delivery of the
// same sequence while one waits gets the frame again, and that answer confirms it.
func TestConfirmations(t *testing.T) {
	srv := natstest.New(t)
	conn, err := New(srv.URL(), WithLogger(slog.New(slog.DiscardHandler)), NATSOptions(nats.CustomInboxPrefix("_SETTLE_TEST")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	nc, err := conn.NATS()
	if err != nil {
		t.Fatal(err)
	}
	// "answer" answers like the server's ack subject; "silent" never does (a server that forgot
	// the delivery); "none" has no subscriber: the server says "no responders".
	frames := make(chan string, 16)
	if _, err := nc.Subscribe("ack.answer", func(m *nats.Msg) { frames <- string(m.Data); _ = m.Respond(nil) }); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("ack.silent", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := &consumer{c: conn, nc: nc, cfg: &queueConfig{stream: "s", confirmAcks: true}, log: slog.New(slog.DiscardHandler)}
	if err := c.listen(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.cf.inbox, "_SETTLE_TEST.") { // the connection's inbox prefix (permissions)
		t.Fatalf("reply inbox %q: want the connection's custom prefix", c.cf.inbox)
	}
	results := make(chan confirmResult, 16)
	settled := func(d core.Delivery, _ core.Verdict, err error) { results <- confirmResult{d, err} }
	seq := uint64(0)
	deliver := func(reply string) *Delivery {
		seq++
		d := &Delivery{msg: replyMsg{reply: reply}, attempt: 1, seq: seq, key: seqKey{"s", seq}, src: c}
		if c.inHand(d, d.key, d.msg) {
			t.Fatalf("sequence %d already in hand", seq)
		}
		return d
	}
	wait := func(d *Delivery, within time.Duration) error {
		t.Helper()
		select {
		case r := <-results:
			if r.d != d {
				t.Fatalf("settled %v; want %v", r.d.ID(), d.ID())
			}
			return r.err
		case <-time.After(within):
			t.Fatalf("sequence %d not reported within %v", d.seq, within)
			return nil
		}
	}
	ack := core.Verdict{Action: core.ActAck}
	ctx := context.Background()

	conn.timeout = 10 * time.Second
	d := deliver("ack.answer")
	c.confirmed(ctx, d, ack, settled, "ack", ackFrame)
	if err := wait(d, 5*time.Second); err != nil {
		t.Fatalf("answered ack: %v", err)
	}
	if f := <-frames; f != "+ACK" {
		t.Fatalf("frame %q", f)
	}
	if _, ok := c.recent.get(d.key); !ok {
		t.Error("an answered ack is not remembered as settled")
	}

	d = deliver("ack.none")
	c.confirmed(ctx, d, core.Verdict{Action: core.ActDrop}, settled, "+TERM", termFrame)
	if err := wait(d, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) || errors.Is(err, ErrSettlementUnknown) {
		t.Fatalf("+TERM without responders: %v; want ErrNoResponders, a failure (not unknown: nothing applied it)", err)
	}

	// Sent on a delivery that is not answered, then again on the sequence's new delivery, which
	// is: confirmed long before the deadline.
	d = deliver("ack.silent")
	c.confirmed(ctx, d, ack, settled, "ack", ackFrame)
	if !c.inHand(&Delivery{msg: replyMsg{reply: "ack.answer"}, attempt: 2, seq: d.seq, key: d.key, src: c}, d.key, replyMsg{reply: "ack.answer"}) {
		t.Fatal("a delivery of a sequence in hand was handed out")
	}
	if err := wait(d, 5*time.Second); err != nil {
		t.Fatalf("ack sent again on the new delivery: %v", err)
	}
	<-frames

	conn.timeout = 300 * time.Millisecond
	d = deliver("ack.silent")
	start := time.Now()
	c.confirmed(ctx, d, ack, settled, "ack", ackFrame)
	if err := wait(d, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrSettlementUnknown) || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("unanswered ack after %v: %v; want DeadlineExceeded after 300ms, reported unknown", time.Since(start), err)
	}

	conn.timeout = time.Minute
	cctx, cancel := context.WithCancel(ctx)
	d = deliver("ack.silent")
	c.confirmed(cctx, d, ack, settled, "ack", ackFrame)
	cancel()
	if err := wait(d, 5*time.Second); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrSettlementUnknown) {
		t.Fatalf("ack whose context ended: %v; want Canceled, reported unknown (it was sent)", err)
	}
	d = deliver("ack.silent")
	c.confirmed(cctx, d, ack, settled, "ack", ackFrame)
	if err := wait(d, 5*time.Second); !errors.Is(err, context.Canceled) || errors.Is(err, ErrSettlementUnknown) {
		t.Fatalf("ack given an ended context: %v; want Canceled, a failure (it was not sent)", err)
	}

	// A caller passing a context of its own to every settlement: each is watched while its
	// confirmation waits, and no longer once it is answered.
	for range 5 {
		pctx, pcancel := context.WithCancel(ctx)
		d = deliver("ack.answer")
		c.confirmed(pctx, d, ack, settled, "ack", ackFrame)
		if err := wait(d, 5*time.Second); err != nil {
			t.Fatalf("answered ack under its own context: %v", err)
		}
		<-frames
		pcancel()
	}
	// Two waiting under one context are both failed by its end, and its watch goes with them.
	cctx, cancel = context.WithCancel(ctx)
	d1, d2 := deliver("ack.silent"), deliver("ack.silent")
	c.confirmed(cctx, d1, ack, settled, "ack", ackFrame)
	c.confirmed(cctx, d2, ack, settled, "ack", ackFrame)
	c.flyMu.Lock()
	watched := len(c.cf.watched)
	c.flyMu.Unlock()
	if watched != 1 {
		t.Fatalf("%d contexts watched for two confirmations under one; want 1", watched)
	}
	cancel()
	for range 2 {
		select {
		case r := <-results:
			if !errors.Is(r.err, context.Canceled) || (r.d != d1 && r.d != d2) {
				t.Fatalf("settled %v: %v; want one of the two Canceled", r.d.ID(), r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the two confirmations under an ended context were not failed")
		}
	}
	c.flyMu.Lock()
	watched = len(c.cf.watched)
	c.flyMu.Unlock()
	if watched != 0 {
		t.Fatalf("%d contexts still watched with no confirmation waiting; want 0", watched)
	}

	d = deliver("ack.silent")
	c.confirmed(ctx, d, ack, settled, "ack", ackFrame)
	c.disconnected()
	if err := wait(d, 5*time.Second); err == nil || !strings.Contains(err.Error(), "connection dropped") || !errors.Is(err, ErrSettlementUnknown) {
		t.Fatalf("ack waiting when the connection dropped: %v; want it reported unknown", err)
	}

	c.flyMu.Lock()
	left, head, flights := len(c.cf.pending), c.cf.head, len(c.flights)
	c.flyMu.Unlock()
	if left != 0 || head != nil || flights != 0 {
		t.Fatalf("%d confirmations still waiting (head %v), %d messages in hand", left, head, flights)
	}
	select {
	case r := <-results:
		t.Fatalf("reported again: %v %v", r.d.ID(), r.err)
	default:
	}
	c.closeConfirmer()
	if c.cf.sub != nil {
		t.Error("the inbox is still subscribed after Close with nothing waiting")
	}
}
