package main

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// summaryLine returns the summary line of ref.
func summaryLine(summary, ref string) string {
	for _, l := range strings.Split(summary, "\n") {
		if strings.HasPrefix(l, ref+" ") {
			return l
		}
	}
	return ""
}

// checkAMQPDemo asserts where every sample ended and what the dead-letter readers logged.
func checkAMQPDemo(t *testing.T, summary string, logs *coretest.Logs, n Names) {
	t.Helper()
	want := map[string]string{
		"r-ok-1": "1  refunded", "r-ok-2": "1  refunded",
		"r-closed-1": "1  declined, dropped", "r-closed-2": "1  declined, dropped",
		"r-busy-1": "5  dead letter (" + n.RefundsDead + ")", "r-busy-2": "5  dead letter (" + n.RefundsDead + ")",
		"r-down-1": "5  dead letter (" + n.RefundsDead + ")", "r-down-2": "5  dead letter (" + n.RefundsDead + ")",
		"p-ok-1": "1  paid out", "p-closed-1": "1  declined, dropped",
		"p-busy-1": "5  dead letter (" + n.PayoutsDead + ")", "p-down-1": "5  dead letter (" + n.PayoutsDead + ")",
	}
	for ref, w := range want {
		if line := summaryLine(summary, ref); !strings.HasSuffix(line, w) {
			t.Errorf("summary line for %s = %q; want it to end %q\n%s", ref, line, w, summary)
		}
	}
	refunds := logs.Find("dead letter: refund gave up")
	payouts := logs.Find("dead letter: payout gave up")
	if len(refunds) != 4 || len(payouts) != 2 {
		t.Fatalf("dead letters logged: %d refunds, %d payouts; want 4 and 2", len(refunds), len(payouts))
	}
	for _, r := range append(refunds, payouts...) {
		if r.Attrs["attempts"] != int64(MaxAttempts) || strings.Contains(r.Attrs["ref"].(string), "closed") {
			t.Errorf("dead letter %v logged attempts %v; want %d", r.Attrs["ref"], r.Attrs["attempts"], MaxAttempts)
		}
	}
	for _, r := range payouts {
		reason, _ := r.Attrs["reason"].(string)
		if r.Attrs["origin"] != n.Payouts || !strings.Contains(reason, "at attempt 5 of 5") {
			t.Errorf("payout dead letter %v: from %v because %q", r.Attrs["ref"], r.Attrs["origin"], reason)
		}
	}
}

// TestAMQPDemoInProcess runs the RabbitMQ demo on the in-process RabbitMQ with a virtual clock:
// whenever something waits on the clock (a busy refund's copy in refunds.retry), the clock jumps
// to it, so the backoffs pass without waiting — until the App logs that it is stopping: from
// then on the only timer is the shutdown timeout, and jumping to it would cut the shutdown
// short before the last acknowledgements and the channel close reach the broker.
func TestAMQPDemoInProcess(t *testing.T) {
	vc := clock.NewVirtual(epoch)
	mem := amqptest.NewBroker(vc)
	logs := &coretest.Logs{}
	var out bytes.Buffer
	cfg := Config{Backoff: 100 * time.Millisecond}
	ran := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		ran <- RunAMQP(context.Background(), cfg, mem.Dial, &out, slog.New(logs), core.WithClock(vc))
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	go func() {
		<-done
		cancel()
	}()
	for {
		if err := vc.BlockUntil(ctx, 1); err != nil {
			break // the demo ended (or the wait ran out: Run's result says which)
		}
		// The App logs "stopping" before it arms the shutdown timeout, so a waiter seen here
		// after that line may be the timeout itself.
		if len(logs.Find("settle: stopping")) > 0 {
			break
		}
		if due, ok := vc.NextDue(); ok {
			vc.AdvanceTo(due)
		}
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("RunAMQP: %v", err)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("the demo did not finish; so far:\n%s", out.String())
	}
	checkAMQPDemo(t, out.String(), logs, NamesWith(""))
	// Busy refunds' copies waited in refunds.retry on the clock (core.Backoff draws each delay
	// below its bound: their sum has no fixed floor; TestAMQPServeStepByStep checks each one).
	if elapsed := vc.Now().Sub(epoch); elapsed <= 0 {
		t.Errorf("the demo took %v of virtual time; busy refunds should have waited in refunds.retry", elapsed)
	}
	for _, q := range []string{Queue, Queue + amqp.RetrySuffix, DeadQueue, PayoutQueue, PayoutDeadQueue} {
		if info, ok := mem.Queue(q); !ok || info.Ready+info.Unacked != 0 {
			t.Errorf("queue %s: %+v (exists %v)", q, info, ok)
		}
	}
	if args := mem.QueueArgs(PayoutQueue); args["x-queue-type"] != "quorum" || args["x-dead-letter-routing-key"] != PayoutDeadQueue {
		t.Errorf("payouts declared with %v", args)
	}
}

