package natsjs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
	natsjs "github.com/settlehq/settle/transport-nats"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// A message the consumer will never deliver again — left in a work-queue stream at or below its
// ack floor — is counted in Stats, listed, and moved by RepairStranded: to the dead letter
// (the default: nothing lost, nothing run again) with the dead-letter headers and a reason, or
// back to the queue, where the consumer delivers it as a new message. The copy is stored before
// the original goes; a repair repeated finds nothing; a sequence that is not stranded is refused
// and nothing moves.
func TestStrandedMessagesCountedListedAndRepaired(t *testing.T) {
	for _, to := range []natsjs.RepairTo{natsjs.RepairToDeadLetter, natsjs.RepairToQueue} {
		t.Run(to.String(), func(t *testing.T) {
			eachServer(t, func(t *testing.T, url string) {
				strandedRepaired(t, url, to)
			})
		})
	}
}

func strandedRepaired(t *testing.T, url string, to natsjs.RepairTo) {
	prefix := uniquePrefix(t)
	a := newAdmin(t, url)
	a.deleteStreamsOnCleanup(t, prefix)
	subject, dead, stream := prefix+".work", prefix+".dead", prefix+"_work"
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	if _, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: prefix + "_dead", Subjects: []string{dead}}); err != nil {
		t.Fatal(err)
	}
	seq, err := natstest.Strand(ctx, a.js, stream, subject)
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsjs.New(url, natsjs.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	o, err := natsjs.NewOps(ctx, c, subject, dead)
	if err != nil {
		t.Fatal(err)
	}
	s, err := o.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stranded != 1 || s.Ready != 0 || s.InFlight != 0 || !s.Measured(ops.FigureStranded) {
		t.Fatalf("stats %+v; want 1 stranded, nothing ready or in flight", s)
	}
	page, err := o.ListStranded(ctx, ops.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Seq != seq || string(page.Items[0].Payload) != "stuck" || page.Floor < seq || page.Next != "" {
		t.Fatalf("stranded page %+v; want sequence %d, \"stuck\"", page, seq)
	}
	if n, err := o.RepairStranded(ctx, natsjs.StrandedSelection{Seqs: []uint64{seq, seq + 1}}, to, nil); n != 0 ||
		!errors.Is(err, natsjs.ErrNotStranded) || !errors.Is(err, ops.ErrNotFound) || !strings.Contains(err.Error(), "sequence 2 ") {
		t.Fatalf("repair of %d and the acknowledged %d: %d, %v; want nothing moved, %d named not stranded", seq, seq+1, n, err, seq+1)
	}
	var moved []uint64
	n, err := o.RepairStranded(ctx, natsjs.StrandedSelection{All: true}, to, func(s uint64) { moved = append(moved, s) })
	if err != nil || n != 1 || !slices.Equal(moved, []uint64{seq}) {
		t.Fatalf("repair: %d moved (%v), %v; want sequence %d", n, moved, err, seq)
	}
	if n, err := o.RepairStranded(ctx, natsjs.StrandedSelection{All: true}, to, nil); n != 0 || err != nil {
		t.Fatalf("repair again: %d, %v; want nothing to do", n, err)
	}
	if to == natsjs.RepairToDeadLetter {
		checkRepairedToDead(ctx, t, a, o, subject, stream, seq)
	} else {
		checkRepairedToQueue(ctx, t, a, o, stream, seq)
	}
}

func checkRepairedToDead(ctx context.Context, t *testing.T, a *admin, o *natsjs.Ops, subject, stream string, seq uint64) {
	t.Helper()
	s, err := o.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stranded != 0 || s.Dead != 1 || s.Ready != 0 {
		t.Fatalf("stats after the repair %+v; want 1 dead, nothing stranded or ready", s)
	}
	page, err := o.ListDead(ctx, ops.Filter{Reason: natsjs.StrandedReason}, ops.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Fatalf("dead letters %+v; want the stranded one", page.Items)
	}
	d := page.Items[0]
	want := stream + ":" + itoa(seq)
	if string(d.Payload) != "stuck" || d.Origin != subject || d.Count != 0 || d.DeadAt.IsZero() || d.Headers[jetstream.MsgIDHeader] != want ||
		!strings.HasPrefix(d.Reason, natsjs.StrandedReason+": stream ") || !strings.Contains(d.Reason, "ack floor") {
		t.Fatalf("dead letter %+v; want \"stuck\" from %s, no count, id %s, a stranded reason", d, subject, want)
	}
	t.Logf("dead letter's reason: %s", d.Reason)
	if got := a.read(t, subject); len(got) != 0 {
		t.Fatalf("the queue's stream still holds %d messages", len(got))
	}
}

func checkRepairedToQueue(ctx context.Context, t *testing.T, a *admin, o *natsjs.Ops, stream string, seq uint64) {
	t.Helper()
	s, err := o.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stranded != 0 || s.Ready != 1 || s.Dead != 0 {
		t.Fatalf("stats after the repair %+v; want 1 ready, nothing stranded or dead", s)
	}
	st, err := a.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.Consumer(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range b.Messages() {
		got = append(got, m)
	}
	if len(got) != 1 || string(got[0].Data()) != "stuck" {
		t.Fatalf("delivered after the repair: %d messages; want the stuck one again", len(got))
	}
	md, _ := got[0].Metadata()
	wantID := stream + ":" + itoa(seq) + "/stranded/" + stream + ":" + itoa(seq)
	if md.NumDelivered != 1 || md.Sequence.Stream <= seq || got[0].Headers().Get(jetstream.MsgIDHeader) != wantID {
		t.Fatalf("the copy: sequence %d, delivery %d, id %q; want a new message (after %d, delivery 1, id %s)",
			md.Sequence.Stream, md.NumDelivered, got[0].Headers().Get(jetstream.MsgIDHeader), seq, wantID)
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if si, err := st.Info(ctx); err != nil || si.State.Msgs != 0 {
		t.Fatalf("stream after the copy was acknowledged: %v, %v; want empty", si, err)
	}
}

// itoa formats a stream sequence.
func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// strand replays what a nats-server 2.9 SIGKILL did to a work-queue stream (issue 42: 678 of
// 10,000 messages left in the stream, never delivered again): it restarts f's server from a store
// whose stream is a copy taken before the messages were acknowledged and whose consumer state
// is the one after. The consumer's ack floor is then past messages the stream still holds.
func strand(t *testing.T, f *forgetful, r *rig, bodies ...string) {
	t.Helper()
	declareOnly(t, f, r)
	for _, b := range bodies {
		r.publish("work", b, nil)
	}
	snap := f.snapshot() // the stream with every message stored
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	admin := newAdmin(t, f.url())
	cons, err := admin.js.Consumer(ctx, r.stream("work"), r.stream("work"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(len(bodies), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range b.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(bodies) {
		t.Fatalf("acknowledged %d of %d", n, len(bodies))
	}
	admin.nc.Close()
	f.s.Shutdown()
	f.s.WaitForShutdown()
	// The consumer's state after the acks, into the copy taken before them.
	rel := filepath.Join("jetstream", "$G", "streams", r.stream("work"), "obs", r.stream("work"))
	if err := os.RemoveAll(filepath.Join(snap, rel)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(snap, rel), os.DirFS(filepath.Join(f.dir, rel))); err != nil {
		t.Fatal(err)
	}
	f.dir = snap
	f.s = ownServer(t, f.port, snap)
}

// After a crash that kept the consumer's acknowledgements and lost the stream's removals, the
// messages stay in the stream and the consumer never delivers them again: the subscription
// handles nothing. The subscription's health warns (from the second check on), Stats counts
// them, and a repair to the queue brings each back once, as a new message, to be handled.
func TestCrashStrandedMessagesDetectedAndRepaired(t *testing.T) {
	f := newForgetful(t)
	var runs atomic.Int32
	r := newRig(t, f.url(), clock.Real(), natsjs.DeclareTopology(true))
	if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error {
		runs.Add(1)
		return nil
	}, core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	bodies := []string{"m1", "m2", "m3", "m4", "m5"}
	strand(t, f, r, bodies...)
	r.mustStart()
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	admin := newAdmin(t, f.url())
	st, err := admin.js.Stream(ctx, r.stream("work"))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.Consumer(ctx, r.stream("work"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != uint64(len(bodies)) || ci.AckFloor.Stream != uint64(len(bodies)) || ci.NumPending != 0 || ci.NumAckPending != 0 {
		t.Fatalf("after the crash: stream holds %d, consumer ack floor %d, %d pending, %d in flight; want %d held below the floor, nothing to deliver",
			n, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, len(bodies))
	}

	// Health: the first check sees them, the second (begun after it ended) reports them.
	if h := r.app.Health(ctx); h.Status != core.HealthPass {
		t.Fatalf("first health check %+v; want pass (a removal may be late)", h)
	}
	h := r.app.Health(ctx)
	sub := h.Subscriptions[0]
	if h.Status != core.HealthWarn || sub.Status != core.HealthWarn || !strings.Contains(sub.State, "messages stranded") ||
		!strings.Contains(sub.State, "ack floor 5") {
		t.Fatalf("second health check %+v; want the subscription warning of messages stranded below the ack floor 5", h)
	}
	r.app.Health(ctx)
	recs := r.logs.Find("nats: messages stranded in the stream: it holds messages of the queue at or below the consumer's ack floor, which it will not deliver again (a server crash lost their removal, or they reached MaxDeliver); settle stranded lists them and repairs moves them")
	if len(recs) != 1 || recs[0].Attrs["stream_seq"] != uint64(1) || recs[0].Attrs["ack_floor"] != uint64(5) {
		t.Fatalf("stranded log lines %+v; want one, of sequence 1 below floor 5", recs)
	}

	o, err := natsjs.NewOps(ctx, r.conn, r.subject("work"), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := o.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stranded != int64(len(bodies)) || s.Ready != 0 || s.InFlight != 0 {
		t.Fatalf("stats %+v; want %d stranded, nothing ready or in flight", s, len(bodies))
	}
	if runs.Load() != 0 {
		t.Fatalf("handler ran %d times before the repair; the consumer delivers nothing", runs.Load())
	}
	if _, err := o.RepairStranded(ctx, natsjs.StrandedSelection{All: true}, natsjs.RepairToDeadLetter, nil); !errors.Is(err, ops.ErrNoDeadLetter) {
		t.Fatalf("repair to a dead letter the queue has not: %v; want ErrNoDeadLetter", err)
	}
	n, err := o.RepairStranded(ctx, natsjs.StrandedSelection{All: true}, natsjs.RepairToQueue, nil)
	if err != nil || n != len(bodies) {
		t.Fatalf("repair: %d, %v; want %d moved", n, err, len(bodies))
	}
	all := r.rec.WaitSettled(len(bodies))
	var got []string
	for _, x := range all {
		if x.Err != nil || x.Verdict.Action != core.ActAck || x.Delivery.Attempt() != 1 {
			t.Fatalf("settlement %v", describeAll(all))
		}
		got = append(got, string(x.Delivery.Body()))
	}
	slices.Sort(got)
	if !slices.Equal(got, bodies) {
		t.Fatalf("handled %v; want each of %v once", got, bodies)
	}
	r.stop()
	if si, err := st.Info(ctx); err != nil || si.State.Msgs != 0 {
		t.Fatalf("stream after the repair and the drain: %v, %v; want empty", si, err)
	}
	if n := runs.Load(); n != int32(len(bodies)) {
		t.Fatalf("handler ran %d times; want %d", n, len(bodies))
	}
}

// A stream that keeps acknowledged messages by design (limits or interest retention) strands
// nothing: a message below the consumer's ack floor is one it keeps, counted and repaired as
// nothing.
func TestKeptMessagesAreNotStranded(t *testing.T) {
	for _, retention := range []jetstream.RetentionPolicy{jetstream.LimitsPolicy, jetstream.InterestPolicy} {
		t.Run(retention.String(), func(t *testing.T) {
			eachServer(t, func(t *testing.T, url string) {
				prefix := uniquePrefix(t)
				a := newAdmin(t, url)
				a.deleteStreamsOnCleanup(t, prefix)
				ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
				defer cancel()
				subject, stream := prefix+".work", prefix+"_work"
				st, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Retention: retention})
				if err != nil {
					t.Fatal(err)
				}
				// A second consumer of an interest stream keeps what the first acknowledged.
				for _, name := range []string{stream, stream + "_other"} {
					if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := a.js.Publish(ctx, subject, []byte("kept")); err != nil {
					t.Fatal(err)
				}
				cons, err := st.Consumer(ctx, stream)
				if err != nil {
					t.Fatal(err)
				}
				b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				for m := range b.Messages() {
					if err := m.DoubleAck(ctx); err != nil {
						t.Fatal(err)
					}
				}
				c, err := natsjs.New(url, natsjs.WithLogger(testLogger()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				o, err := natsjs.NewOps(ctx, c, subject, "")
				if err != nil {
					t.Fatal(err)
				}
				s, err := o.Stats(ctx)
				if err != nil || s.Stranded != 0 {
					t.Fatalf("stats %+v, %v; want nothing stranded", s, err)
				}
				if n, err := o.RepairStranded(ctx, natsjs.StrandedSelection{All: true}, natsjs.RepairToQueue, nil); n != 0 || err != nil {
					t.Fatalf("repair: %d, %v; want nothing to do", n, err)
				}
				if si, err := st.Info(ctx); err != nil || si.State.Msgs != 1 {
					t.Fatalf("stream %v, %v; want the message kept", si, err)
				}
			})
		})
	}
}
