package transporttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// publishing is the Publishing section: core's publish API on the backend.
var publishing = []testCase{
	{"OptionsRoundTrip", publishOptionsRoundTrip},
	{"Refusals", publishRefusals},
	{"BatchOneReceiptPerMessage", publishBatch},
	{"NotBeforeNeverEarly", publishNotBefore},
	{"DedupUnderConcurrentPublishers", publishDedup},
	{"PriorityOrdersBacklog", publishPriority},
	{"RepliesOnAckOnly", repliesOnAckOnly},
	{"RepliesKeepTheirIDsOnRedelivery", repliesSameIDs},
}

// PublishTimeout bounds the publishing of the dedup case's 8,000 messages and the reading back
// of what they stored, on real servers.
var PublishTimeout = 2 * time.Minute

// targeter returns the backend's Targeter, or skips the case.
func targeter(t *testing.T, env Env) Targeter {
	t.Helper()
	tg, ok := env.Backend.(Targeter)
	if !ok {
		t.Skip("the backend does not implement transporttest.Targeter (Target(queue) core.Target): the Publishing section needs it")
	}
	return tg
}

// publisherTo returns a Publisher of raw strings to the logical queue.
func publisherTo(t *testing.T, tg Targeter, queue string) *core.Publisher[string] {
	t.Helper()
	p, err := core.NewPublisher[string](tg.Target(queue), core.PublishCodec(core.Raw))
	if err != nil {
		t.Fatalf("core.NewPublisher to %q: %v", queue, err)
	}
	return p
}

// requireCap skips the case unless the backend declares the capability Supported; a Refused one
// is proven by the Refusals case.
func requireCap(t *testing.T, c Capability, name, does string) {
	t.Helper()
	switch c {
	case Undeclared:
		t.Skipf("Features.Publish.%s is not declared: set it to transporttest.Supported if the backend %s, or to transporttest.Refused if it refuses the option with core.ErrUnsupported",
			name, does)
	case Refused:
		t.Skipf("Features.Publish.%s is Refused: the Refusals case proves the refusal", name)
	}
}

// requireReplies skips the case unless the backend declares reply handlers.
func requireReplies(t *testing.T, env Env) {
	t.Helper()
	switch env.Features.Publish.Replies {
	case Undeclared:
		t.Skip("Features.Publish.Replies is not declared: set it to transporttest.Supported once reply handlers (core.Replies) run on the backend")
	case Refused:
		t.Fatal("Features.Publish.Replies cannot be Refused: a backend with a Target carries replies at least through core's own publishing before the ack; declare it Supported")
	}
}

// hint names the capability a failure is about, and how to declare it otherwise.
func hint(name, cannot string) string {
	return fmt.Sprintf(" (Features.Publish.%s is Supported: declare it transporttest.Refused if the backend cannot %s, and refuse the option with core.ErrUnsupported)", name, cannot)
}

func publishCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// seen is a delivery as a handler of the suite saw it.
type seen struct {
	body, id, correlationID, orderingKey string
	attempt                              int
	headers                              map[string]string
	at                                   time.Time
}

// recorder returns a raw handler that records every delivery it acknowledges, and the records.
func recorder(env Env) (core.Handler[string], func() []seen) {
	var mu sync.Mutex
	var all []seen
	h := func(_ context.Context, m *core.Message[string]) error {
		s := seen{body: m.Payload, id: m.ID(), attempt: m.Attempt(), headers: m.Headers(), at: env.Clock.Now(),
			correlationID: core.CorrelationIDOf(m.Delivery()), orderingKey: core.OrderingKeyOf(m.Delivery())}
		mu.Lock()
		all = append(all, s)
		mu.Unlock()
		return nil
	}
	return h, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(all)
	}
}

func bodiesOf(s []seen) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.body
	}
	return out
}

