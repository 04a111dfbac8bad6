package core_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// describedEndpoint is an endpoint that describes itself from the subscription it is given.
type describedEndpoint struct{ name string }

func (e describedEndpoint) Queue() string { return e.name }
func (e describedEndpoint) Open(context.Context, core.Subscription) (core.Source, core.Finisher, error) {
	panic("describedEndpoint is never opened")
}
func (e describedEndpoint) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	return core.EndpointDescription{Backend: "test", Delay: "process",
		Related: []core.RelatedQueue{{Role: core.RoleDeadLetter, Name: sub.DeadLetterTo}}}
}

func TestDescribeReportsWhatIsMounted(t *testing.T) {
	app := core.New(core.WithInfo(" refunds ", "0.1.0"), core.WithDescription("Refunds card payments."))
	if err := core.Subscribe(app, describedEndpoint{"refunds"}, ack,
		core.DeadLetterAfter(5, "refunds.dead"), core.Workers(3), core.Timeout(time.Minute),
		core.OnError(core.Backoff(time.Second, time.Minute)), core.OnPanic(core.PolicyDrop)); err != nil {
		t.Fatal(err)
	}
	raw := func(context.Context, *core.Message[[]byte]) error { return nil }
	if err := core.Subscribe(app, failingEndpoint{"raw"}, raw, core.WithCodec(core.Raw), core.Name("raw-reader")); err != nil {
		t.Fatal(err)
	}
	d := app.Describe()
	if want := (core.AppInfo{Name: "refunds", Version: "0.1.0", Description: "Refunds card payments."}); d.Info != want {
		t.Errorf("Info = %+v, want %+v", d.Info, want)
	}
	if len(d.Subscriptions) != 2 || d.Publishers != nil {
		t.Fatalf("got %d subscriptions and %d publishers, want 2 and none", len(d.Subscriptions), len(d.Publishers))
	}
	s := d.Subscriptions[0]
	if s.Payload != reflect.TypeFor[Refund]() {
		t.Errorf("Payload = %v, want Refund", s.Payload)
	}
	got := []any{s.Name, s.Queue, s.ContentType, s.Cap, s.DeadLetterTo, s.Workers, s.Timeout, s.OnError, s.OnPanic, s.OnDecodeError}
	want := []any{"refunds", "refunds", "application/json", 5, "refunds.dead", 3, time.Minute, "backoff(1s, 1m0s)", "drop", "dead_letter"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("subscription = %v, want %v", got, want)
	}
	if s.Endpoint == nil || s.Endpoint.Backend != "test" || len(s.Endpoint.Related) != 1 || s.Endpoint.Related[0].Name != "refunds.dead" {
		t.Errorf("Endpoint = %+v, want the endpoint's own description built from the subscription", s.Endpoint)
	}
	r := d.Subscriptions[1]
	if r.Name != "raw-reader" || r.Queue != "raw" || r.Payload != reflect.TypeFor[[]byte]() || r.ContentType != "application/octet-stream" || r.Endpoint != nil {
		t.Errorf("raw subscription = %+v", r)
	}
}

// describedPayout is what the described refunds subscription replies with.
type describedPayout struct{ Refund string }

// TestDescribeListsPublishers: the publishers an App declares with Publishes and those its
// subscriptions reply through are its send operations, each listed once, named after its queue.
func TestDescribeListsPublishers(t *testing.T) {
	b := coretest.NewBroker(clock.Real(), nil)
	payouts, err := core.NewPublisher[describedPayout](b.Queue("payouts"))
	if err != nil {
		t.Fatal(err)
	}
	audit, err := core.NewPublisher[string](b.Queue("audit"), core.PublishCodec(core.Raw))
	if err != nil {
		t.Fatal(err)
	}
	second, err := core.NewPublisher[string](b.Queue("payouts"), core.PublishCodec(core.Raw))
	if err != nil {
		t.Fatal(err)
	}
	app := core.New()
	app.Publishes(audit, payouts, nil, second)
	if err := core.Subscribe(app, b.Queue("refunds"), func(ctx context.Context, m *core.Message[Refund]) error {
		return payouts.Reply(ctx, describedPayout{})
	}, core.Replies(payouts)); err != nil {
		t.Fatal(err)
	}
	got := app.Describe().Publishers
	want := []struct {
		name, queue, payload, contentType string
	}{
		{"audit", "audit", "string", "application/octet-stream"},
		{"payouts", "payouts", "core_test.describedPayout", "application/json"},
		{"payouts-2", "payouts", "string", "application/octet-stream"},
	}
	if len(got) != len(want) {
		t.Fatalf("publishers %+v, want %d", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Queue != w.queue || g.Payload.String() != w.payload || g.ContentType != w.contentType {
			t.Errorf("publisher %d = %s %s %v %s, want %+v", i, g.Name, g.Queue, g.Payload, g.ContentType, w)
		}
	}
}

// TestDescribeSaysLimitsAndPause: a subscription's limits are described as written, with how
// they are split and shared, and a pausable one says so; describing them reads nothing the
// endpoint must read.
func TestDescribeSaysLimitsAndPause(t *testing.T) {
	b := coretest.NewBroker(clock.Real(), nil)
	app := core.New()
	h := func(context.Context, *core.Message[Refund]) error { return nil }
	if err := core.Subscribe(app, b.Queue("refunds"), h, core.Concurrency(5, core.SharedIn(core.NewMemoryLimitStore())),
		core.Rate(50, time.Second, 10, core.PerKey(core.OrderingKeyOf)), core.Pausable(core.NewMemoryPauseStore())); err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(app, b.Queue("payouts"), h); err != nil {
		t.Fatal(err)
	}
	d := app.Describe().Subscriptions
	want := []string{"Concurrency(5) shared", "Rate(50, 1s, 10) per key"}
	if !reflect.DeepEqual(d[0].Limits, want) || !d[0].Pausable {
		t.Fatalf("limits %q pausable %v, want %q and true", d[0].Limits, d[0].Pausable, want)
	}
	if d[1].Limits != nil || d[1].Pausable {
		t.Fatalf("a plain subscription describes limits %q, pausable %v", d[1].Limits, d[1].Pausable)
	}
}
