package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// TestTopologyRefusedAtStart: what a subscription needs is checked at start; a missing stream,
// consumer or dead-letter stream, or one with other settings, refuses it with an error naming
// it and the difference, and nothing is created when settle only checks.
func TestTopologyRefusedAtStart(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		type setup func(ctx context.Context, r *rig) error
		stream := func(r *rig, subjects ...string) setup {
			return func(ctx context.Context, r *rig) error {
				_, err := r.admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: r.stream("work"), Subjects: subjects, Retention: jetstream.WorkQueuePolicy})
				return err
			}
		}
		consumer := func(cfg jetstream.ConsumerConfig) setup {
			return func(ctx context.Context, r *rig) error {
				cfg.Durable = r.stream("work")
				_, err := r.admin.js.CreateConsumer(ctx, r.stream("work"), cfg)
				return err
			}
		}
		pull := func(r *rig) jetstream.ConsumerConfig {
			return jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: r.subject("work"), AckWait: 10 * time.Second}
		}
		cases := []struct {
			name    string
			declare bool
			setup   func(r *rig) []setup
			queue   []natsjs.QueueOption
			opts    func(r *rig) []core.Option
			is      error
			want    []string
		}{
			{name: "stream missing", setup: func(*rig) []setup { return nil },
				is: natsjs.ErrNotFound, want: []string{`stream "`, `does not exist`, "DeclareTopology"}},
			{name: "consumer missing", setup: func(r *rig) []setup { return []setup{stream(r, r.subject("work"))} },
				is: natsjs.ErrNotFound, want: []string{`consumer "`, `does not exist`, "durable pull consumer"}},
			{name: "stream does not capture the subject", declare: true,
				setup: func(r *rig) []setup { return []setup{stream(r, r.subject("other"))} },
				is:    natsjs.ErrMismatch, want: []string{"subjects: server", "do not capture the queue's subject"}},
			{name: "ack wait differs", declare: true, queue: []natsjs.QueueOption{natsjs.AckWait(20 * time.Second)},
				setup: func(r *rig) []setup { return []setup{stream(r, r.subject("work")), consumer(pull(r))} },
				is:    natsjs.ErrMismatch, want: []string{"ack_wait: server 10s, declared 20s"}},
			{name: "push consumer", setup: func(r *rig) []setup {
				c := pull(r)
				c.DeliverSubject = r.subject("push")
				return []setup{stream(r, r.subject("work")), func(ctx context.Context, r *rig) error {
					c.Durable = r.stream("work")
					_, err := r.admin.js.CreateOrUpdatePushConsumer(ctx, r.stream("work"), c)
					return err
				}}
			}, is: natsjs.ErrMismatch, want: []string{"deliver_subject", "settle needs a pull consumer"}},
			{name: "max deliver below the cap", declare: true,
				setup: func(r *rig) []setup {
					c := pull(r)
					c.MaxDeliver = 3
					return []setup{stream(r, r.subject("work")), consumer(c)}
				},
				opts: func(r *rig) []core.Option { return []core.Option{core.DeadLetterAfter(3, r.subject("work.dead"))} },
				is:   natsjs.ErrMismatch, want: []string{"max_deliver: server 3", "must be above 3"}},
			{name: "fetch batch above the consumer's max batch", queue: []natsjs.QueueOption{natsjs.FetchBatch(10)},
				setup: func(r *rig) []setup {
					c := pull(r)
					c.MaxRequestBatch = 5
					return []setup{stream(r, r.subject("work")), consumer(c)}
				},
				is: natsjs.ErrMismatch, want: []string{"max_batch: server 5", "natsjs.FetchBatch(10)"}},
			{name: "dead-letter subject not captured",
				setup: func(r *rig) []setup { return []setup{stream(r, r.subject("work")), consumer(pull(r))} },
				opts:  func(r *rig) []core.Option { return []core.Option{core.DeadLetterAfter(3, r.subject("work.dead"))} },
				is:    natsjs.ErrNotFound, want: []string{`dead-letter subject "`, "dead letters would be lost"}},
			{name: "max deliver option at the cap", declare: true, queue: []natsjs.QueueOption{natsjs.MaxDeliver(3)},
				setup: func(*rig) []setup { return nil },
				opts:  func(r *rig) []core.Option { return []core.Option{core.DeadLetterAfter(3, r.subject("work.dead"))} },
				want:  []string{"natsjs.MaxDeliver(3)", "give MaxDeliver above 3"}},
			{name: "dead letter to the queue itself", declare: true, setup: func(*rig) []setup { return nil },
				opts: func(r *rig) []core.Option { return []core.Option{core.DeadLetterAfter(3, r.subject("work"))} },
				want: []string{"dead letters would come back"}},
			{name: "dead letter to a wildcard", declare: true, setup: func(*rig) []setup { return nil },
				opts: func(r *rig) []core.Option { return []core.Option{core.DeadLetterAfter(3, r.subject("dead.*"))} },
				want: []string{"core.DeadLetterAfter destination", "wildcard"}},
		}
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
				r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(c.declare))
				ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
				defer cancel()
				for _, s := range c.setup(r) {
					if err := s(ctx, r); err != nil {
						t.Fatalf("setup: %v", err)
					}
				}
				opts := []core.Option{raw}
				if c.opts != nil {
					opts = append(opts, c.opts(r)...)
				}
				h := func(context.Context, *core.Message[string]) error { return nil }
				if err := core.Subscribe(r.app, r.queue("work", c.queue...), h, opts...); err != nil {
					t.Fatal(err)
				}
				err := r.start()
				if err == nil {
					t.Fatal("the App started")
				}
				if c.is != nil && !errors.Is(err, c.is) {
					t.Errorf("error %v does not match %v", err, c.is)
				}
				for _, w := range append(c.want, r.subject("work")) {
					if !strings.Contains(err.Error(), w) && !strings.Contains(err.Error(), r.stream("work")) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if !c.declare {
					if _, err := r.admin.js.Stream(ctx, r.stream("work.dead")); !errors.Is(err, jetstream.ErrStreamNotFound) {
						t.Errorf("a check-only subscription created the dead-letter stream (%v)", err)
					}
				}
			})
		}
	})
}