func publishOptionsRoundTrip(t *testing.T, env Env) {
	tg := targeter(t, env)
	f := env.Features.Publish
	h, got := recorder(env)
	a := start(t, env, h, time.Second, raw)
	pub := publisherTo(t, tg, "work")
	var opts []core.PublishOption
	if f.MessageID == Supported {
		opts = append(opts, core.MessageID("m-options"))
	}
	if f.Headers == Supported {
		opts = append(opts, core.Headers(map[string]string{"tenant": "acme"}), core.Header("region", "eu"))
	}
	if f.CorrelationID == Supported {
		opts = append(opts, core.CorrelationID("req-9"))
	}
	if f.OrderingKey == Supported {
		opts = append(opts, core.OrderingKey("cust-7"))
	}
	ctx := publishCtx(t, coretest.WaitTimeout)
	withOpts, err := pub.Publish(ctx, "with-options", opts...)
	if err != nil {
		t.Fatalf("Publish with %d options: %v", len(opts), err)
	}
	plain, err := pub.Publish(ctx, "plain")
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	a.rec.WaitSettled(2)
	a.stop()
	byBody := map[string]seen{}
	for _, s := range got() {
		byBody[s.body] = s
	}
	checkReceipts(t, []core.Receipt{withOpts, plain}, []seen{byBody["with-options"], byBody["plain"]})
	checkOptions(t, f, byBody["with-options"], byBody["plain"])
}

// checkReceipts checks that each receipt carries the id its message was delivered with.
func checkReceipts(t *testing.T, rs []core.Receipt, s []seen) {
	t.Helper()
	for i, r := range rs {
		if r.ID == "" || r.ID != s[i].id || r.Duplicate {
			t.Errorf("message %q: receipt %+v, delivered with Delivery.ID() %q: a Receipt's ID is the id the message is delivered with",
				s[i].body, r, s[i].id)
		}
	}
}

// checkOptions checks that the options of o reached its handler, and that p, published without
// them, carries none.
func checkOptions(t *testing.T, f PublishFeatures, o, p seen) {
	t.Helper()
	if f.MessageID == Supported && o.id != "m-options" {
		t.Errorf("published with core.MessageID(%q), delivered with Delivery.ID() %q%s", "m-options", o.id, hint("MessageID", "keep a given message id"))
	}
	if f.Headers == Supported && (o.headers["tenant"] != "acme" || o.headers["region"] != "eu") {
		t.Errorf("published with headers tenant=acme, region=eu; the handler saw %v%s", o.headers, hint("Headers", "carry headers"))
	}
	if f.CorrelationID == Supported && (o.correlationID != "req-9" || p.correlationID != "") {
		t.Errorf("correlation ids delivered %q and %q, want %q and none (the delivery implements core.Correlated)%s",
			o.correlationID, p.correlationID, "req-9", hint("CorrelationID", "carry a correlation id"))
	}
	if f.OrderingKey == Supported && (o.orderingKey != "cust-7" || p.orderingKey != "") {
		t.Errorf("ordering keys delivered %q and %q, want %q and none (the delivery implements core.Keyed)%s",
			o.orderingKey, p.orderingKey, "cust-7", hint("OrderingKey", "carry an ordering key"))
	}
}

type foreignKey struct{}

