package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// replySetup is a harness whose "refunds" handler replies a Payout to "payouts", a queue of the
// same in-memory broker (whose Finisher publishes replies with the ack), and one to "ledger", a
// target core publishes to itself.
type replySetup struct {
	h       *coretest.Harness
	payouts *core.Publisher[Payout]
	ledger  *core.Publisher[Payout]
	tgt     *recordingTarget
}

func newReplySetup(t *testing.T) *replySetup {
	h := coretest.New(t)
	payouts, err := core.NewPublisher[Payout](h.Broker.Queue("payouts"))
	if err != nil {
		t.Fatal(err)
	}
	tgt := &recordingTarget{queue: "ledger", clock: h.Clock}
	ledger, err := core.NewPublisher[Payout](tgt)
	if err != nil {
		t.Fatal(err)
	}
	return &replySetup{h: h, payouts: payouts, ledger: ledger, tgt: tgt}
}

// replyBoth replies to both targets, then returns what the refund's card asks for.
func (s *replySetup) replyBoth(ctx context.Context, m *core.Message[Refund]) error {
	if err := s.payouts.Reply(ctx, Payout{Refund: m.Payload.ID, Cents: 100}); err != nil {
		return err
	}
	if err := s.ledger.Reply(ctx, Payout{Refund: m.Payload.ID, Cents: 100}, core.CorrelationID(m.Payload.ID)); err != nil {
		return err
	}
	switch m.Payload.Card {
	case "retry":
		return core.Retry()
	case "drop":
		return core.Drop()
	case "fail":
		return errors.New("card declined")
	}
	return nil
}

func TestRepliesArePublishedOnAckOnly(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	coretest.Subscribe(h, "refunds", s.replyBoth, core.Replies(s.payouts, s.ledger), core.DeadLetterAfter(2, "refunds.dead"))
	h.Start()
	for _, card := range []string{"retry", "drop", "fail"} {
		h.Publish("refunds", Refund{ID: "r-" + card, Card: card})
	}
	h.WaitSettled(5) // retry→retry→dead letter, drop, fail→retry
	if n := len(h.Broker.Messages("payouts")) + len(s.tgt.messages()); n != 0 {
		t.Fatalf("%d replies published without an ack", n)
	}
	if n := len(h.Logs.Find("settle: replies discarded: the message was not acknowledged")); n != 5 {
		t.Fatalf("%d debug lines for discarded replies, want 5", n)
	}

	ack := h.Publish("refunds", Refund{ID: "r-ok"})
	var settled core.Settlement
	for _, st := range h.WaitFor(func(all []core.Settlement) bool { return len(h.Recorder.Verdicts(ack)) == 1 }) {
		if st.Delivery.ID() == ack {
			settled = st
		}
	}
	sub := core.Subscription{Name: "refunds", Queue: "refunds"}
	if settled.Verdict.Action != core.ActAck || len(settled.Verdict.Replies) != 1 {
		t.Fatalf("ack verdict %v with %d replies, want the broker's own reply in it", settled.Verdict, len(settled.Verdict.Replies))
	}
	r := settled.Verdict.Replies[0]
	if r.Target.Queue() != "payouts" || r.Message.ID != core.ReplyID(sub, settled.Delivery, 0) {
		t.Fatalf("reply %s to %s, want id %s", r.Message.ID, r.Target.Queue(), core.ReplyID(sub, settled.Delivery, 0))
	}
	got := coretest.RequirePublished(t, h.Broker, "payouts", func(p Payout) bool { return p.Refund == "r-ok" })
	if got.ID != r.Message.ID {
		t.Fatalf("published id %s, want %s", got.ID, r.Message.ID)
	}
	ledger := s.tgt.messages()
	if len(ledger) != 1 || ledger[0].ID != core.ReplyID(sub, settled.Delivery, 1) || ledger[0].CorrelationID != "r-ok" {
		t.Fatalf("ledger replies %+v, want one with the second reply id", ledger)
	}
}

// finishSpy wraps an endpoint's finisher to look at the world when Finish is called.
type finishSpy struct {
	core.Endpoint
	finish func(d core.Delivery, v core.Verdict) (core.Verdict, error)
}

func (e finishSpy) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := e.Endpoint.Open(ctx, sub)
	return src, spyFinisher{fin, e.finish}, err
}

