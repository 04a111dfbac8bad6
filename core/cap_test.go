package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// takenDelivery is a delivery whose attempt was counted when it was taken, as a lease claim or a
// quorum queue counts it.
type takenDelivery struct{ attempt int }

func (d takenDelivery) ID() string                 { return "m-1" }
func (d takenDelivery) Attempt() int               { return d.attempt }
func (d takenDelivery) Body() []byte               { return []byte(`{}`) }
func (d takenDelivery) Headers() map[string]string { return nil }

// onceEndpoint hands out one delivery, then blocks; its finisher reports every verdict.
type onceEndpoint struct {
	d        core.Delivery
	verdicts chan core.Verdict
	read     any // an Options.Ext key the endpoint reads while it opens
}

func (e *onceEndpoint) Queue() string { return "refunds" }
func (e *onceEndpoint) Open(_ context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	if e.read != nil {
		sub.Options.Ext(e.read)
	}
	return &onceSource{d: e.d}, e, nil
}

func (e *onceEndpoint) Finish(_ context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	e.verdicts <- v
	settled(d, v, nil)
}

type onceSource struct{ d core.Delivery }

func (s *onceSource) Next(ctx context.Context) (core.Delivery, error) {
	if d := s.d; d != nil {
		s.d = nil
		return d, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (s *onceSource) Close() error { return nil }

func TestPastTheCapGoesToDeadLetterWithoutTheHandler(t *testing.T) {
	for _, c := range []struct {
		attempt  int
		handled  bool
		dead     bool
		reasonIs string
	}{
		{attempt: 3, handled: true, dead: true, reasonIs: "retry at attempt 3 of 3"},
		{attempt: 4, handled: false, dead: true, reasonIs: "not settled after 3 attempts (cap 3)"},
		{attempt: 9, handled: false, dead: true, reasonIs: "not settled after 8 attempts (cap 3)"},
	} {
		h := coretest.New(t)
		ep := &onceEndpoint{d: takenDelivery{attempt: c.attempt}, verdicts: make(chan core.Verdict, 1)}
		var calls atomic.Int32
		err := core.Subscribe(h.App, ep, func(context.Context, *core.Message[Refund]) error {
			calls.Add(1)
			return core.Retry()
		}, core.DeadLetterAfter(3, "refunds.dead"))
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		v := <-ep.verdicts
		h.Stop()
		if got := calls.Load() == 1; got != c.handled {
			t.Errorf("attempt %d: handler called %d times", c.attempt, calls.Load())
		}
		if v.Action != core.ActDeadLetter || v.Dest != "refunds.dead" {
			t.Errorf("attempt %d: verdict %v", c.attempt, v)
		}
		if r := core.Reason(v); r != c.reasonIs {
			t.Errorf("attempt %d: reason %q, want %q", c.attempt, r, c.reasonIs)
		}
		var de *core.DeadLetterError
		if !errors.As(v.Cause, &de) || de.NotSettled == c.handled {
			t.Errorf("attempt %d: cause %#v", c.attempt, v.Cause)
		}
		if !c.handled {
			recs := h.Logs.Find("settle: delivered past the cap without ever settling; moving to dead letter without calling the handler")
			if len(recs) != 1 || recs[0].Level != slog.LevelWarn || recs[0].Attrs["message_id"] != "m-1" ||
				recs[0].Attrs["attempt"] != int64(c.attempt) || recs[0].Attrs["queue"] != "refunds" {
				t.Errorf("attempt %d: warning %+v", c.attempt, recs)
			}
		}
	}
}

type foreignKey struct{}

// foreignOption is a mount option of another backend, as sqlqueue.Transactional() is.
func foreignOption(name string) core.Option {
	return core.OptionFunc(func(o *core.Options) error {
		o.SetExt(foreignKey{}, name, true)
		return nil
	})
}

func TestBackendOptionsAnEndpointDoesNotReadAreRefused(t *testing.T) {
	run := func(read any, opts ...core.Option) error {
		app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
		ep := &onceEndpoint{verdicts: make(chan core.Verdict, 1), read: read}
		if err := core.Subscribe(app, ep, ack, opts...); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return app.Run(ctx)
	}
	err := run(nil, foreignOption("other.Transactional()"), foreignOption("other.LeaseFor"))
	want := `settle: subscription "refunds" on refunds: options other.LeaseFor, other.Transactional() do not apply to this endpoint`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant %s…", err, want)
	}
	if err := run(foreignKey{}, foreignOption("other.Transactional()")); err != nil {
		t.Fatalf("an endpoint that reads the option: %v", err)
	}
}

func TestParseCount(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    int
		ok      bool
		clamped bool
	}{
		{"0", 0, true, false}, {"7", 7, true, false}, {"1073741824", core.MaxCount, true, false},
		{"1073741825", core.MaxCount, false, true}, {"9223372036854775807", core.MaxCount, false, true},
		{"99999999999999999999999999", core.MaxCount, false, true},
		{"", 0, false, false}, {"-5", 0, false, false}, {"+5", 0, false, false}, {"007", 0, false, false},
		{"abc", 0, false, false}, {" 5", 0, false, false}, {"5 ", 0, false, false}, {"99999999999x", 0, false, false},
	} {
		got, err := core.ParseCount(c.in)
		if got != c.want || (err == nil) != c.ok || errors.Is(err, core.ErrCountClamped) != c.clamped {
			t.Errorf("ParseCount(%q) = %d, %v", c.in, got, err)
		}
	}
}

func TestDeadLetterInfoRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	long := strings.Repeat("é", core.MaxReasonBytes) // 2 bytes a rune: must be cut on a rune boundary
	v := core.Verdict{Action: core.ActDeadLetter, Cause: errors.New(long)}
	info := core.NewDeadLetterInfo(takenDelivery{attempt: 5}, v, "refunds", at)
	h := info.Headers()
	got, ok, err := core.ParseDeadLetterInfo(h)
	if !ok || err != nil || got.Count != 5 || got.Origin != "refunds" || !got.At.Equal(at) {
		t.Fatalf("round trip: %+v, %v, %v (headers %v)", got, ok, err, h)
	}
	if len(got.Error) > core.MaxReasonBytes || !strings.HasPrefix(long, strings.TrimSuffix(got.Error, "…")) {
		t.Fatalf("reason of %d bytes: %q…", len(got.Error), got.Error[:20])
	}
	if _, ok, _ := core.ParseDeadLetterInfo(map[string]string{"tenant": "a"}); ok {
		t.Fatal("headers without dead-letter fields read as a dead letter")
	}
	_, ok, err = core.ParseDeadLetterInfo(map[string]string{core.HeaderRetryCount: "abc", core.HeaderDeadAt: "yesterday"})
	if !ok || err == nil || !strings.Contains(err.Error(), core.HeaderRetryCount) || !strings.Contains(err.Error(), core.HeaderDeadAt) {
		t.Fatalf("malformed headers: ok=%v err=%v", ok, err)
	}
	if r := core.Reason(core.Verdict{Action: core.ActDeadLetter, Dest: "d"}); r != "dead_letter(d)" {
		t.Fatalf("reason without a cause: %q", r)
	}
}

// listEndpoint hands out its deliveries in order, then blocks; its finisher acks.
type listEndpoint struct {
	ds []core.Delivery
}

func (e *listEndpoint) Queue() string { return "refunds" }
func (e *listEndpoint) Open(context.Context, core.Subscription) (core.Source, core.Finisher, error) {
	return &listSource{ds: e.ds}, e, nil
}
func (e *listEndpoint) Finish(_ context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	settled(d, v, nil)
}

type listSource struct{ ds []core.Delivery }