// TestDeclareIsIdempotent: a second App declaring the same queue finds what the first declared
// and starts; the consumer holds the declared settings.
func TestDeclareIsIdempotent(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		q := r.queue("work", natsjs.AckWait(12*time.Second), natsjs.MaxAckPending(64))
		h := func(context.Context, *core.Message[string]) error { return nil }
		if err := core.Subscribe(r.app, q, h, raw, core.DeadLetterAfter(4, r.subject("work.dead"))); err != nil {
			t.Fatal(err)
		}
		r.mustStart()
		r.stop()
		second, err := natsjs.New(url, natsjs.WithLogger(testLogger()))
		if err != nil {
			t.Fatal(err)
		}
		app := core.New(core.WithLogger(testLogger()), core.WithoutSignals())
		app.Register(second)
		q2, err := natsjs.NewQueue(second, r.subject("work"), natsjs.AckWait(12*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(app, q2, h, raw, core.DeadLetterAfter(4, r.subject("work.dead"))); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		select {
		case <-app.Ready():
		case err := <-done:
			t.Fatalf("a check-only App refused what the declaring one made: %v", err)
		}
		cancel()
		<-done
		info, err := r.admin.js.Consumer(context.Background(), r.stream("work"), r.stream("work"))
		if err != nil {
			t.Fatal(err)
		}
		c := info.CachedInfo().Config
		if c.AckWait != 12*time.Second || c.MaxDeliver != 4+natsjs.BackstopMargin || c.MaxAckPending != 64 ||
			c.AckPolicy != jetstream.AckExplicitPolicy || c.FilterSubject != r.subject("work") {
			t.Fatalf("declared consumer %+v", c)
		}
	})
}

// TestBadInput: constructors and publishes refuse what cannot work, naming the option.
func TestBadInput(t *testing.T) {
	c, err := natsjs.New(embedded.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"empty url", func() error { _, err := natsjs.New(" "); return err }, "URL is empty"},
		{"nil option", func() error { _, err := natsjs.New("nats://x", nil); return err }, "nil option"},
		{"bad backoff", func() error {
			_, err := natsjs.New("nats://x", natsjs.DeadLetterBackoff(time.Second, time.Millisecond))
			return err
		}, "DeadLetterBackoff"},
		{"nil conn", func() error { _, err := natsjs.NewQueue(nil, "work"); return err }, "nil Conn"},
		{"empty subject", func() error { _, err := natsjs.NewQueue(c, ""); return err }, "subject is empty"},
		{"empty token", func() error { _, err := natsjs.NewQueue(c, "a..b"); return err }, "empty token"},
		{"inner >", func() error { _, err := natsjs.NewQueue(c, "a.>.b"); return err }, "'>' must be the last token"},
		{"bad stream name", func() error { _, err := natsjs.NewQueue(c, "work", natsjs.Stream("a.b")); return err }, "natsjs.Stream"},
		{"bad durable", func() error { _, err := natsjs.NewQueue(c, "work", natsjs.Durable("")); return err }, "natsjs.Durable"},
		{"replicas", func() error { _, err := natsjs.NewQueue(c, "work", natsjs.Replicas(7)); return err }, "natsjs.Replicas(7)"},
		{"ack wait", func() error { _, err := natsjs.NewQueue(c, "work", natsjs.AckWait(time.Millisecond)); return err }, "natsjs.AckWait"},
		{"fetch batch", func() error { _, err := natsjs.NewQueue(c, "work", natsjs.FetchBatch(0)); return err }, "natsjs.FetchBatch(0)"},
		{"subjects", func() error { _, err := natsjs.NewQueue(c, "work", natsjs.StreamSubjects("other")); return err }, "do not capture"},
		{"publish wildcard", func() error { _, err := natsjs.Publish(context.Background(), c, "work.*", 1); return err }, "wildcard"},
		{"reserved header", func() error {
			_, err := natsjs.Publish(context.Background(), c, "work", 1, natsjs.WithHeaders(map[string]string{"Nats-Expected-Stream": "x"}))
			return err
		}, "reserved for the server"},
		{"header line break", func() error {
			_, err := natsjs.PublishRaw(context.Background(), c, "work", nil, map[string]string{"a": "1\r\nb: 2"}, "")
			return err
		}, "line break"},
		{"empty id", func() error {
			_, err := natsjs.Publish(context.Background(), c, "work", 1, natsjs.WithMsgID(""))
			return err
		}, "message id is empty"},
		{"unencodable", func() error { _, err := natsjs.Publish(context.Background(), c, "work", func() {}); return err }, "encode func()"},
		{"no stream", func() error {
			_, err := natsjs.Publish(context.Background(), c, "nothing.captures.this", 1)
			return err
		}, `publish to "nothing.captures.this"`},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one saying %q", err, tc.want)
			}
		})
	}
}
