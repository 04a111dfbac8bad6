package sqlqueuetest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// RunBehaviour runs publishing cases, then, in every form: an abandoned delivery is released, a delayed row waits
// for its time across an App restart, concurrent claimants never share a row, an undecodable
// payload spends an attempt and is not left locked; and in the advisory form, rows sharing a
// key are worked one at a time, and the dialect's keys keep AdvisoryDialect's contract.
func RunBehaviour(t *testing.T, open Open) {
	t.Run("publish", func(t *testing.T) { t.Parallel(); publishing(t, open(t)) })
	for _, fm := range forms(open(t)) {
		t.Run(fm.name, func(t *testing.T) {
			t.Run("abandoned", func(t *testing.T) { t.Parallel(); abandoned(t, open(t), fm.f) })
			t.Run("delayed_restart", func(t *testing.T) { t.Parallel(); delayedRestart(t, open(t), fm.f) })
			t.Run("concurrent", func(t *testing.T) { t.Parallel(); concurrent(t, open(t), fm.f) })
			t.Run("undecodable", func(t *testing.T) { t.Parallel(); undecodable(t, open(t), fm.f) })
			t.Run("publish_wakes", func(t *testing.T) { t.Parallel(); publishWakes(t, open(t), fm.f) })
			t.Run("short_delay", func(t *testing.T) { t.Parallel(); shortDelay(t, open(t), fm.f) })
			if fm.f != sqlqueue.FormAdvisory { // which settles each delivery alone anyway, and refuses the option (RunBadInput)
				t.Run("per_message", func(t *testing.T) { t.Parallel(); perMessage(t, open(t), fm.f) })
			}
			t.Run("tx_workers", func(t *testing.T) { t.Parallel(); txWorkers(t, open(t), fm.f) })
			t.Run("crash_loop", func(t *testing.T) { t.Parallel(); crashLoop(t, open(t), fm.f) })
			t.Run("telemetry", func(t *testing.T) { t.Parallel(); telemetry(t, open(t), fm.f) })
			if fm.f == sqlqueue.FormLease {
				t.Run("crash_loop/lapsed", func(t *testing.T) { t.Parallel(); crashLoopLapsed(t, open(t)) })
			}
			if fm.f == sqlqueue.FormRowLock {
				t.Run("crash_loop/full_claim", func(t *testing.T) { t.Parallel(); crashLoopFullClaim(t, open(t)) })
			}
			t.Run("stop_mid_batch", func(t *testing.T) { t.Parallel(); stopMidBatch(t, open(t), fm.f, false) })
			t.Run("stop_mid_batch/tx", func(t *testing.T) { t.Parallel(); stopMidBatch(t, open(t), fm.f, true) })
			if fm.f == sqlqueue.FormAdvisory {
				t.Run("keys_serialise", func(t *testing.T) { t.Parallel(); keysSerialise(t, open(t), fm.f) })
				t.Run("key_contract", func(t *testing.T) { t.Parallel(); keyContract(t, open(t)) })
			}
		})
	}
}

// armedTimers is how many clock timers an idle subscription of the form keeps: the poll timer,
// and in the lease form the extension timer.
func armedTimers(which sqlqueue.Form) int {
	if which == sqlqueue.FormLease {
		return 2
	}
	return 1
}