// TestAMQPServeStepByStep serves on the in-process RabbitMQ and publishes with the publish
// subcommand's function: Advance(backoff) releases a busy refund's copy from refunds.retry and
// not a millisecond earlier; a down refund is in refunds.dead after five deliveries with
// settle-retry-count 5; a down payout is in payouts.dead after five deliveries, moved by the
// quorum queue; a closed refund and payout end in neither.
func TestAMQPServeStepByStep(t *testing.T) {
	vc := clock.NewVirtual(epoch)
	mem := amqptest.NewBroker(vc)
	logs := &coretest.Logs{}
	rec := coretest.NewRecorder(t)
	base := 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	serving := &signalWriter{wrote: make(chan struct{})}
	go func() {
		ran <- RunAMQP(ctx, Config{Backoff: base, Serve: true}, mem.Dial, serving, slog.New(logs),
			core.WithClock(vc), core.WithObserver(rec.Observe))
	}()
	select {
	case <-serving.wrote:
	case err := <-ran:
		t.Fatalf("RunAMQP: %v", err)
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the service did not start")
	}
	publish := func(queue, ref, card string) {
		t.Helper()
		if err := PublishOne(ctx, mem.Dial, queue, Refund{Ref: ref, Card: card, Cents: 100}); err != nil {
			t.Fatal(err)
		}
	}
	of := func(id, queue string) []core.Settlement {
		var out []core.Settlement
		for _, s := range rec.Settlements() {
			if s.Delivery.ID() == id && s.Queue == queue {
				out = append(out, s)
			}
		}
		return out
	}
	waitOf := func(id, queue string, n int) []core.Settlement {
		t.Helper()
		rec.WaitFor(func([]core.Settlement) bool { return len(of(id, queue)) >= n })
		return of(id, queue)
	}

	publish(Queue, "r-busy", "busy-1")
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		s := waitOf("r-busy", Queue, attempt)
		if attempt == MaxAttempts {
			if v := s[attempt-1].Verdict; v.Action != core.ActDeadLetter || v.Dest != DeadQueue {
				t.Fatalf("fifth delivery: %v", v)
			}
			break
		}
		// The Policy (core.Backoff) drew the delay from [0, base·2ⁿ⁻¹]; the waiting queue holds
		// the copy for it, in whole milliseconds rounded up.
		v := s[attempt-1].Verdict
		if limit := min(base<<(attempt-1), MaxBackoff(base)); v.Action != core.ActRetryAfter || v.Delay < 0 || v.Delay > limit {
			t.Fatalf("attempt %d: %v; want retry_after within [0, %v]", attempt, v, limit)
		}
		wait := max(v.Delay.Round(time.Millisecond), time.Millisecond)
		if wait < v.Delay {
			wait += time.Millisecond
		}
		parked := mem.Messages(Queue + amqp.RetrySuffix)
		if len(parked) != 1 || parked[0].Expiration != strconv.FormatInt(wait.Milliseconds(), 10) ||
			parked[0].Headers[amqp.RetryCountHeader] != strconv.Itoa(attempt) {
			t.Fatalf("attempt %d: refunds.retry holds %+v", attempt, parked)
		}
		vc.Advance(wait - time.Millisecond)
		if len(mem.Messages(Queue)) != 0 || len(mem.Messages(Queue+amqp.RetrySuffix)) != 1 {
			t.Fatalf("attempt %d: the copy left refunds.retry before its backoff of %v", attempt, wait)
		}
		vc.Advance(time.Millisecond)
	}
	if d := waitOf("r-busy", DeadQueue, 1)[0].Delivery; d.Headers()[amqp.RetryCountHeader] != "5" {
		t.Fatalf("busy refund in refunds.dead with headers %v", d.Headers())
	}

	publish(Queue, "r-down", "down-1")
	publish(PayoutQueue, "p-down", "down-2")
	publish(Queue, "r-closed", "closed-1")
	publish(PayoutQueue, "p-closed", "closed-2")
	// Settlements of copies are reported when their acknowledgement goes out, which may be after
	// the dead letter's reader has already seen the message: wait for both.
	waitOf("r-down", Queue, 5)
	if d := waitOf("r-down", DeadQueue, 1)[0].Delivery; d.Headers()[amqp.RetryCountHeader] != "5" || len(of("r-down", Queue)) != 5 {
		t.Fatalf("down refund: %d deliveries, in refunds.dead with headers %v", len(of("r-down", Queue)), d.Headers())
	}
	waitOf("p-down", PayoutDeadQueue, 1)
	waitOf("p-down", PayoutQueue, 5)
	if s := of("p-down", PayoutQueue); len(s) != 5 || s[4].Delivery.Attempt() != 5 {
		t.Fatalf("down payout: %d deliveries before payouts.dead", len(s))
	}
	for _, c := range [][2]string{{"r-closed", Queue}, {"p-closed", PayoutQueue}} {
		s := waitOf(c[0], c[1], 1)
		if len(s) != 1 || s[0].Verdict.Action != core.ActDrop {
			t.Fatalf("%s: %v", c[0], s)
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("RunAMQP: %v", err)
	}
	for _, id := range []string{"r-closed", "p-closed"} {
		if len(of(id, DeadQueue))+len(of(id, PayoutDeadQueue)) != 0 {
			t.Errorf("%s reached a dead letter", id)
		}
	}
	for _, q := range []string{Queue, DeadQueue, PayoutQueue, PayoutDeadQueue} {
		if info, _ := mem.Queue(q); info.Ready != 0 {
			t.Errorf("%s holds %d", q, info.Ready)
		}
	}
	byRef := map[string]int64{}
	for _, r := range append(logs.Find("dead letter: refund gave up"), logs.Find("dead letter: payout gave up")...) {
		byRef[r.Attrs["ref"].(string)] = r.Attrs["attempts"].(int64)
	}
	if byRef["r-busy"] != 5 || byRef["r-down"] != 5 || byRef["p-down"] != 5 || len(byRef) != 3 {
		t.Errorf("dead letters logged with attempts %v", byRef)
	}
}