func publishRefusals(t *testing.T, env Env) {
	tg := targeter(t, env)
	f := env.Features.Publish
	h, got := recorder(env)
	a := start(t, env, h, time.Second, raw)
	pub := publisherTo(t, tg, "work")
	ctx := publishCtx(t, coretest.WaitTimeout)
	foreign := core.PublishOptionFunc(func(o *core.PublishOptions) error {
		o.SetExt(foreignKey{}, "transporttest.ForeignOption()", true)
		return nil
	})
	refusals := []struct {
		cap   Capability
		name  string
		opt   core.PublishOption
		names []string // one of which the error names
	}{
		{Refused, "(another backend's option)", foreign, []string{"transporttest.ForeignOption()"}},
		{f.MessageID, "MessageID", core.MessageID("m-refused"), []string{"core.MessageID"}},
		{f.Headers, "Headers", core.Headers(map[string]string{"tenant": "acme"}), []string{"core.Headers", "core.Header"}},
		{f.CorrelationID, "CorrelationID", core.CorrelationID("req-9"), []string{"core.CorrelationID"}},
		{f.OrderingKey, "OrderingKey", core.OrderingKey("cust-7"), []string{"core.OrderingKey"}},
		{f.NotBefore, "NotBefore", core.Delay(time.Hour), []string{"core.Delay", "core.NotBefore"}},
		{f.NotBefore, "NotBefore", core.NotBefore(env.Clock.Now().Add(time.Hour)), []string{"core.NotBefore", "core.Delay"}},
		{f.Dedup, "Dedup", core.DedupKey("d-1"), []string{"core.DedupKey"}},
		{f.Priority, "Priority", core.Priority(5), []string{"core.Priority"}},
	}
	for _, c := range refusals {
		if c.cap != Refused {
			continue
		}
		_, err := pub.Publish(ctx, "refused", c.opt)
		named := err != nil && slices.ContainsFunc(c.names, func(n string) bool { return strings.Contains(err.Error(), n) })
		if !errors.Is(err, core.ErrUnsupported) || !named {
			what := fmt.Sprintf(" (Features.Publish.%s is Refused: declare it Supported if the backend honours it)", c.name)
			if c.name[0] == '(' {
				what = " (an option the backend does not read is refused: PublishOptions.Unread)"
			}
			t.Errorf("publishing with %s: %v; want an error matching core.ErrUnsupported that names the option%s", c.names[0], err, what)
		}
	}
	if _, err := pub.Publish(ctx, "marker"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	a.rec.WaitSettled(1)
	a.stop()
	if b := bodiesOf(got()); !slices.Equal(b, []string{"marker"}) {
		t.Fatalf("delivered %q, want only the marker: a refused message was stored", b)
	}
	if m := drain(t, env, "work"); len(m) != 0 {
		t.Fatalf("the queue holds %d messages after refusals", len(m))
	}
}

func publishBatch(t *testing.T, env Env) {
	tg := targeter(t, env)
	h, got := recorder(env)
	a := start(t, env, h, time.Second, raw)
	pub := publisherTo(t, tg, "work")
	drafts := []core.Draft[string]{
		{Payload: "b0"}, {Payload: "b1"},
		{Payload: "refused", Options: []core.PublishOption{core.MessageID("")}},
		{Payload: "b3"}, {Payload: "b4"},
	}
	if env.Features.Publish.MessageID == Supported {
		drafts[1].Options = []core.PublishOption{core.MessageID("batch-1")}
	}
	rs, err := pub.PublishBatch(publishCtx(t, coretest.WaitTimeout), drafts)
	if err != nil || len(rs) != len(drafts) {
		t.Fatalf("PublishBatch = %d receipts, %v; want %d receipts", len(rs), err, len(drafts))
	}
	if rs[2].Err == nil {
		t.Fatalf("the draft with an empty message id was not refused: %+v", rs[2])
	}
	a.rec.WaitSettled(4)
	a.stop()
	s := got()
	if b := bodiesOf(s); !slices.Equal(b, []string{"b0", "b1", "b3", "b4"}) {
		t.Fatalf("delivered %q, want b0 b1 b3 b4 in order", b)
	}
	for i, j := range []int{0, 1, 3, 4} {
		if rs[j].Err != nil || rs[j].ID == "" || rs[j].ID != s[i].id {
			t.Errorf("draft %d: receipt %+v, delivered with Delivery.ID() %q", j, rs[j], s[i].id)
		}
	}
	if env.Features.Publish.MessageID == Supported && rs[1].ID != "batch-1" {
		t.Errorf("draft 1 published with core.MessageID(%q): receipt id %q%s", "batch-1", rs[1].ID, hint("MessageID", "keep a given message id"))
	}
}

func publishNotBefore(t *testing.T, env Env) {
	tg := targeter(t, env)
	requireCap(t, env.Features.Publish.NotBefore, "NotBefore", "holds messages back with core.Delay and core.NotBefore")
	d := delay(env)
	h, got := recorder(env)
	a := start(t, env, h, time.Second, raw)
	pub := publisherTo(t, tg, "work")
	ctx := publishCtx(t, coretest.WaitTimeout)
	t0 := env.Clock.Now()
	for _, m := range []struct {
		body string
		opt  []core.PublishOption
	}{
		{"delayed", []core.PublishOption{core.Delay(d)}},
		{"not-before", []core.PublishOption{core.NotBefore(t0.Add(d))}},
		{"now", nil},
	} {
		if _, err := pub.Publish(ctx, m.body, m.opt...); err != nil {
			t.Fatalf("Publish %q: %v", m.body, err)
		}
	}
	a.rec.WaitSettled(1)
	if first := bodiesOf(got()); !slices.Equal(first, []string{"now"}) {
		t.Fatalf("delivered %q first, want the message without a delay: a held message was delivered early%s",
			first, hint("NotBefore", "hold messages back"))
	}
	if env.Virtual != nil {
		advance(env, d-time.Millisecond)
		if n := len(a.rec.Settlements()); n != 1 {
			t.Fatalf("%d deliveries %v before the not-before%s", n-1, d-time.Millisecond, hint("NotBefore", "hold messages back"))
		}
		advance(env, time.Millisecond)
	}
	a.rec.WaitSettled(3)
	a.stop()
	for _, s := range got()[1:] {
		if waited := s.at.Sub(t0); waited < d {
			t.Errorf("%q delivered %v after it was published, before its not-before of %v (on the backend's clock)%s",
				s.body, waited, d, hint("NotBefore", "hold messages back"))
		}
	}
}

// hold starts an App whose handler of "work" takes the gate message published through pub and
// keeps it until the App stops, so that whatever is published meanwhile stays pending on the
// queue; release stops the App, abandoning the gate.
func hold(t *testing.T, env Env, tg Targeter) (pub *core.Publisher[string], release func()) {
	t.Helper()
	shutdown := shutdownTimeout(env)
	entered := make(chan struct{}, 1)
	a := start(t, env, func(ctx context.Context, m *core.Message[string]) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}, shutdown, raw)
	pub = publisherTo(t, tg, "work")
	if _, err := pub.Publish(publishCtx(t, coretest.WaitTimeout), "gate"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case <-entered:
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("the gate message was not delivered within %v", coretest.WaitTimeout)
	}
	return pub, func() { stopAbandoning(t, env, a, shutdown) }
}