// abandoned: the handler outlives the shutdown timeout; its delivery is abandoned and the row
// comes back to the next App with the attempt the form counts.
func abandoned(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	id := e.publish(e.publisher(tb, "q"), Refund{Card: "c"})
	entered := make(chan struct{}, 1)
	a := e.app(nil, core.WithShutdownTimeout(time.Second))
	subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	stop := e.run(a)
	waitFor(t, entered, "the handler")
	armed := e.clock.Pending()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	if err := e.clock.BlockUntil(e.ctx, armed+1); err != nil { // the shutdown timeout
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	waitFor(t, stopped, "the App to stop")
	s := e.rec.Settlements()
	if len(s) != 1 || s[0].Verdict.Action != core.ActAbandon || s[0].Err != nil {
		t.Fatalf("settlements = %v; want one abandon", s)
	}
	rows := e.rows(tb)
	if len(rows) != 1 {
		t.Fatalf("rows = %+v; want the row back", rows)
	}
	if which == sqlqueue.FormAdvisory {
		// The mark of the take stays: its handler never returned, and the row comes back as a
		// lapsed one, taken alone (core.Suspect).
		e.timeIs("locked_until (the advisory take's mark)", rows[0].LockedUntil, Epoch)
	} else {
		e.isNull("locked_until", rows[0].LockedUntil)
	}
	if rows[0].ProcessedAt != nil {
		t.Errorf("abandoned row marked processed")
	}
	want := 1
	if which == sqlqueue.FormRowLock {
		want = 0 // rolled back
	}
	if rows[0].Attempt != want {
		t.Errorf("attempt = %d; want %d", rows[0].Attempt, want)
	}
	// The row is free at once: the next App takes it.
	got := make(chan int, 1)
	b := e.app(nil)
	subscribe(e, b, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		got <- m.Attempt()
		return nil
	})
	stopB := e.run(b)
	if at := waitFor(t, got, "the abandoned row to come back"); at != want+1 {
		t.Errorf("redelivered with attempt %d; want %d", at, want+1)
	}
	e.rec.WaitSettled(2)
	stopB()
	if r := e.rows(tb); len(r) != 1 || r[0].ID != id || r[0].ProcessedAt == nil {
		t.Errorf("rows = %+v; want row %d processed", r, id)
	}
}

// delayedRestart: RetryAfter keeps the row in the table; a new App does not take it before
// its time and takes it then.
func delayedRestart(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	e.publish(e.publisher(tb, "q"), Refund{Card: "c"})
	a := e.app(nil)
	subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		return core.RetryAfter(delay)
	})
	stop := e.run(a)
	e.rec.WaitSettled(1)
	stop()
	if n := e.clock.Pending(); n != 0 {
		t.Fatalf("%d timers still armed after the App stopped", n)
	}

	got := make(chan int, 1)
	b := e.app(nil)
	subscribe(e, b, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		got <- m.Attempt()
		return nil
	}, sqlqueue.PollInterval(delay))
	stopB := e.run(b)
	if err := e.clock.BlockUntil(e.ctx, armedTimers(which)); err != nil { // claimed nothing, waiting
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("the delayed row was taken before its retry_after")
	default:
	}
	e.clock.Advance(delay)
	if at := waitFor(t, got, "the delayed row"); at != 2 {
		t.Errorf("attempt = %d; want 2", at)
	}
	e.rec.WaitSettled(2)
	stopB()
}

// concurrent: two Apps with several workers each drain one queue; no row is handled twice.
func concurrent(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb, p := e.deletingQueue()
	const n = 120
	for i := range n {
		e.publish(p, Refund{Card: "c", Amount: i})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	h := func(ctx context.Context, m *core.Message[Refund]) error {
		mu.Lock()
		seen[m.ID()]++
		mu.Unlock()
		return nil
	}
	workers := 4
	if which == sqlqueue.FormRowLock && driver.IsSingleWriter(f.Dialect) {
		workers = 1 // a row-lock claim holds the database's only write transaction until it settles
	}
	for range 2 {
		a := e.app(nil)
		subscribe(e, a, e.endpoint(fm, tb, "q"), h, core.Workers(workers), sqlqueue.BatchSize(7))
		e.run(a)
	}
	e.rec.WaitSettled(n)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Errorf("handled %d distinct rows; want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("row %s handled %d times", id, c)
		}
	}
	for _, s := range e.rec.Settlements() {
		if s.Err != nil {
			t.Errorf("settlement of %s failed: %v", s.Delivery.ID(), s.Err)
		}
	}
}

