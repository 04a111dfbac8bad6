package natsjs_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// Describe reports the stream and consumer a subscription declares, without a connection.
func TestDescribeReportsStreamAndConsumer(t *testing.T) {
	conn, err := natsjs.New("nats://127.0.0.1:1", natsjs.DeclareTopology(true)) // never connected
	if err != nil {
		t.Fatal(err)
	}
	q, err := natsjs.NewQueue(conn, "refunds.new", natsjs.AckWait(time.Minute), natsjs.StreamSubjects("refunds.>"))
	if err != nil {
		t.Fatal(err)
	}
	app := core.New(core.WithInfo("t", "1"))
	h := func(context.Context, *core.Message[string]) error { return nil }
	if err := core.Subscribe(app, q, h, core.DeadLetterAfter(5, "refunds.dead")); err != nil {
		t.Fatal(err)
	}
	d := app.Describe().Subscriptions[0].Endpoint
	if d == nil || d.Backend != core.BackendNATS || d.NATS == nil {
		t.Fatalf("description = %+v", d)
	}
	n := d.NATS
	if n.Subject != "refunds.new" || n.Stream != q.Stream() || n.Consumer != q.Durable() || len(n.Subjects) != 1 || n.Subjects[0] != "refunds.>" {
		t.Errorf("NATS = %+v", n)
	}
	if d.Settings["ack_wait"] != "1m0s" || d.Settings["max_deliver"] != 5+natsjs.BackstopMargin || d.Settings["declare_topology"] != true {
		t.Errorf("settings = %v", d.Settings)
	}
	if len(d.Related) != 1 || d.Related[0].Role != core.RoleDeadLetter || d.Related[0].Name != "refunds.dead" ||
		!strings.Contains(d.Related[0].About, "settle declares one") {
		t.Errorf("related = %+v", d.Related)
	}
	if !strings.HasPrefix(d.Delay, "server") {
		t.Errorf("delay = %q: JetStream holds a RetryAfter", d.Delay)
	}
}

// TestDescribeSaysWhatIsDeclared runs a subscription on the embedded server and compares its
// description with the stream and consumer JetStream holds.
func TestDescribeSaysWhatIsDeclared(t *testing.T) {
	r := newRig(t, embedded.URL(), clock.Real(), natsjs.DeclareTopology(true))
	q := r.queue("refunds", natsjs.AckWait(45*time.Second), natsjs.MaxAckPending(64))
	h := func(context.Context, *core.Message[string]) error { return nil }
	if err := core.Subscribe(r.app, q, h, core.DeadLetterAfter(4, r.subject("refunds.dead"))); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	d := r.app.Describe().Subscriptions[0].Endpoint
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	st, err := r.admin.js.Stream(ctx, d.NATS.Stream)
	if err != nil {
		t.Fatalf("stream %s: %v", d.NATS.Stream, err)
	}
	if got := st.CachedInfo().Config.Subjects; !slices.Equal(got, d.NATS.Subjects) {
		t.Errorf("stream subjects %v, described %v", got, d.NATS.Subjects)
	}
	cons, err := st.Consumer(ctx, d.NATS.Consumer)
	if err != nil {
		t.Fatalf("consumer %s: %v", d.NATS.Consumer, err)
	}
	cc := cons.CachedInfo().Config
	got := []any{cc.FilterSubject, cc.AckWait.String(), cc.MaxDeliver, cc.MaxAckPending}
	want := []any{d.NATS.Subject, d.Settings["ack_wait"], d.Settings["max_deliver"], d.Settings["max_ack_pending"]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("consumer %v, described %v", got, want)
	}
	if _, err := r.admin.js.StreamNameBySubject(ctx, d.Related[0].Name); err != nil {
		t.Errorf("no stream captures the described dead-letter subject %s: %v", d.Related[0].Name, err)
	}
}