type spyFinisher struct {
	fin    core.Finisher
	finish func(d core.Delivery, v core.Verdict) (core.Verdict, error)
}

// Finish performs the verdict finish returns; an error it returns fails the settlement, which the
// inner finisher performs as an abandon.
func (f spyFinisher) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	v2, err := f.finish(d, v)
	if err != nil {
		f.fin.Finish(ctx, d, core.Verdict{Action: core.ActAbandon}, func(core.Delivery, core.Verdict, error) { settled(d, v, err) })
		return
	}
	f.fin.Finish(ctx, d, v2, settled)
}

// A Reply through a publisher the subscription did not declare fails the handler, naming both.
func TestReplyThroughAnUndeclaredPublisher(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	coretest.Subscribe(h, "refunds", s.replyBoth, core.Replies(s.ledger), core.OnError(core.PolicyDrop))
	h.Start()
	id := h.Publish("refunds", Refund{ID: "r-1"})
	h.WaitSettled(1)
	v := h.Verdicts(id)[0]
	if v.Action != core.ActDrop || v.Cause == nil ||
		!strings.Contains(v.Cause.Error(), `settle: Reply to "payouts" from subscription "refunds", which does not declare it`) {
		t.Fatalf("verdict %v, cause %v", v, v.Cause)
	}
	if n := len(s.tgt.messages()); n != 0 {
		t.Fatalf("%d replies published for a failed handler", n)
	}
}

// The replies core publishes are confirmed before Finish is called with the ack; a crash between
// the two (here: a failed settlement) publishes them again, with the same ids, on the redelivery.
func TestRepliesRepublishedWithSameIDs(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	var finishes atomic.Int32
	ep := finishSpy{Endpoint: h.Broker.Queue("refunds"), finish: func(d core.Delivery, v core.Verdict) (core.Verdict, error) {
		n := finishes.Add(1)
		if got := len(s.tgt.messages()); got != int(n) {
			t.Errorf("Finish(ack) #%d called with %d replies published, want %d (published before the ack)", n, got, n)
		}
		if n == 1 {
			return v, errors.New("connection lost") // the ack fails: the message comes back
		}
		return v, nil
	}}
	ledgerOnly := func(ctx context.Context, m *core.Message[Refund]) error {
		return s.ledger.Reply(ctx, Payout{Refund: m.Payload.ID})
	}
	if err := core.Subscribe(h.App, ep, ledgerOnly, core.Replies(s.ledger)); err != nil {
		t.Fatal(err)
	}
	h.Start()
	id := h.Publish("refunds", Refund{ID: "r-1"})
	h.WaitSettled(2)
	if got := h.Actions(id); len(got) != 2 || got[0] != core.ActAck || got[1] != core.ActAck {
		t.Fatalf("actions %v", got)
	}
	sent := s.tgt.messages()
	if len(sent) != 2 || sent[0].ID != sent[1].ID || sent[0].ID == "" {
		t.Fatalf("replies %+v, want the same one twice with one id", sent)
	}
	if n := len(h.Logs.Find("settle: settlement failed; the message returns as an abandoned one")); n != 1 {
		t.Fatalf("%d settlement failures logged", n)
	}
}

func TestReplyFailureTakesTheErrorPolicy(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	refused := errors.New("queue full")
	s.tgt.receipt = func(int, core.Outgoing) core.Receipt { return core.Receipt{Err: refused} }
	coretest.Subscribe(h, "refunds", s.replyBoth, core.Replies(s.payouts, s.ledger), core.DeadLetterAfter(2, "refunds.dead"))
	h.Start()
	id := h.Publish("refunds", Refund{ID: "r-1"})
	h.WaitSettled(2)
	vs := h.Verdicts(id)
	if vs[0].Action != core.ActRetry || vs[1].Action != core.ActDeadLetter {
		t.Fatalf("verdicts %v, want retry then dead letter (the default policy, then the cap)", vs)
	}
	var re *core.ReplyError
	if !errors.As(vs[0].Cause, &re) || !errors.Is(vs[0].Cause, refused) || re.Queue != "ledger" || re.ID == "" {
		t.Fatalf("cause %#v", vs[0].Cause)
	}
	if len(vs[0].Replies) != 0 || len(h.Broker.Messages("payouts")) != 0 {
		t.Fatal("the replies of a message whose reply failed were kept")
	}
	if dead := h.DeadLetters("refunds.dead"); len(dead) != 1 || !strings.Contains(dead[0].Headers[core.HeaderError], "queue full") {
		t.Fatalf("dead letters %+v", dead)
	}
	warn := h.Logs.Find("settle: publishing a reply failed; the message is not acknowledged and its replies are discarded")
	if len(warn) != 2 || warn[0].Attrs["message_id"] != id || warn[0].Attrs["queue"] != "refunds" {
		t.Fatalf("warnings %+v", warn)
	}
}

