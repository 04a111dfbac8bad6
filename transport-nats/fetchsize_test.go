package natsjs_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// pulls spies on the pull requests of stream/durable's consumer: they are requests on an
// ordinary subject, which any client of the account can listen to.
func (r *rig) pulls(stream, durable string) *nats.Subscription {
	r.t.Helper()
	return r.admin.pulls(r.t, stream, durable)
}

// pulls spies, on a's connection, on the pull requests of stream/durable's consumer.
func (a *admin) pulls(t *testing.T, stream, durable string) *nats.Subscription {
	t.Helper()
	return a.spy(t, "$JS.API.CONSUMER.MSG.NEXT."+stream+"."+durable)
}

// pullRequest is what a pull request asks the server for.
type pullRequest struct {
	Batch   int   `json:"batch"`
	Expires int64 `json:"expires"` // how long it waits on the server, in nanoseconds
}

// nextPullRequest returns the next pull request the spy sees within d (false: none came).
func nextPullRequest(t *testing.T, sub *nats.Subscription, d time.Duration) (pullRequest, bool) {
	t.Helper()
	m, err := sub.NextMsg(d)
	if err != nil {
		return pullRequest{}, false
	}
	var req pullRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		t.Fatalf("pull request %q: %v", m.Data, err)
	}
	return req, true
}

// nextPull returns the batch of the next pull request the spy sees within d (0: none came).
func nextPull(t *testing.T, sub *nats.Subscription, d time.Duration) int {
	t.Helper()
	req, _ := nextPullRequest(t, sub, d)
	return req.Batch
}

// allPulls returns the batches of the pull requests the spy has seen so far, in order: it reads
// until none comes for 10 ms.
func allPulls(t *testing.T, sub *nats.Subscription) []int {
	t.Helper()
	var sizes []int
	for {
		b := nextPull(t, sub, 10*time.Millisecond)
		if b == 0 {
			return sizes
		}
		sizes = append(sizes, b)
	}
}

// publishMany publishes n messages named body-1 … body-n to name, waiting for every ack.
func (r *rig) publishMany(name string, n int) {
	r.t.Helper()
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	for i := 1; i <= n; i++ {
		if _, err := r.admin.js.PublishAsync(r.subject(name), []byte("body-"+strconv.Itoa(i))); err != nil {
			r.t.Fatalf("publish to %s: %v", name, err)
		}
	}
	select {
	case <-r.admin.js.PublishAsyncComplete():
	case <-ctx.Done():
		r.t.Fatalf("publishing %d messages to %s: %v", n, name, ctx.Err())
	}
}

// TestFetchSizeAdapts: a subscription with no FetchBatch starts fetching its worker count, grows
// its fetches while they come back full and are got through fast (a backlog and a no-op
// handler: far fewer pull requests than messages, none above DefaultMaxFetch), and, once the
// queue is empty, asks for one message at a time (the last delivery said nothing was left).
func TestFetchSizeAdapts(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const n = 3000
		r := newRig(t, url, clock.Real())
		declareWorkQueue(t, r, "work", jetstream.ConsumerConfig{})
		r.publishMany("work", n) // a backlog: a pull asks for no more than the stream holds
		q := r.queue("work", natsjs.FetchWait(100*time.Millisecond))
		if err := core.Subscribe(r.app, q, func(context.Context, *core.Message[string]) error { return nil }, raw); err != nil {
			t.Fatal(err)
		}
		pulls := r.pulls(r.stream("work"), r.stream("work"))
		r.mustStart()
		r.rec.WaitSettled(n)
		sizes := allPulls(t, pulls)
		head := sizes[:min(len(sizes), 20)]
		if len(sizes) == 0 || sizes[0] != 1 {
			t.Fatalf("pull requests %v…; want the first for one message (the worker count)", head)
		}
		top := 0
		for _, b := range sizes {
			top = max(top, b)
		}
		if top < 100 || top > natsjs.DefaultMaxFetch {
			t.Fatalf("largest pull request %d of %d (first %v); want it grown past 100, at most %d", top, len(sizes), head, natsjs.DefaultMaxFetch)
		}
		if len(sizes) > n/20 {
			t.Fatalf("%d pull requests for %d messages: the fetches did not grow (first %v)", len(sizes), n, head)
		}
		idleAtOne(t, pulls)
	})
}