// drainAll waits until queue has yielded at least n messages (within PublishTimeout), then takes
// whatever else it holds.
func drainAll(t *testing.T, env Env, queue string, n int) []Message {
	t.Helper()
	ctx := publishCtx(t, PublishTimeout)
	m, err := env.Backend.Drain(ctx, queue, n)
	if err != nil {
		t.Fatalf("Drain %q (want %d): %v", queue, n, err)
	}
	rest, err := env.Backend.Drain(ctx, queue, 0)
	if err != nil {
		t.Fatalf("Drain %q: %v", queue, err)
	}
	return append(m, rest...)
}

func publishDedup(t *testing.T, env Env) {
	tg := targeter(t, env)
	requireCap(t, env.Features.Publish.Dedup, "Dedup", "deduplicates with core.DedupKey while a message is pending")
	const publishers, each = 8, 1000
	pub, release := hold(t, env, tg)
	// Every publisher publishes 900 keys of its own and the same 100 shared keys: 8,000
	// publishes, 10% of them duplicates of a pending key, 7,300 unique keys.
	unique := publishers*(each-each/10) + each/10
	ctx := publishCtx(t, PublishTimeout)
	var stored, dups atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for g := range publishers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("k-%d-%d", g, i)
				if i%10 == 0 {
					key = fmt.Sprintf("shared-%d", i/10)
				}
				r, err := pub.Publish(ctx, key, core.DedupKey(key))
				if err != nil {
					errs <- fmt.Errorf("publisher %d, key %s: %w", g, key, err)
					return
				}
				if r.Duplicate {
					dups.Add(1)
				} else {
					stored.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s, d := stored.Load(), dups.Load(); s != int64(unique) || d != int64(publishers*each-unique) {
		t.Errorf("receipts: %d stored, %d duplicates; want %d and %d%s",
			s, d, unique, publishers*each-unique, hint("Dedup", "deduplicate"))
	}
	release()
	count := map[string]int{}
	for _, m := range drainAll(t, env, "work", unique+1) { // and the gate
		count[string(m.Body)]++
	}
	delete(count, "gate")
	var twice []string
	for k, n := range count {
		if n > 1 {
			twice = append(twice, k)
		}
	}
	if len(count) != unique || len(twice) > 0 {
		slices.Sort(twice)
		t.Fatalf("the queue held %d distinct keys, want %d; stored more than once: %d %q%s",
			len(count), unique, len(twice), twice[:min(len(twice), 10)], hint("Dedup", "deduplicate"))
	}
}

func publishPriority(t *testing.T, env Env) {
	tg := targeter(t, env)
	requireCap(t, env.Features.Publish.Priority, "Priority", "orders a backlog by core.Priority")
	pub, release := hold(t, env, tg)
	backlog := []struct {
		body     string
		priority int
	}{{"a0", 0}, {"b1", 1}, {"c5", 5}, {"d0", 0}, {"e5", 5}, {"f9", 9}, {"g1", 1}, {"h9", 9}}
	ctx := publishCtx(t, coretest.WaitTimeout)
	for _, m := range backlog {
		var opts []core.PublishOption
		if m.priority > 0 {
			opts = append(opts, core.Priority(m.priority))
		}
		if _, err := pub.Publish(ctx, m.body, opts...); err != nil {
			t.Fatalf("Publish %q: %v", m.body, err)
		}
	}
	release()
	h, got := recorder(env)
	a := start(t, env, h, time.Second, raw)
	a.rec.WaitSettled(len(backlog) + 1) // and the gate
	a.stop()
	order := slices.DeleteFunc(bodiesOf(got()), func(b string) bool { return b == "gate" })
	if want := []string{"f9", "h9", "c5", "e5", "b1", "g1", "a0", "d0"}; !slices.Equal(order, want) {
		t.Fatalf("backlog delivered %q, want %q: highest priority first, publish order within one%s",
			order, want, hint("Priority", "order by priority"))
	}
}

// replyHandler replies "re:<payload>" through replies, then returns what the payload asks for.
func replyHandler(replies *core.Publisher[string]) core.Handler[string] {
	return func(ctx context.Context, m *core.Message[string]) error {
		if err := replies.Reply(ctx, "re:"+m.Payload); err != nil {
			return err
		}
		switch m.Payload {
		case "retry-then-ack":
			if m.Attempt() == 1 {
				return core.Retry()
			}
		case "drop":
			return core.Drop()
		case "dead":
			return core.Retry()
		}
		return nil
	}
}

func repliesOnAckOnly(t *testing.T, env Env) {
	tg := targeter(t, env)
	requireReplies(t, env)
	a := startApp(t, env, time.Second, func(app *core.App) {
		replies := publisherTo(t, tg, "replies")
		if err := core.Subscribe(app, env.Backend.Endpoint("work"), replyHandler(replies), raw,
			core.Replies(replies), core.DeadLetterAfter(2, deadLetter(env, "work.dead"))); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	})
	pub := publisherTo(t, tg, "work")
	ctx := publishCtx(t, coretest.WaitTimeout)
	for _, body := range []string{"ack", "retry-then-ack", "drop", "dead"} {
		if _, err := pub.Publish(ctx, body); err != nil {
			t.Fatalf("Publish %q: %v", body, err)
		}
	}
	a.rec.WaitSettled(6) // ack; retry, ack; drop; retry, dead letter
	a.stop()
	var got []string
	for _, m := range drainAll(t, env, "replies", 2) {
		got = append(got, string(m.Body))
	}
	slices.Sort(got)
	if want := []string{"re:ack", "re:retry-then-ack"}; !slices.Equal(got, want) {
		t.Fatalf("replies published %q, want %q: one per acknowledged message, none for a retry, drop or dead letter", got, want)
	}
}

func repliesSameIDs(t *testing.T, env Env) {
	tg := targeter(t, env)
	requireReplies(t, env)
	requireCap(t, env.Features.Publish.MessageID, "MessageID", "delivers a message published with core.MessageID with that Delivery.ID() (a reply's id)")
	type attempt struct{ id, replyID string }
	var mu sync.Mutex
	var attempts []attempt
	rh, replies := recorder(env)
	a := startApp(t, env, time.Second, func(app *core.App) {
		pub := publisherTo(t, tg, "replies")
		inner := replyHandler(pub)
		h := func(ctx context.Context, m *core.Message[string]) error {
			sub, _ := core.SubscriptionFrom(ctx)
			mu.Lock()
			attempts = append(attempts, attempt{m.ID(), core.ReplyID(sub, m.Delivery(), 0)})
			mu.Unlock()
			return inner(ctx, m)
		}
		if err := core.Subscribe(app, env.Backend.Endpoint("work"), h, raw, core.Replies(pub)); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if err := core.Subscribe(app, env.Backend.Endpoint("replies"), rh, raw); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	})
	if _, err := publisherTo(t, tg, "work").Publish(publishCtx(t, coretest.WaitTimeout), "retry-then-ack"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	a.rec.WaitSettled(3) // retry, ack, and the reply's ack
	a.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 2 || attempts[0] != attempts[1] {
		t.Fatalf("the two deliveries of one message had ids and reply ids %+v: a redelivered message keeps its id, and so its replies' ids", attempts)
	}
	r := replies()
	if len(r) != 1 || r[0].body != "re:retry-then-ack" || r[0].id != attempts[0].replyID {
		got := make([]string, len(r))
		for i, x := range r {
			got[i] = x.body + " id " + x.id
		}
		t.Fatalf("replies delivered %q, want one with id %s (core.ReplyID)%s", got, attempts[0].replyID, hint("MessageID", "keep a given message id"))
	}
}