func TestReplyDelayRunsFromTheAck(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	coretest.Subscribe(h, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		return s.payouts.Reply(ctx, Payout{Refund: m.Payload.ID}, core.Delay(time.Hour), core.MessageID("p-1"))
	}, core.Replies(s.payouts))
	h.Start()
	h.Publish("refunds", Refund{ID: "r-1"})
	h.WaitSettled(1)
	held := h.Broker.Scheduled("payouts")
	if len(held) != 1 || held[0].ID != "p-1" || !held[0].NotBefore.Equal(coretest.Epoch.Add(time.Hour)) {
		t.Fatalf("scheduled %+v", held)
	}
}

func TestReplyMisuse(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	ctx := context.Background()
	if err := s.payouts.Reply(ctx, Payout{}); err == nil ||
		!strings.Contains(err.Error(), `settle: Reply to "payouts" outside a handler`) {
		t.Fatalf("outside a handler: %v", err)
	}
	late := make(chan context.Context, 1)
	coretest.Subscribe(h, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		if err := s.payouts.Reply(ctx, Payout{}, core.Priority(1000)); err == nil || !strings.Contains(err.Error(), "core.Priority(1000)") {
			t.Errorf("invalid option: %v", err)
		}
		late <- ctx
		return nil
	}, core.Replies(s.payouts))
	h.Start()
	id := h.Publish("refunds", Refund{})
	h.WaitSettled(1)
	if err := s.payouts.Reply(<-late, Payout{}); err == nil ||
		err.Error() != `settle: Reply to "payouts" after the handler of subscription "refunds" returned (message `+id+`)` {
		t.Fatalf("after the handler: %v", err)
	}
	if n := len(h.Broker.Messages("payouts")); n != 0 {
		t.Fatalf("%d replies published", n)
	}

	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	var none *core.Publisher[Payout]
	for _, c := range []struct {
		opt  core.Option
		want string
	}{
		{core.Replies(nil), "core.Replies: publisher 0 is nil"},
		{core.Replies(none), "core.Replies: publisher 0 is nil"},
		{core.Replies(s.payouts, s.payouts), `core.Replies: the publisher to "payouts" is given twice`},
	} {
		err := core.Subscribe(app, h.Broker.Queue("x"), func(context.Context, *core.Message[Refund]) error { return nil }, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Subscribe: %v, want %q", err, c.want)
		}
	}
}

// A reply still being published when the App's shutdown timeout passes abandons the delivery.
func TestReplyPublishStoppedByShutdown(t *testing.T) {
	h := coretest.New(t)
	tgt := &blockingTarget{recordingTarget: recordingTarget{queue: "ledger", clock: h.Clock}, entered: make(chan struct{})}
	ledger, _ := core.NewPublisher[Payout](tgt)
	coretest.Subscribe(h, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		return ledger.Reply(ctx, Payout{})
	}, core.Replies(ledger))
	h.Start()
	id := h.Publish("refunds", Refund{})
	<-tgt.entered
	armed := h.Clock.Pending()
	stopped := make(chan struct{})
	go func() { h.Stop(); close(stopped) }()
	if err := h.Clock.BlockUntil(context.Background(), armed+1); err != nil {
		t.Fatal(err)
	}
	h.Advance(time.Minute) // the harness's shutdown timeout: handlers' contexts are cancelled
	<-stopped
	if got := h.Actions(id); len(got) != 1 || got[0] != core.ActAbandon {
		t.Fatalf("actions %v, want abandon", got)
	}
	if m := h.Broker.Messages("refunds"); len(m) != 1 || m[0].ID != id {
		t.Fatalf("queue holds %+v, want the message back", m)
	}
}

// blockingTarget's sender waits for its context to end.
type blockingTarget struct {
	recordingTarget
	entered chan struct{}
}

func (t *blockingTarget) Sender(ctx context.Context) (core.Sender, error) {
	return blockingSender{t}, nil
}