// undecodable: a payload the codec cannot read takes the decode policy (dead letter), spends
// an attempt and is not left locked.
func undecodable(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	if _, err := p.PublishRaw(e.ctx, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	called := atomic.Int32{}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		called.Add(1)
		return nil
	}, core.DeadLetterAfter(3, "q.dead"))
	stop := e.run(a)
	s := e.rec.WaitSettled(1)
	stop()
	if s[0].Verdict.Action != core.ActDeadLetter || s[0].Err != nil {
		t.Fatalf("settlement = %v (%v); want a dead letter", s[0].Verdict, s[0].Err)
	}
	if called.Load() != 0 {
		t.Errorf("the handler saw an undecodable payload")
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].Group != "q.dead" || rows[0].Attempt != 1 || rows[0].LockedUntil != nil {
		t.Errorf("rows = %+v; want the row in q.dead with attempt 1, not locked", rows)
	}
}

// keysSerialise: rows sharing an advisory key are handled one at a time, even with free workers.
func keysSerialise(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb, p := e.deletingQueue()
	const n = 4
	for i := range n {
		e.publish(p, Refund{Card: "same", Amount: i})
	}
	var inside, most atomic.Int32
	entered := make(chan chan struct{}, n)
	a := e.app(nil)
	subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		c := inside.Add(1)
		for {
			m := most.Load()
			if c <= m || most.CompareAndSwap(m, c) {
				break
			}
		}
		release := make(chan struct{})
		entered <- release
		<-release
		inside.Add(-1)
		return nil
	}, core.Workers(3), sqlqueue.AdvisoryKey("'one key'"))
	stop := e.run(a)
	for i := range n {
		r := waitFor(t, entered, "the next row of the key")
		if got := inside.Load(); got != 1 {
			t.Fatalf("row %d: %d handlers inside at once; want 1", i, got)
		}
		close(r)
	}
	e.rec.WaitSettled(n)
	stop()
	if m := most.Load(); m != 1 {
		t.Errorf("up to %d rows of one key were handled at once; want 1", m)
	}
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}

// keyContract checks what the advisory form relies on of AdvisoryDialect (its doc lists the
// contract), on two connections of the fixture's DB: a key one connection holds is refused to
// the other, without error; it can be taken again once unlocked; and discarding the connection
// that holds a key releases it. A server may end a closed session's locks a moment after the
// client closes it, so the last check asks again until the key is free or the wait times out.
func keyContract(t *testing.T, f *Fixture) {
	ad, ok := f.Dialect.(driver.AdvisoryDialect)
	if !ok {
		t.Skipf("the fixture's Dialect (%T) is not a driver.AdvisoryDialect", f.Dialect)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*coretest.WaitTimeout)
	defer cancel()
	conn := func() driver.Conn {
		c, err := f.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	try := func(c driver.Conn, who string, key string, want bool) {
		t.Helper()
		got, err := ad.TryLock(ctx, c, key)
		if err != nil || got != want {
			t.Fatalf("TryLock(%s, %q) = %v, %v; want %v, nil", who, key, got, err, want)
		}
	}
	// A key of its own: on a server, advisory keys are shared by every database and test.
	key := "sqlqueuetest_key_contract:" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	a, b := conn(), conn()
	defer b.Close()
	try(a, "a", key, true)
	try(b, "b", key, false)
	if err := ad.Unlock(ctx, a, key); err != nil {
		t.Fatalf("Unlock(a): %v", err)
	}
	try(b, "b", key, true)
	try(a, "a", key, false)
	if err := ad.Unlock(ctx, b, key); err != nil {
		t.Fatalf("Unlock(b): %v", err)
	}
	try(a, "a", key, true)
	if err := a.Discard(); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	for {
		got, err := ad.TryLock(ctx, b, key)
		if err != nil {
			t.Fatalf("TryLock(b) after a was discarded: %v", err)
		}
		if got {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("a key stayed held after the connection holding it was discarded: the engine discards a connection whose Unlock failed and relies on that to release its keys")
		}
	}
	if err := ad.Unlock(ctx, b, key); err != nil {
		t.Fatalf("Unlock(b): %v", err)
	}
}

// publishing: a delay lands in retry_after, headers in headers, and a publish inside a
// transaction that rolls back leaves no row.
func publishing(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	id := e.publish(p, Refund{Card: "later"}, sqlqueue.Delay(delay), sqlqueue.WithHeaders(map[string]string{"k": "v"}))
	tx, err := f.DB.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlqueue.Publish(e.ctx, p, Refund{Card: "never"}, sqlqueue.InTx(tx)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].ID != id || rows[0].Group != "q" || rows[0].Attempt != 0 {
		t.Fatalf("rows = %+v; want only the delayed row, attempt 0", rows)
	}
	e.timeIs("retry_after", rows[0].RetryAfter, Epoch.Add(delay))
	if !strings.Contains(string(rows[0].Headers), `"k":"v"`) {
		t.Errorf("headers = %s", rows[0].Headers)
	}
	bare := sqlqueue.Table{Name: "bare", Columns: sqlqueue.Columns{LockedUntil: "locked_until"}}
	e.create(bare)
	if _, err := sqlqueue.Publish(e.ctx, e.publisher(bare, ""), Refund{}, sqlqueue.Delay(time.Second)); err == nil || !strings.Contains(err.Error(), "retry_after") {
		t.Errorf("a delay on a table without retry_after: err = %v", err)
	}
}

// publishWakes: a publish in the same process wakes an idle claimant at once, without its
// poll interval passing.
func publishWakes(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	got := make(chan struct{}, 1)
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		got <- struct{}{}
		return nil
	}, sqlqueue.PollInterval(time.Hour))
	stop := e.run(a)
	if err := e.clock.BlockUntil(e.ctx, armedTimers(which)); err != nil {
		t.Fatal(err)
	}
	e.publish(e.publisher(tb, "q"), Refund{Card: "now"})
	waitFor(t, got, "the published row, without advancing the clock")
	e.rec.WaitSettled(1)
	stop()
}

