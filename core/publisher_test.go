package core_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// recordingTarget is a core.Target that records what core hands its Sender.
type recordingTarget struct {
	queue    string
	clock    clock.Clock
	opens    atomic.Int32
	failOpen atomic.Int32 // fail this many opens first
	// receipt answers each message; nil: accepted with id "id-<n>".
	receipt func(n int, m core.Outgoing) core.Receipt
	// short drops the last receipt of every Send (a broken backend).
	short bool

	mu   sync.Mutex
	sent []core.Outgoing
}

func (t *recordingTarget) Queue() string { return t.queue }

func (t *recordingTarget) Sender(ctx context.Context) (core.Sender, error) {
	t.opens.Add(1)
	if t.failOpen.Load() > 0 {
		t.failOpen.Add(-1)
		return nil, errors.New("connection refused")
	}
	return recordingSender{t}, nil
}

type recordingSender struct{ t *recordingTarget }

func (s recordingSender) Clock() clock.Clock { return s.t.clock }

func (s recordingSender) Send(ctx context.Context, msgs []core.Outgoing) []core.Receipt {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	rs := make([]core.Receipt, 0, len(msgs))
	for _, m := range msgs {
		n := len(s.t.sent)
		s.t.sent = append(s.t.sent, m)
		if err := m.Options.Unread("recording " + strconv.Quote(s.t.queue)); err != nil {
			rs = append(rs, core.Receipt{Err: err})
			continue
		}
		if s.t.receipt != nil {
			rs = append(rs, s.t.receipt(n, m))
		} else {
			rs = append(rs, core.Receipt{ID: "id-" + strconv.Itoa(n)})
		}
	}
	if s.t.short {
		rs = rs[:len(rs)-1]
	}
	return rs
}

func (t *recordingTarget) messages() []core.Outgoing {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]core.Outgoing(nil), t.sent...)
}

func newTarget(queue string) (*recordingTarget, *clock.Virtual) {
	v := clock.NewVirtual(coretest.Epoch)
	return &recordingTarget{queue: queue, clock: v}, v
}

// traceProp injects a fixed traceparent.
type traceProp string

func (p traceProp) Inject(_ context.Context, h map[string]string) { h["traceparent"] = string(p) }

func TestPublishHandsTheSenderResolvedOptions(t *testing.T) {
	tgt, clk := newTarget("refunds")
	pub, err := core.NewPublisher[Refund](tgt)
	if err != nil {
		t.Fatal(err)
	}
	ctx := core.ContextWithPropagator(context.Background(), traceProp("00-abc-01"))
	r, err := pub.Publish(ctx, Refund{ID: "r-1", Card: "4242"},
		core.MessageID("r-1"), core.CorrelationID("req-9"), core.OrderingKey("cust-7"), core.DedupKey("d-1"),
		core.Headers(map[string]string{"tenant": "acme"}), core.Delay(time.Minute), core.Priority(7))
	if err != nil || r.ID != "id-0" {
		t.Fatalf("Publish = %+v, %v", r, err)
	}
	sent := tgt.messages()
	if len(sent) != 1 {
		t.Fatalf("%d messages sent", len(sent))
	}
	m := sent[0]
	if m.ID != "r-1" || m.CorrelationID != "req-9" || m.OrderingKey != "cust-7" || m.DedupKey != "d-1" || m.Priority != 7 ||
		m.ContentType != "application/json" || string(m.Body) != `{"id":"r-1","card":"4242"}` || m.Options == nil {
		t.Fatalf("outgoing %+v", m)
	}
	if want := map[string]string{"tenant": "acme", "traceparent": "00-abc-01"}; !maps.Equal(m.Headers, want) {
		t.Fatalf("headers %v, want %v", m.Headers, want)
	}
	if want := clk.Now().Add(time.Minute); !m.NotBefore.Equal(want) {
		t.Fatalf("NotBefore %v, want %v (Delay on the sender's clock)", m.NotBefore, want)
	}

	// No option: nothing set, no headers map.
	if _, err := pub.Publish(context.Background(), Refund{ID: "r-2"}); err != nil {
		t.Fatal(err)
	}
	m = tgt.messages()[1]
	if m.ID != "" || m.Headers != nil || !m.NotBefore.IsZero() || m.Priority != 0 {
		t.Fatalf("outgoing without options %+v", m)
	}
	// NotBefore in the future is kept; one already past is zero (deliver at once).
	at := clk.Now().Add(time.Hour)
	pub.Publish(context.Background(), Refund{}, core.NotBefore(at))
	pub.Publish(context.Background(), Refund{}, core.NotBefore(clk.Now().Add(-time.Hour)))
	pub.Publish(context.Background(), Refund{}, core.Delay(0))
	sent = tgt.messages()
	if !sent[2].NotBefore.Equal(at) || !sent[3].NotBefore.IsZero() || !sent[4].NotBefore.IsZero() {
		t.Fatalf("NotBefore %v, %v, %v", sent[2].NotBefore, sent[3].NotBefore, sent[4].NotBefore)
	}
}

