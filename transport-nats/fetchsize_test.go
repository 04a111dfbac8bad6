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
	return r.spy("$JS.API.CONSUMER.MSG.NEXT." + stream + "." + durable)
}

// nextPull returns the batch of the next pull request the spy sees within d (0: none came).
func nextPull(t *testing.T, sub *nats.Subscription, d time.Duration) int {
	t.Helper()
	m, err := sub.NextMsg(d)
	if err != nil {
		return 0
	}
	var req struct {
		Batch int `json:"batch"`
	}
	if err := json.Unmarshal(m.Data, &req); err != nil {
		t.Fatalf("pull request %q: %v", m.Data, err)
	}
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

// drain starts the App, publishes n messages to name and waits until they are settled.
func (r *rig) drain(name string, n int) {
	r.t.Helper()
	r.mustStart() // declares the stream, when declaring
	r.publishMany(name, n)
	r.rec.WaitSettled(n)
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
// queue is empty and its requests expire with nothing, comes back down to the worker count.
func TestFetchSizeAdapts(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const n = 3000
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		q := r.queue("work", natsjs.FetchWait(100*time.Millisecond))
		if err := core.Subscribe(r.app, q, func(context.Context, *core.Message[string]) error { return nil }, raw); err != nil {
			t.Fatal(err)
		}
		pulls := r.pulls(r.stream("work"), r.stream("work"))
		r.drain("work", n)
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
		// Idle now: each request expires with nothing, and the next asks for half as many.
		last := top
		deadline := time.Now().Add(coretest.WaitTimeout)
		for last > 1 {
			b := nextPull(t, pulls, time.Until(deadline))
			if b == 0 {
				t.Fatalf("the pull requests did not come down to one message within %v (last %d)", coretest.WaitTimeout, last)
			}
			if b > last {
				t.Fatalf("an idle subscription's pull request grew from %d to %d", last, b)
			}
			last = b
		}
	})
}

// TestFetchBatchFixesTheSize: FetchBatch(n) asks for n messages in every pull request, however
// fast the handlers are.
func TestFetchBatchFixesTheSize(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const n, batch = 200, 7
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		q := r.queue("work", natsjs.FetchBatch(batch))
		if err := core.Subscribe(r.app, q, func(context.Context, *core.Message[string]) error { return nil }, raw); err != nil {
			t.Fatal(err)
		}
		pulls := r.pulls(r.stream("work"), r.stream("work"))
		r.drain("work", n)
		sizes := allPulls(t, pulls)
		for i, b := range sizes {
			if b != batch {
				t.Fatalf("pull request %d asked for %d messages; want %d (FetchBatch)", i+1, b, batch)
			}
		}
		if len(sizes) < n/batch {
			t.Fatalf("%d pull requests of %d for %d messages", len(sizes), batch, n)
		}
	})
}

// TestFetchSizeWithinConsumerLimits: on an existing consumer whose MaxRequestBatch is 5, the
// automatic size never asks for more (the server would refuse the request), even with more
// workers than that, and the subscription drains the queue.
func TestFetchSizeWithinConsumerLimits(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		const n, limit = 300, 5
		r := newRig(t, url, clock.Real())
		ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
		defer cancel()
		if _, err := r.admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: r.stream("work"), Subjects: []string{r.subject("work")},
			Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.admin.js.CreateConsumer(ctx, r.stream("work"), jetstream.ConsumerConfig{Durable: r.stream("work"),
			AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: r.subject("work"), MaxRequestBatch: limit}); err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error { return nil },
			raw, core.Workers(8)); err != nil {
			t.Fatal(err)
		}
		pulls := r.pulls(r.stream("work"), r.stream("work"))
		r.drain("work", n)
		for i, b := range allPulls(t, pulls) {
			if b > limit {
				t.Fatalf("pull request %d asked for %d messages; the consumer's MaxRequestBatch is %d", i+1, b, limit)
			}
		}
		if failed := r.logs.Find("settle: taking the next delivery failed; trying again"); len(failed) > 0 {
			t.Fatalf("fetches failed: %v", failed[0])
		}
	})
}