// perMessage: PerMessage settles each delivery with its own statement and commit.
func perMessage(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	const n = 5
	for i := range n {
		e.publish(p, Refund{Amount: i})
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		if m.Payload.Amount == 0 && m.Attempt() == 1 {
			return core.Retry()
		}
		return nil
	}, sqlqueue.PerMessage(), core.Workers(2))
	stop := e.run(a)
	s := e.rec.WaitSettled(n + 1)
	stop()
	for _, x := range s {
		if x.Err != nil {
			t.Errorf("settlement of %s: %v", x.Delivery.ID(), x.Err)
		}
	}
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}

// shortDelay: a RetryAfter shorter than the poll interval brings the row back at its time, not
// at the next poll.
func shortDelay(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	e.publish(e.publisher(tb, "q"), Refund{Card: "c"})
	got := make(chan int, 2)
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		got <- m.Attempt()
		if m.Attempt() == 1 {
			return core.RetryAfter(time.Second)
		}
		return nil
	}, sqlqueue.PollInterval(time.Hour))
	stop := e.run(a)
	waitFor(t, got, "the first delivery")
	e.rec.WaitSettled(1)
	e.clock.Advance(time.Second)
	if at := waitFor(t, got, "the delayed row after its delay, well before the poll"); at != 2 {
		t.Errorf("attempt = %d; want 2", at)
	}
	e.rec.WaitSettled(2)
	stop()
}

// txWorkers: transactional handlers on several workers; each ack commits its delivery's
// writes, each retry rolls them back, whatever the other deliveries do meanwhile.
func txWorkers(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	e.createSide()
	const n = 6
	for i := range n {
		e.publish(p, Refund{Amount: i})
	}
	workers := 3
	if which == sqlqueue.FormRowLock && driver.IsSingleWriter(f.Dialect) {
		workers = 1 // a row-lock claim holds the database's only write transaction until it settles
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		if err := writeSide(ctx, f.Dialect, m.ID()); err != nil {
			return err
		}
		if m.Payload.Amount%2 == 1 && m.Attempt() == 1 {
			return core.Retry()
		}
		return nil
	}, sqlqueue.Transactional(), core.Workers(workers), sqlqueue.BatchSize(3))
	stop := e.run(a)
	s := e.rec.WaitSettled(n + n/2)
	stop()
	for _, x := range s {
		if x.Err != nil {
			t.Errorf("settlement of %s (%v): %v", x.Delivery.ID(), x.Verdict, x.Err)
		}
	}
	if got := e.count(sideTable); got != n {
		t.Errorf("%d side rows; want %d: one per ack, none from the retried attempts", got, n)
	}
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}

