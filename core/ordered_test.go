package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// unorderedEndpoint is a backend that knows nothing of core.Ordered: it never reads it.
type unorderedEndpoint struct{}

type idleSource struct{}

func (idleSource) Next(ctx context.Context) (core.Delivery, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (idleSource) Close() error { return nil }

type nopFinisher struct{}

func (nopFinisher) Finish(_ context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	settled(d, v, nil)
}

func (unorderedEndpoint) Queue() string { return "plain" }
func (unorderedEndpoint) Open(context.Context, core.Subscription) (core.Source, core.Finisher, error) {
	return idleSource{}, nopFinisher{}, nil
}

// amqpLikeEndpoint says which backend it is, as the real ones do.
type amqpLikeEndpoint struct{ unorderedEndpoint }

func (amqpLikeEndpoint) Describe(core.SubscriptionDescription) core.EndpointDescription {
	return core.EndpointDescription{Backend: core.BackendAMQP}
}

func TestOrderedRefusedByBackendsThatDoNotReadIt(t *testing.T) {
	for _, c := range []struct {
		ep      core.Endpoint
		backend string
	}{
		{unorderedEndpoint{}, `core_test.unorderedEndpoint queue "plain"`},
		{amqpLikeEndpoint{}, `amqp queue "plain"`},
	} {
		app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals())
		if err := core.Subscribe(app, c.ep, ack, core.Ordered(), core.Workers(4)); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		err := app.Run(context.Background())
		var ue *core.UnsupportedError
		if !errors.As(err, &ue) || !errors.Is(err, core.ErrUnsupported) {
			t.Fatalf("Run with core.Ordered() on a backend that does not order keys: %v, want a *core.UnsupportedError", err)
		}
		for _, want := range []string{"core.Ordered()", c.backend, "subscribe without core.Ordered()"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %q", err, want)
			}
		}
	}
}

func TestOrderedAcceptedByABackendThatReadsIt(t *testing.T) {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := coretest.NewBroker(clk, nil)
	app := core.New(core.WithClock(clk), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals())
	if err := core.Subscribe(app, b.Queue("q"), ack, core.Ordered()); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestOptionsOrdered(t *testing.T) {
	var o core.Options
	if o.Ordered() {
		t.Fatal("Options.Ordered without core.Ordered()")
	}
	if err := o.Apply(core.Ordered()); err != nil {
		t.Fatal(err)
	}
	if !o.Ordered() {
		t.Fatal("Options.Ordered after core.Ordered() is false")
	}
}

// keyed is a delivery with an ordering key.
type keyed struct{ id, key string }

func (k *keyed) ID() string                 { return k.id }
func (k *keyed) Attempt() int               { return 1 }
func (k *keyed) Body() []byte               { return nil }
func (k *keyed) Headers() map[string]string { return nil }
func (k *keyed) OrderingKey() string        { return k.key }

func TestKeySequencer(t *testing.T) {
	var s core.KeySequencer
	a1, a2, a3 := &keyed{"a1", "a"}, &keyed{"a2", "a"}, &keyed{"a3", "a"}
	b1, n1 := &keyed{"b1", "b"}, &keyed{"n1", ""}
	for _, c := range []struct {
		d    core.Delivery
		want bool
	}{{a1, true}, {a2, false}, {b1, true}, {a3, false}, {n1, true}} {
		if got := s.Admit(c.d); got != c.want {
			t.Errorf("Admit(%s) = %v, want %v", c.d.ID(), got, c.want)
		}
	}
	if n := s.Waiting("a"); n != 2 {
		t.Errorf("Waiting(a) = %d, want 2", n)
	}
	if _, err := s.Release(a2); !errors.Is(err, core.ErrKeyNotHeld) {
		t.Errorf("Release of a waiting delivery: %v, want ErrKeyNotHeld", err)
	}
	for _, c := range []struct{ done, next core.Delivery }{{a1, a2}, {a2, a3}, {a3, nil}, {b1, nil}, {n1, nil}} {
		next, err := s.Release(c.done)
		if err != nil || next != c.next {
			t.Errorf("Release(%s) = %v, %v; want %v", c.done.ID(), next, err, c.next)
		}
	}
	if !s.Admit(a1) {
		t.Error("a released key is still held")
	}
	s.Admit(a2)
	if got := s.Drain(); len(got) != 1 || got[0] != a2 {
		t.Errorf("Drain = %v, want [a2]", got)
	}
}

func TestHeldKeysLogsRateLimited(t *testing.T) {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	h := core.NewHeldKeys(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), clk, 10*time.Second)
	h.Wait("q", "cust-7", "m-1", 2, 3)
	h.Wait("q", "cust-7", "m-1", 3, 3)
	h.Wait("q", "cust-8", "m-9", 2, 1)
	clk.Advance(10 * time.Second)
	h.Wait("q", "cust-7", "m-1", 4, 5)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2 (rate-limited):\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"level=DEBUG", "queue=q", "ordering_key=cust-7", "message_id=m-1", "attempt=4", "waiting=5", "not_logged=2"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
}