func TestPublisherOptions(t *testing.T) {
	tgt, _ := newTarget("refunds")
	pub, err := core.NewPublisher[string](tgt, core.PublishCodec(core.Raw), core.PublishPropagator(traceProp("00-def-01")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(context.Background(), "hello", core.Header("traceparent", "kept")); err != nil {
		t.Fatal(err)
	}
	m := tgt.messages()[0]
	if string(m.Body) != "hello" || m.ContentType != "application/octet-stream" || m.Headers["traceparent"] != "kept" {
		t.Fatalf("outgoing %+v (a header the caller set is kept)", m)
	}
	pub.Publish(context.Background(), "again")
	if h := tgt.messages()[1].Headers; h["traceparent"] != "00-def-01" {
		t.Fatalf("headers %v, want the publisher's propagator's", h)
	}
	if pub.Target() != tgt {
		t.Fatal("Target() is not the target")
	}

	for _, c := range []struct {
		target core.Target
		opts   []core.PublisherOption
		want   string
	}{
		{nil, nil, "core.NewPublisher: nil target"},
		{tgt, []core.PublisherOption{core.PublishCodec(nil)}, `core.NewPublisher to "refunds": core.PublishCodec(nil): no codec`},
		{tgt, []core.PublisherOption{core.PublishPropagator(nil)}, `core.NewPublisher to "refunds": core.PublishPropagator(nil): no propagator`},
		{tgt, []core.PublisherOption{nil}, `core.NewPublisher to "refunds": option 0 is nil`},
	} {
		if _, err := core.NewPublisher[Refund](c.target, c.opts...); err == nil || err.Error() != c.want {
			t.Errorf("NewPublisher: %v, want %q", err, c.want)
		}
	}
}

func TestPublishRefusals(t *testing.T) {
	tgt, _ := newTarget("refunds")
	tgt.receipt = func(n int, m core.Outgoing) core.Receipt {
		if m.Priority > 0 {
			return core.Receipt{Err: &core.UnsupportedError{Option: "core.Priority", Backend: `recording "refunds"`, Instead: "leave it out"}}
		}
		return core.Receipt{ID: strconv.Itoa(n)}
	}
	pub, _ := core.NewPublisher[Refund](tgt)
	ctx := context.Background()
	// Core refuses an invalid option before the sender is opened.
	if _, err := pub.Publish(ctx, Refund{}, core.Delay(-time.Second)); err == nil ||
		err.Error() != `settle: publish to "refunds": core.Delay(-1s): the delay is negative` {
		t.Fatalf("invalid option: %v", err)
	}
	if n := tgt.opens.Load(); n != 0 {
		t.Fatalf("the sender was opened %d times for a refused message", n)
	}
	// The backend refuses an option it cannot honour: an error, matching ErrUnsupported.
	r, err := pub.Publish(ctx, Refund{}, core.Priority(3))
	if !errors.Is(err, core.ErrUnsupported) || r.Err != err {
		t.Fatalf("unsupported option: %+v, %v", r, err)
	}
	// An option of another backend is refused by the sender that does not read it.
	foreign := core.PublishOptionFunc(func(o *core.PublishOptions) error {
		o.SetExt(struct{ k int }{1}, "other.InTx(tx)", 1)
		return nil
	})
	if _, err := pub.Publish(ctx, Refund{}, foreign); !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "other.InTx(tx)") {
		t.Fatalf("foreign option: %v", err)
	}
	// A payload that does not encode.
	bad, _ := core.NewPublisher[func()](tgt)
	if _, err := bad.Publish(ctx, func() {}); err == nil || !strings.Contains(err.Error(), `settle: publish to "refunds": encode func()`) {
		t.Fatalf("unencodable payload: %v", err)
	}
	// A sender that answers the wrong number of receipts is an error, not a panic.
	tgt.short = true
	if _, err := pub.Publish(ctx, Refund{}); err == nil || !strings.Contains(err.Error(), "returned 0 receipts for 1 messages") {
		t.Fatalf("short receipts: %v", err)
	}
}

// The sender is opened at the first publish, once; a failure to open is that publish's error and
// the next one tries again.
func TestSenderOpenedLazilyOnce(t *testing.T) {
	tgt, _ := newTarget("refunds")
	tgt.failOpen.Store(1)
	pub, _ := core.NewPublisher[Refund](tgt)
	if n := tgt.opens.Load(); n != 0 {
		t.Fatalf("NewPublisher opened the sender %d times", n)
	}
	if _, err := pub.Publish(context.Background(), Refund{}); err == nil ||
		err.Error() != `settle: publish to "refunds": opening its sender: connection refused` {
		t.Fatalf("first publish: %v", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := pub.Publish(context.Background(), Refund{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := tgt.opens.Load(); n != 2 {
		t.Fatalf("Sender called %d times, want 2 (one failure, then once)", n)
	}
	if n := len(tgt.messages()); n != 8 {
		t.Fatalf("%d messages sent, want 8", n)
	}
}

func TestPublishBatch(t *testing.T) {
	tgt, clk := newTarget("refunds")
	pub, _ := core.NewPublisher[Refund](tgt)
	ctx := context.Background()
	rs, err := pub.PublishBatch(ctx, []core.Draft[Refund]{
		{Payload: Refund{ID: "a"}},
		{Payload: Refund{ID: "b"}, Options: []core.PublishOption{core.Priority(-1)}},
		{Payload: Refund{ID: "c"}, Options: []core.PublishOption{core.Delay(time.Minute)}},
	})
	if err != nil || len(rs) != 3 {
		t.Fatalf("PublishBatch = %v, %v", rs, err)
	}
	if rs[0].ID != "id-0" || rs[0].Err != nil || rs[2].ID != "id-1" || rs[2].Err != nil {
		t.Fatalf("receipts %+v", rs)
	}
	if rs[1].Err == nil || !strings.HasPrefix(rs[1].Err.Error(), "draft 1: ") || !strings.Contains(rs[1].Err.Error(), "core.Priority(-1)") {
		t.Fatalf("refused draft: %v", rs[1].Err)
	}
	sent := tgt.messages()
	if len(sent) != 2 || string(sent[0].Body) != `{"id":"a","card":""}` || !sent[1].NotBefore.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("sent %+v", sent)
	}
	if rs, err := pub.PublishBatch(ctx, nil); rs != nil || err != nil {
		t.Fatalf("empty batch: %v, %v", rs, err)
	}
}

// When no draft could be tried (every draft refused, the sender not opened, the context done),
// PublishBatch returns an error and every receipt carries one.
func TestPublishBatchNothingTried(t *testing.T) {
	tgt, _ := newTarget("refunds")
	pub, _ := core.NewPublisher[Refund](tgt)
	ctx := context.Background()
	rs, err := pub.PublishBatch(ctx, []core.Draft[Refund]{{Options: []core.PublishOption{core.MessageID("")}}})
	if err == nil || len(rs) != 1 || rs[0].Err == nil {
		t.Fatalf("every draft refused: %v, %v", rs, err)
	}
	fresh, _ := newTarget("payouts")
	fresh.failOpen.Store(1)
	pub2, _ := core.NewPublisher[Refund](fresh)
	rs, err = pub2.PublishBatch(ctx, []core.Draft[Refund]{{}, {}})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || rs[0].Err != err || rs[1].Err != err {
		t.Fatalf("sender not opened: %v, %v", rs, err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	rs, err = pub.PublishBatch(done, []core.Draft[Refund]{{}})
	if !errors.Is(err, context.Canceled) || !errors.Is(rs[0].Err, context.Canceled) {
		t.Fatalf("context done: %v, %v", rs, err)
	}
	tgt.short = true
	rs, err = pub.PublishBatch(ctx, []core.Draft[Refund]{{}, {}})
	if err == nil || !strings.Contains(err.Error(), "returned 1 receipts for 2 messages") || rs[0].Err == nil {
		t.Fatalf("short receipts: %v, %v", rs, err)
	}
}