// stopMidBatch: an App stopped while its one worker handles the second row of a claim of six
// stops as soon as that handler returns, without waiting for its shutdown timeout (which the
// virtual clock never reaches): the finished rows are settled and the four rows never handed
// out are left as they were. In the row-lock form the claim's transaction committed only when
// every claimed row had finished, and core closes the source (which gave the rest back) only
// after every settlement: the App waited for the whole shutdown timeout.
func stopMidBatch(t *testing.T, f *Fixture, which sqlqueue.Form, tx bool) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	var ids []int64
	for i := range 6 {
		ids = append(ids, e.publish(p, Refund{Amount: i}))
	}
	entered := make(chan int, 6)
	release := make(chan struct{})
	// No linger: a lease-form flush timer armed while the App stops would pass for the
	// shutdown timer that stopWhileHandling waits for.
	opts := []core.Option{sqlqueue.BatchSize(6)}
	if which != sqlqueue.FormAdvisory { // which settles each delivery at once, and reads no FlushLimits
		opts = append(opts, sqlqueue.FlushLimits(100, 0))
	}
	if tx {
		e.createSide()
		opts = append(opts, sqlqueue.Transactional())
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		if tx {
			if err := writeSide(ctx, f.Dialect, m.ID()); err != nil {
				return err
			}
		}
		entered <- m.Payload.Amount
		if m.Payload.Amount == 1 {
			<-release
		}
		return nil
	}, opts...)
	stop := e.run(a)
	waitFor(t, entered, "the first row")
	if got := waitFor(t, entered, "the second row"); got != 1 {
		t.Fatalf("second row handled: amount %d; want 1", got)
	}
	e.stopWhileHandling(stop, release)
	s := e.rec.Settlements()
	if len(s) != 2 {
		t.Fatalf("settlements = %v; want the two handled rows", s)
	}
	for _, x := range s {
		if x.Err != nil || x.Verdict.Action != core.ActAck {
			t.Errorf("settlement of %s: %v, %v; want a durable ack", x.Delivery.ID(), x.Verdict, x.Err)
		}
	}
	if n := len(e.logs.Find("settle: handlers ignored cancellation; closing backends under them (their messages return by rollback, lease or requeue)")); n != 0 {
		t.Errorf("the App reported handlers that ignored cancellation; none was running")
	}
	rows := e.rows(tb)
	if len(rows) != 4 {
		t.Fatalf("rows = %+v; want the four rows never handed out", rows)
	}
	for i, r := range rows {
		if r.ID != ids[i+2] {
			t.Errorf("row %d left; want %d", r.ID, ids[i+2])
		}
		e.isNull("locked_until of a row never handed out", r.LockedUntil)
	}
	if tx {
		if n := e.count(sideTable); n != 2 {
			t.Errorf("%d side rows; want the two acked rows' writes", n)
		}
	}
}

// crashLoopCap is the cap of the crash-loop cases.
const crashLoopCap = 3