// TestAMQPDemoRabbitMQ runs the demo once on the real RabbitMQ with a 10ms backoff, on queues of
// its own (a prefix), deleted afterwards.
func TestAMQPDemoRabbitMQ(t *testing.T) {
	url := coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	dial := amqp.URL(url)
	admin, err := dial()
	if err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ", url+" (SETTLE_TEST_AMQP_URL)", err)
	}
	prefix := "settle-example-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	n := NamesWith(prefix)
	t.Cleanup(func() {
		defer admin.Close()
		ch, err := admin.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		for _, q := range []string{n.Refunds, n.Refunds + amqp.RetrySuffix, n.RefundsDead, n.Payouts, n.PayoutsDead} {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
	})
	logs := &coretest.Logs{}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*coretest.WaitTimeout)
	defer cancel()
	if err := RunAMQP(ctx, Config{Backoff: 10 * time.Millisecond, Prefix: prefix}, dial, &out, slog.New(logs)); err != nil {
		t.Fatalf("RunAMQP: %v\n%s", err, out.String())
	}
	checkAMQPDemo(t, out.String(), logs, n)
	t.Logf("RabbitMQ:\n%s", out.String())
}

// signalWriter closes wrote on the first write: the service printed that it serves.
type signalWriter struct {
	once  sync.Once
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.wrote) })
	return len(p), nil
}
