package redisq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/ops/opstest"
	redisq "github.com/settlehq/settle/transport-redis"
)

func TestOps(t *testing.T) {
	url := realServer(t)
	opstest.Run(t, opstest.Features{Ready: true, Dead: true, OldestReady: true}, func(t *testing.T) opstest.Backend {
		prefix := uniquePrefix()
		admin := newAdmin(t, url, prefix)
		stream, dead := prefix+"work", prefix+"work.dead"
		c, err := redisq.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		q, err := redisq.NewQueue(c, stream)
		if err != nil {
			t.Fatal(err)
		}
		o, err := redisq.NewOps(q, dead)
		if err != nil {
			t.Fatal(err)
		}
		read := func(t testing.TB, key string) []redis.XMessage {
			es, err := admin.XRange(context.Background(), key, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			return es
		}
		return opstest.Backend{
			Queue:  o,
			Origin: stream,
			AddDead: func(t testing.TB, payload []byte, headers map[string]string) string {
				values := []any{redisq.BodyField, payload}
				for k, v := range headers {
					values = append(values, k, v)
				}
				id, err := admin.XAdd(context.Background(), &redis.XAddArgs{Stream: dead, Values: values}).Result()
				if err != nil {
					t.Fatal(err)
				}
				return id
			},
			AddReady: func(t testing.TB, payload []byte) {
				if _, err := publishRaw(context.Background(), url, stream, payload, nil); err != nil {
					t.Fatal(err)
				}
			},
			Ready: func(t testing.TB) []opstest.Message {
				var out []opstest.Message
				for _, e := range read(t, stream) {
					m := message(e)
					out = append(out, opstest.Message{Payload: m.Body, Attempts: m.Count})
				}
				return out
			},
			Dead: func(t testing.TB) [][]byte {
				var out [][]byte
				for _, e := range read(t, dead) {
					out = append(out, message(e).Body)
				}
				return out
			},
		}
	})
}

// TestOpsEndToEnd: a subscription moves a failing message to its dead-letter stream; Ops says
// why, counts it, redrives it with its message id, and the subscription then handles it as a
// fresh message.
func TestOpsEndToEnd(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	newAdmin(t, url, prefix)
	stream, dead := prefix+"payouts", prefix+"payouts.dead"
	type seen struct {
		id      string
		attempt int
	}
	handled := make(chan seen, 4)
	var up = make(chan struct{})
	a := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		select {
		case <-up:
			handled <- seen{m.ID(), m.Attempt()}
			return nil
		default:
			return core.Retry().Because(errors.New("bank API: 503"))
		}
	}, nil, raw, core.DeadLetterAfter(2, dead))
	ctx := context.Background()
	pub, err := core.NewPublisher[string](mustQueue(t, a.client, stream), core.PublishCodec(core.Raw))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, `{"payout":7}`, core.MessageID("payout-7")); err != nil {
		t.Fatal(err)
	}
	a.rec.WaitSettled(2)
	o, err := redisq.NewOps(mustQueue(t, a.client, stream), dead)
	if err != nil {
		t.Fatal(err)
	}
	page, err := o.ListDead(ctx, ops.Filter{}, ops.Page{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ListDead = %+v, %v", page, err)
	}
	d := page.Items[0]
	if d.Count != 2 || d.Origin != stream || d.Reason != "retry at attempt 2 of 2: bank API: 503" {
		t.Errorf("dead letter: count %d, origin %q, reason %q", d.Count, d.Origin, d.Reason)
	}
	if s, err := o.Stats(ctx); err != nil || s.Dead != 1 || s.Ready != 0 || s.InFlight != 0 {
		t.Errorf("stats: %+v, %v", s, err)
	}
	close(up)
	if n, err := o.Redrive(ctx, ops.IDs(d.ID), ops.RedriveOptions{}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	if g := <-handled; g.id != "payout-7" || g.attempt != 1 {
		t.Fatalf("redriven message handled as %q attempt %d, want payout-7 attempt 1", g.id, g.attempt)
	}
}

func mustQueue(t *testing.T, c *redisq.Client, stream string) *redisq.Queue {
	t.Helper()
	q, err := redisq.NewQueue(c, stream)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