// crashLoop: a delivery whose handler never returns — its process dies in it, every time — is
// abandoned cap times (the App stops under it and gives its row back, as a killed process's
// rolled-back transaction, released lease or dropped connection would); the next delivery is
// past the cap, and goes to the dead letter without its handler being called, with its count
// and the reason "not settled after 3 attempts". The attempt must be counted durably at claim
// for this: the lease and advisory forms do, the row-lock form does with a cap (CountAtClaim);
// before, a row-lock crash rolled its count back and the row looped forever.
func crashLoop(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb := sqlqueue.StandardTable("q")
	tb.Columns.LastError = "last_error"
	e.create(tb)
	id := e.publish(e.publisher(tb, "q"), Refund{Card: "poison"}, sqlqueue.WithHeaders(map[string]string{"trace": "t-1"}))
	// quit lets a handler go when the test fails mid-round, so that its App can stop.
	quit := make(chan struct{})
	var once sync.Once
	for round := 1; round <= crashLoopCap; round++ {
		entered := make(chan int, 1)
		a := e.app(nil, core.WithShutdownTimeout(time.Second))
		subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
			entered <- m.Attempt()
			select { // dies here: never returns on its own
			case <-ctx.Done():
			case <-quit:
			}
			return ctx.Err()
		}, core.DeadLetterAfter(crashLoopCap, "q.dead"))
		stop := e.run(a)
		t.Cleanup(func() { once.Do(func() { close(quit) }) }) // before the App's stop

		if at := waitFor(t, entered, "the poison row"); at != round {
			t.Fatalf("round %d: delivered with attempt %d; want %d", round, at, round)
		}
		armed := e.clock.Pending()
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		if err := e.clock.BlockUntil(e.ctx, armed+1); err != nil { // the shutdown timeout
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		waitFor(t, stopped, "the App to stop")
	}
	called := make(chan int, 1)
	a := e.app(nil)
	subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		called <- m.Attempt()
		return nil
	}, core.DeadLetterAfter(crashLoopCap, "q.dead"))
	stop := e.run(a)
	s := e.rec.WaitSettled(crashLoopCap + 1)
	stop()
	select {
	case at := <-called:
		t.Fatalf("the handler was called again at attempt %d, past the cap", at)
	default:
	}
	last := s[crashLoopCap]
	if last.Verdict.Action != core.ActDeadLetter || last.Err != nil || last.Delivery.Attempt() != crashLoopCap+1 {
		t.Fatalf("last settlement = %v attempt %d (%v); want a dead letter at attempt %d", last.Verdict, last.Delivery.Attempt(), last.Err, crashLoopCap+1)
	}
	reason := core.Reason(last.Verdict)
	if !strings.Contains(reason, "not settled after 3 attempts") {
		t.Errorf("reason %q; want \"not settled after 3 attempts\"", reason)
	}
	logged := false
	for _, r := range e.logs.Find("settle: delivered past the cap without ever settling; moving to dead letter without calling the handler") {
		logged = logged || (r.Attrs["message_id"] == last.Delivery.ID() && r.Attrs["attempt"] == int64(crashLoopCap+1) && r.Attrs["queue"] == "q")
	}
	if !logged {
		t.Errorf("no warning with queue, message_id and attempt for the delivery past the cap")
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].ID != id || rows[0].Group != "q.dead" || rows[0].Attempt != crashLoopCap+1 {
		t.Fatalf("rows = %+v; want row %d in q.dead with attempt %d", rows, id, crashLoopCap+1)
	}
	if rows[0].LastError != reason {
		t.Errorf("last_error = %q; want %q", rows[0].LastError, reason)
	}
	e.deadLetterHeaders(&rows[0], true, "q", crashLoopCap+1, Epoch.Add(crashLoopCap*time.Second), reason)
}

// crashLoopLapsed: the lease form when the process dies and nothing gives the row back: each
// new process claims it once its lease has run out, and the one past the cap moves it to the
// dead letter without calling the handler.
func crashLoopLapsed(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	e.publish(p, Refund{Card: "poison"})
	const lease = 10 * time.Second
	dead := make(chan struct{})
	defer close(dead)
	for round := 1; round <= crashLoopCap+1; round++ {
		// Each process's clock is past the previous one's lease; the previous process is
		// frozen in its handler (its own clock never moves, so it never extends).
		c := clock.NewVirtual(Epoch.Add(time.Duration(round-1) * (lease + time.Second)))
		entered := make(chan int, 1)
		a := e.app(c)
		subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
			entered <- m.Attempt()
			<-dead
			return nil
		}, core.DeadLetterAfter(crashLoopCap, "q.dead"), sqlqueue.LeaseFor(lease))
		e.run(a)
		if round <= crashLoopCap {
			if at := waitFor(t, entered, "the poison row"); at != round {
				t.Fatalf("round %d: delivered with attempt %d; want %d", round, at, round)
			}
			continue
		}
		s := e.rec.WaitSettled(1)
		if s[0].Verdict.Action != core.ActDeadLetter || s[0].Err != nil || s[0].Delivery.Attempt() != crashLoopCap+1 {
			t.Fatalf("settlement = %v attempt %d (%v); want a dead letter at attempt %d", s[0].Verdict, s[0].Delivery.Attempt(), s[0].Err, crashLoopCap+1)
		}
		select {
		case at := <-entered:
			t.Fatalf("the handler was called at attempt %d, past the cap", at)
		default:
		}
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].Group != "q.dead" || rows[0].Attempt != crashLoopCap+1 {
		t.Fatalf("rows = %+v; want the row in q.dead with attempt %d", rows, crashLoopCap+1)
	}
}