func (s *listSource) Next(ctx context.Context) (core.Delivery, error) {
	if len(s.ds) > 0 {
		d := s.ds[0]
		s.ds = s.ds[1:]
		return d, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (s *listSource) Close() error { return nil }

type suspectDelivery struct {
	id      string
	suspect bool
}

func (d suspectDelivery) ID() string                 { return d.id }
func (d suspectDelivery) Attempt() int               { return 2 }
func (d suspectDelivery) Body() []byte               { return []byte(`{}`) }
func (d suspectDelivery) Headers() map[string]string { return nil }
func (d suspectDelivery) Suspect() bool              { return d.suspect }

func TestSuspectDeliveryRunsAlone(t *testing.T) {
	h := coretest.New(t)
	ds := []core.Delivery{suspectDelivery{"a", false}, suspectDelivery{"b", false}, suspectDelivery{"s", true}, suspectDelivery{"c", false}}
	var running, peakWithSuspect atomic.Int32
	started := make(chan string, 4)
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "s": make(chan struct{}), "c": make(chan struct{})}
	err := core.Subscribe(h.App, &listEndpoint{ds: ds}, func(_ context.Context, m *core.Message[Refund]) error {
		n := running.Add(1)
		defer running.Add(-1)
		if m.ID() == "s" && n != 1 {
			peakWithSuspect.Store(n)
		}
		started <- m.ID()
		<-release[m.ID()]
		return nil
	}, core.Workers(3))
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	if a, b := <-started, <-started; a+b != "ab" && a+b != "ba" {
		t.Fatalf("started %s, %s", a, b)
	}
	// The third worker took the suspect delivery: it waits until a and b are done.
	select {
	case id := <-started:
		t.Fatalf("%s started while a and b run", id)
	case <-time.After(50 * time.Millisecond):
	}
	close(release["a"])
	close(release["b"])
	if id := <-started; id != "s" {
		t.Fatalf("then %s started, want the suspect", id)
	}
	// c waits for the suspect, though workers are free.
	select {
	case id := <-started:
		t.Fatalf("%s started beside the suspect", id)
	case <-time.After(50 * time.Millisecond):
	}
	close(release["s"])
	if id := <-started; id != "c" {
		t.Fatalf("then %s", id)
	}
	close(release["c"])
	h.WaitSettled(4)
	if n := peakWithSuspect.Load(); n != 0 {
		t.Fatalf("the suspect ran with %d handlers", n)
	}
}

// chargedDelivery counts its attempt when core calls Charge (core.Charger); fail makes Charge
// return an error.
type chargedDelivery struct {
	suspectDelivery
	attempt int
	fail    bool
	charged chan<- string
}

func (d chargedDelivery) Attempt() int { return d.attempt }
func (d chargedDelivery) Charge(context.Context) error {
	d.charged <- d.id
	if d.fail {
		return errors.New("the database went away")
	}
	return nil
}

// TestChargeBeforeHandler: core calls a Charger's Charge once its turn has come — a suspect
// delivery's after the handler running beside it has returned — and before its handler or its
// move past the cap; a failed Charge calls no handler and abandons the delivery.
func TestChargeBeforeHandler(t *testing.T) {
	h := coretest.New(t)
	charged := make(chan string, 4)
	ds := []core.Delivery{
		suspectDelivery{"a", false},
		chargedDelivery{suspectDelivery{"s", true}, 2, false, charged},
		chargedDelivery{suspectDelivery{"fail", false}, 1, true, charged},
		chargedDelivery{suspectDelivery{"past", false}, 4, false, charged},
	}
	var aReturned atomic.Bool
	release := make(chan struct{})
	started := make(chan string, 4)
	err := core.Subscribe(h.App, &listEndpoint{ds: ds}, func(_ context.Context, m *core.Message[Refund]) error {
		started <- m.ID()
		if m.ID() == "a" {
			<-release
			aReturned.Store(true)
		}
		return nil
	}, core.Workers(2), core.DeadLetterAfter(3, "refunds.dead"))
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	if id := <-started; id != "a" {
		t.Fatalf("first handler: %s", id)
	}
	close(release)
	var id string
	select {
	case id = <-charged:
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("Charge was never called")
	}
	if id != "s" || !aReturned.Load() {
		t.Fatalf("charged %s (a returned: %v); want s, after a's handler returned", id, aReturned.Load())
	}
	if id := <-started; id != "s" {
		t.Fatalf("after s was charged, %s started", id)
	}
	byID := map[string]core.Settlement{}
	for _, x := range h.WaitSettled(4) {
		byID[x.Delivery.ID()] = x
	}
	if len(charged) != 2 {
		t.Fatalf("charged %d more; want fail and past", len(charged))
	}
	if v := byID["fail"].Verdict; v.Action != core.ActAbandon {
		t.Errorf("a delivery whose Charge failed: %v; want it abandoned", v)
	}
	if v := byID["past"].Verdict; v.Action != core.ActDeadLetter || !strings.Contains(core.Reason(v), "not settled after 3 attempts") {
		t.Errorf("a charged delivery past the cap: %v (%s); want a dead letter, not settled", v, core.Reason(v))
	}
	close(started)
	for id := range started {
		if id == "fail" || id == "past" {
			t.Errorf("%s reached its handler", id)
		}
	}
	if len(h.Logs.Find("settle: counting the attempt of a delivery failed; giving the delivery back without calling the handler")) != 1 {
		t.Error("no warning for the failed Charge")
	}
}