type blockingSender struct{ t *blockingTarget }

func (s blockingSender) Clock() clock.Clock { return s.t.clock }

func (s blockingSender) Send(ctx context.Context, msgs []core.Outgoing) []core.Receipt {
	close(s.t.entered)
	<-ctx.Done()
	rs := make([]core.Receipt, len(msgs))
	for i := range rs {
		rs[i].Err = ctx.Err()
	}
	return rs
}

func TestReplyID(t *testing.T) {
	sub := core.Subscription{Name: "refunds", Queue: "refunds"}
	id := core.ReplyID(sub, fakeDelivery("17"), 0)
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("ReplyID %q, want 32 hex digits", id)
	}
	if again := core.ReplyID(sub, fakeDelivery("17"), 0); again != id {
		t.Fatalf("ReplyID not stable: %s, %s", id, again)
	}
	seen := map[string]string{id: "base"}
	for name, other := range map[string]string{
		"another position":     core.ReplyID(sub, fakeDelivery("17"), 1),
		"another delivery":     core.ReplyID(sub, fakeDelivery("18"), 0),
		"another subscription": core.ReplyID(core.Subscription{Name: "refunds-2", Queue: "refunds"}, fakeDelivery("17"), 0),
		"another queue":        core.ReplyID(core.Subscription{Name: "refunds", Queue: "refunds-eu"}, fakeDelivery("17"), 0),
		"no separator mix-up":  core.ReplyID(core.Subscription{Name: "refunds1", Queue: "refunds"}, fakeDelivery("7"), 0),
	} {
		if prev, ok := seen[other]; ok {
			t.Errorf("%s gives the id of %s", name, prev)
		}
		seen[other] = name
	}
}

// fakeDelivery is a delivery with an id only.
type fakeDelivery string

func (d fakeDelivery) ID() string                 { return string(d) }
func (d fakeDelivery) Attempt() int               { return 1 }
func (d fakeDelivery) Body() []byte               { return nil }
func (d fakeDelivery) Headers() map[string]string { return nil }

// Replies of concurrent handlers go to their own deliveries, on both paths.
func TestRepliesWithConcurrentWorkers(t *testing.T) {
	s := newReplySetup(t)
	h := s.h
	coretest.Subscribe(h, "refunds", s.replyBoth, core.Replies(s.payouts, s.ledger), core.Workers(4))
	h.Start()
	const total = 50
	for i := range total {
		h.Publish("refunds", Refund{ID: "r-" + strconv.Itoa(i)})
	}
	h.WaitSettled(total)
	payouts := map[string]bool{}
	for _, m := range h.Broker.Messages("payouts") {
		payouts[m.ID] = true
	}
	ledger := map[string]bool{}
	for _, m := range s.tgt.messages() {
		ledger[m.ID] = true
		if string(m.Body) != `{"refund":"`+m.CorrelationID+`","cents":100}` {
			t.Errorf("ledger reply %s for %s", m.Body, m.CorrelationID)
		}
	}
	if len(payouts) != total || len(ledger) != total {
		t.Fatalf("%d payouts and %d ledger replies with distinct ids, want %d each", len(payouts), len(ledger), total)
	}
}

// BenchmarkDispatchWithReply is BenchmarkDispatch's raw single-worker case with one reply per
// message to a queue of the same in-memory broker (published with the ack): what declaring and
// producing a reply adds per message.
func BenchmarkDispatchWithReply(b *testing.B) {
	clk := clock.NewVirtual(coretest.Epoch)
	queues := coretest.NewBroker(clk, nil)
	app := core.New(core.WithClock(clk), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	app.Register(queues)
	replies, err := core.NewPublisher[[]byte](queues.Queue("out"), core.PublishCodec(core.Raw))
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	target := int64(b.N)
	err = core.Subscribe(app, queues.Queue("q"), func(ctx context.Context, m *core.Message[[]byte]) error {
		if err := replies.Reply(ctx, m.Payload); err != nil {
			return err
		}
		if done.Add(1) == target {
			close(finished)
		}
		return nil
	}, core.WithCodec(core.Raw), core.Replies(replies))
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		queues.Publish("q", []byte("r-1"), nil)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { ran <- app.Run(ctx) }()
	<-finished
	b.StopTimer()
	stop()
	<-ran
}