// crashLoopFullClaim: the row-lock form counts at claim while its claims are below BatchSize
// (after a start, after a failure), so a poison row first met in a full claim, whose count the
// crash rolls back, is counted from its next delivery on: a restarted process claims the oldest
// rows, where it is, in small claims. It runs at most once more than the cap; the rows around it
// settle; it ends in the dead letter.
func crashLoopFullClaim(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	var poison int64
	for i := range 8 {
		id := e.publish(p, Refund{Amount: i})
		if i == 5 {
			poison = id
		}
	}
	quit := make(chan struct{})
	var once sync.Once
	runs := 0
	for round := 1; ; round++ {
		if round > crashLoopCap+3 {
			t.Fatalf("the poison row still loops after %d processes", round-1)
		}
		entered := make(chan struct{}, 1)
		dead := make(chan struct{}, 1)
		a := e.app(nil, core.WithShutdownTimeout(time.Second))
		subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormRowLock), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
			if id, _ := sqlqueue.RowID(m.Delivery()); id != poison {
				return nil
			}
			entered <- struct{}{}
			select { // dies here
			case <-ctx.Done():
			case <-quit:
			}
			return ctx.Err()
		}, core.DeadLetterAfter(crashLoopCap, "q.dead"), sqlqueue.BatchSize(4), core.OnSettled(func(s core.Settlement) {
			if s.Verdict.Action == core.ActDeadLetter && s.Err == nil {
				dead <- struct{}{}
			}
		}))
		stop := e.run(a)
		t.Cleanup(func() { once.Do(func() { close(quit) }) })
		select {
		case <-dead: // moved to the dead letter without its handler
			stop()
		case <-entered:
		case <-time.After(coretest.WaitTimeout):
			t.Fatalf("round %d: neither the poison row's handler nor its dead letter", round)
		}
		if len(dead) > 0 || e.deadIn(tb, poison) {
			break
		}
		runs++
		armed := e.clock.Pending()
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		if err := e.clock.BlockUntil(e.ctx, armed+1); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		waitFor(t, stopped, "the App to stop")
	}
	if runs > crashLoopCap+1 {
		t.Errorf("the poison row's handler ran %d times; want at most the cap + 1 = %d", runs, crashLoopCap+1)
	}
	// Drain what the last process left (it may have stopped before the rows after the poison).
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormRowLock), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		return nil
	}, core.DeadLetterAfter(crashLoopCap, "q.dead"))
	stop := e.run(a)
	e.rec.WaitFor(func([]core.Settlement) bool {
		for _, r := range e.rows(tb) {
			if r.ProcessedAt == nil && r.Group == "q" {
				return false
			}
		}
		return true
	})
	stop()
	for _, r := range e.rows(tb) {
		switch {
		case r.ID == poison:
			if r.Group != "q.dead" || r.Attempt != crashLoopCap+1 {
				t.Errorf("poison row: group %q attempt %d; want q.dead with attempt %d", r.Group, r.Attempt, crashLoopCap+1)
			}
		case r.ProcessedAt == nil:
			t.Errorf("row %d not processed: %+v", r.ID, r)
		}
	}
}

// deadIn reports whether row id of tb is in the dead-letter group q.dead.
func (e *env) deadIn(tb sqlqueue.Table, id int64) bool {
	for _, r := range e.rows(tb) {
		if r.ID == id {
			return r.Group == "q.dead"
		}
	}
	return false
}