// idleAtOne checks that the pull requests of a subscription whose queue has just been drained
// come down to one message each and stay there (three in a row, each expiring after its
// FetchWait): nothing waits in the stream, and a message another subscription's crash returns
// is then fetched alone. The first may still be for the whole size: the last fetch of the
// drain came back full, and the request after it waits only flowWait.
func idleAtOne(t *testing.T, pulls *nats.Subscription) {
	t.Helper()
	var seen []int
	for ones := 0; ones < 3; {
		b := nextPull(t, pulls, coretest.WaitTimeout)
		if b == 0 {
			t.Fatalf("no pull request within %v of an idle subscription (saw %v)", coretest.WaitTimeout, seen)
		}
		seen = append(seen, b)
		switch {
		case b == 1:
			ones++
		case len(seen) > 1:
			t.Fatalf("idle pull requests %v; want them down to one message each after at most one (the stream holds none)", seen)
		}
	}
}

// TestFetchBatchFixesTheSize: FetchBatch(n) asks for n messages in every pull request while
// messages flow, however fast the handlers are; once the stream is empty, for one.
func TestFetchBatchFixesTheSize(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const n, batch = 200, 7
		r := newRig(t, url, clock.Real())
		declareWorkQueue(t, r, "work", jetstream.ConsumerConfig{})
		r.publishMany("work", n)
		q := r.queue("work", natsjs.FetchBatch(batch), natsjs.FetchWait(100*time.Millisecond))
		if err := core.Subscribe(r.app, q, func(context.Context, *core.Message[string]) error { return nil }, raw); err != nil {
			t.Fatal(err)
		}
		pulls := r.pulls(r.stream("work"), r.stream("work"))
		r.mustStart()
		r.rec.WaitSettled(n)
		sizes := allPulls(t, pulls)
		full := (n + batch - 1) / batch // the last of them comes back with what is left
		if len(sizes) < full {
			t.Fatalf("pull requests %v for %d messages; want at least %d of %d", sizes, n, full, batch)
		}
		for i, b := range sizes[:full] {
			if b != batch {
				t.Fatalf("pull request %d asked for %d messages; want %d (FetchBatch): %v", i+1, b, batch, sizes)
			}
		}
		for i, b := range sizes[full:] {
			if b != 1 && (i > 0 || b != batch) {
				t.Fatalf("pull request %d asked for %d messages with the stream empty; want 1: %v", full+1+i, b, sizes)
			}
		}
		idleAtOne(t, pulls)
	})
}

// declareWorkQueue creates the stream and durable consumer of r's queue name as an operator
// would (explicit acks, filtered on its subject), with cfg's other fields.
func declareWorkQueue(t *testing.T, r *rig, name string, cfg jetstream.ConsumerConfig) {
	t.Helper()
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	if _, err := r.admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: r.stream(name), Subjects: []string{r.subject(name)},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	cfg.Durable, cfg.AckPolicy, cfg.FilterSubject = r.stream(name), jetstream.AckExplicitPolicy, r.subject(name)
	if _, err := r.admin.js.CreateConsumer(ctx, r.stream(name), cfg); err != nil {
		t.Fatal(err)
	}
}

// TestFetchSizeWithinConsumerLimits: on an existing consumer whose MaxRequestBatch is 5, the
// automatic size never asks for more (the server would refuse the request), even with more
// workers than that, and the subscription drains the queue.
func TestFetchSizeWithinConsumerLimits(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const n, limit = 300, 5
		r := newRig(t, url, clock.Real())
		declareWorkQueue(t, r, "work", jetstream.ConsumerConfig{MaxRequestBatch: limit})
		r.publishMany("work", n)
		if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error { return nil },
			raw, core.Workers(8)); err != nil {
			t.Fatal(err)
		}
		pulls := r.pulls(r.stream("work"), r.stream("work"))
		r.mustStart()
		r.rec.WaitSettled(n)
		top := 0
		for i, b := range allPulls(t, pulls) {
			if b > limit {
				t.Fatalf("pull request %d asked for %d messages; the consumer's MaxRequestBatch is %d", i+1, b, limit)
			}
			top = max(top, b)
		}
		if top != limit {
			t.Fatalf("the largest pull request asked for %d messages; want %d (8 workers, a backlog of %d)", top, limit, n)
		}
		if failed := r.logs.Find("settle: taking the next delivery failed; trying again"); len(failed) > 0 {
			t.Fatalf("fetches failed: %v", failed[0])
		}
	})
}
