package sqlqueuetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// RunLease runs the lease-form cases: a lost lease (with and without a transaction) and lease
// extension. It skips when the dialect has no lease form.
func RunLease(t *testing.T, open Open) {
	if open(t).Lease == nil {
		t.Skip("the dialect has no lease form")
	}
	t.Run("lost", func(t *testing.T) { t.Parallel(); leaseLost(t, open(t), false) })
	t.Run("lost/tx", func(t *testing.T) { t.Parallel(); leaseLost(t, open(t), true) })
	t.Run("extended", func(t *testing.T) { t.Parallel(); leaseExtended(t, open(t)) })
	t.Run("lost_in_group", func(t *testing.T) { t.Parallel(); lostInGroup(t, open(t)) })
	t.Run("overran", func(t *testing.T) { t.Parallel(); leaseOverran(t, open(t)) })
	if _, ok := open(t).Dialect.(driver.RowLocking); ok {
		t.Run("locked_row", func(t *testing.T) { t.Parallel(); lockedRow(t, open(t)) })
		t.Run("locked_settlement", func(t *testing.T) { t.Parallel(); lockedSettlement(t, open(t)) })
	}
}

// lockRow locks row id of table q from another session, until the returned transaction ends.
func (e *env) lockRow(id int64) sqlqueue.Transaction {
	e.t.Helper()
	other, err := e.f.DB.Begin(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = other.Rollback(context.Background()) })
	d := e.f.Dialect
	rows, err := other.Query(e.ctx, "SELECT "+d.Quote("id")+" FROM "+d.Quote("q")+" WHERE "+d.Quote("id")+" = "+d.Placeholder(1)+
		d.(driver.RowLocking).LockClause(false), id)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := rows.Close(); err != nil {
		e.t.Fatal(err)
	}
	return other
}

// lockedSettlement: a finished delivery whose row another session holds locked fails its
// settlement after the lock timeout instead of waiting for the lock, and fails alone: the
// other delivery settled in the same flush is settled, without waiting for the held row a
// second time.
func lockedSettlement(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	ids := []int64{e.publish(p, Refund{Amount: 1}), e.publish(p, Refund{Amount: 2})}
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-release
		return nil
	}, sqlqueue.LeaseFor(time.Minute), core.Workers(2), sqlqueue.LockTimeout(300*time.Millisecond))
	stop := e.run(a)
	waitFor(t, entered, "the first handler")
	waitFor(t, entered, "the second handler")
	e.lockRow(ids[0])
	close(release) // both ack: every claimed delivery finished, so they flush at once, together
	byID := map[string]error{}
	for _, s := range e.rec.WaitSettled(2) {
		byID[s.Delivery.ID()] = s.Err
	}
	// After the grouped flush waited out the lock timeout, the free row is settled without a
	// second wait and the held one fails at once as held, instead of waiting for it again.
	if err := byID[fmt.Sprint(ids[0])]; !errors.Is(err, sqlqueue.ErrRowHeld) {
		t.Errorf("the locked row's ack: %v; want it to fail as held by another session (sqlqueue.ErrRowHeld)", err)
	}
	if err := byID[fmt.Sprint(ids[1])]; err != nil {
		t.Errorf("the free row's ack failed with the locked one: %v", err)
	}
	stop()
	if rows := e.rows(tb); len(rows) != 1 || rows[0].ID != ids[0] {
		t.Errorf("rows = %+v; want only the locked row, left as it was", rows)
	}
}

// lockedRow: another session holds one claimed row with SELECT … FOR UPDATE. The extension
// renews the other rows at once, settlements and claims go on while the row is held, and the
// held row's new lease end is taken once its lock is granted, so it is never written in the
// past: the row is not claimed again while its handler works. (The extension used to hold the
// settlement lock while its UPDATE waited, stalling every claim and settlement of the
// subscription, and computed the new end before waiting: on PostgreSQL it wrote an end already
// past, and the same process claimed the row again as attempt 2.)
func lockedRow(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	ids := []int64{e.publish(p, Refund{Amount: 1}), e.publish(p, Refund{Amount: 2}), e.publish(p, Refund{Amount: 3})}
	const lease = 40 * time.Second // the lock timeout is then the default 5 s
	entered := make(chan int64, 8)
	release := map[int64]chan struct{}{}
	for _, id := range ids {
		release[id] = make(chan struct{})
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		id, _ := sqlqueue.RowID(m.Delivery())
		entered <- id
		if r, ok := release[id]; ok {
			<-r
		}
		return nil
		// No linger: the clock stands still. No poll: a claim runs only when a publish wakes
		// it, never in the moment between the other session's commit and the extension's lock.
	}, sqlqueue.LeaseFor(lease), core.Workers(4), sqlqueue.FlushLimits(100, 0), sqlqueue.PollInterval(time.Hour))
	extended := e.tap.watch("sqlqueue: leases extended")
	stop := e.run(a)
	for range 3 {
		waitFor(t, entered, "the three handlers")
	}
	// The free worker's claim has found nothing and waits for its poll: a claim scanning the
	// group's rows locks each leased row for a moment (InnoDB, read committed, where the ready
	// index does not hold locked_until), and an extension running beside it skips that row as
	// held by another session.
	if err := e.clock.BlockUntil(e.ctx, armedTimers(sqlqueue.FormLease)); err != nil {
		t.Fatal(err)
	}

	// Another session locks the first row.
	other := e.lockRow(ids[0])

	// The extension renews the two free rows without waiting for the held one.
	e.clock.Advance(lease / 2)
	if r := waitFor(t, extended, "the extension of the free rows"); attr(r, "rows").Int64() != 2 {
		t.Fatalf("first extension renewed %v rows; want the 2 free ones", attr(r, "rows"))
	}
	for _, r := range e.rows(tb)[1:] {
		e.tokenIs("locked_until of a free row after the extension", r.LockedUntil, Epoch.Add(lease/2+lease))
	}
	// Settlements and claims go on while the row is held (and the extension waits for it).
	close(release[ids[1]])
	close(release[ids[2]])
	for _, s := range e.rec.WaitSettled(2) {
		if s.Err != nil {
			t.Errorf("settlement of %s while another row is locked: %v", s.Delivery.ID(), s.Err)
		}
	}
	fresh := e.publish(p, Refund{Amount: 4})
	if got := waitFor(t, entered, "a row published while another is locked"); got != fresh {
		t.Fatalf("handled row %d; want the fresh row %d", got, fresh)
	}
	e.rec.WaitSettled(3)

	// Past both the held row's lease and the end an extension computed before waiting would
	// have written; then the other session lets go.
	e.clock.Advance(lease/2 + 5*time.Second)
	now := Epoch.Add(lease + 5*time.Second)
	if err := other.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	for {
		r := waitFor(t, extended, "the extension of the row once its lock is released")
		if attr(r, "rows").Int64() == 1 {
			break
		}
	}
	held := e.rows(tb)
	if len(held) != 1 || held[0].ID != ids[0] {
		t.Fatalf("rows = %+v; want only the held row", held)
	}
	e.tokenIs("locked_until of the held row, renewed once its lock was granted", held[0].LockedUntil, now.Add(lease))
	// A claim now takes a fresh row, not the row whose handler still works.
	fresh = e.publish(p, Refund{Amount: 5})
	if got := waitFor(t, entered, "the next claim"); got != fresh {
		t.Fatalf("the next claim took row %d (its handler still works); want the fresh row %d", got, fresh)
	}
	e.rec.WaitSettled(4)
	close(release[ids[0]])
	if s := e.rec.WaitSettled(5); s[4].Err != nil {
		t.Errorf("the held row's ack: %v", s[4].Err)
	}
	stop()
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}

// leaseLost: A claims and stalls past its lease (its clock stands still, as a paused process's
// would); B, whose clock is past A's lease, claims the row. A's settlement then reports
// ErrLeaseLost and changes nothing; B's settles the row.
func leaseLost(t *testing.T, f *Fixture, tx bool) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	if tx {
		e.createSide()
	}
	id := e.publish(p, Refund{Card: "c"})
	lease := 10 * time.Second

	clockB := clock.NewVirtual(Epoch.Add(lease + time.Second))
	type call struct {
		attempt int
		release chan error
	}
	handler := func(calls chan call, tx bool) core.Handler[Refund] {
		return func(ctx context.Context, m *core.Message[Refund]) error {
			c := call{attempt: m.Attempt(), release: make(chan error)}
			calls <- c
			err := <-c.release
			// Written after the stall: on SQLite a transaction holds the write lock, and
			// B must be able to claim while A stalls.
			if tx {
				if werr := writeSide(ctx, f.Dialect, "x"); werr != nil {
					return werr
				}
			}
			return err
		}
	}
	opts := []core.Option{sqlqueue.LeaseFor(lease)}
	if tx {
		opts = append(opts, sqlqueue.Transactional())
	}
	callsA, callsB := make(chan call, 1), make(chan call, 1)
	appA := e.app(nil)
	subscribe(e, appA, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), handler(callsA, tx), opts...)
	stopA := e.run(appA)
	a := waitFor(t, callsA, "A's handler")

	appB := e.app(clockB)
	subscribe(e, appB, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), handler(callsB, false), sqlqueue.LeaseFor(lease))
	stopB := e.run(appB)
	b := waitFor(t, callsB, "B's handler (the row's lease ran out)")
	if a.attempt != 1 || b.attempt != 2 {
		t.Errorf("attempts A=%d B=%d; want 1 and 2", a.attempt, b.attempt)
	}

	if tx {
		a.release <- nil // ack with the handler's write
	} else {
		a.release <- core.Retry()
	}
	sa := e.rec.WaitSettled(1)
	if !errors.Is(sa[0].Err, sqlqueue.ErrLeaseLost) {
		t.Fatalf("A's settlement error = %v; want ErrLeaseLost", sa[0].Err)
	}
	var lle *sqlqueue.LeaseLostError
	if !errors.As(sa[0].Err, &lle) || lle.ID != id || lle.Attempt != 1 {
		t.Errorf("A's error = %#v; want a LeaseLostError for row %d attempt 1", sa[0].Err, id)
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].Attempt != 2 || rows[0].LockedUntil == nil {
		t.Fatalf("after A's lost settlement rows = %+v; want B's claim untouched (attempt 2, leased)", rows)
	}
	e.timeIs("locked_until (B's token)", rows[0].LockedUntil, Epoch.Add(2*lease+time.Second))
	if tx {
		if n := e.count(sideTable); n != 0 {
			t.Errorf("A's handler writes were committed despite the lost lease: %d side rows", n)
		}
	}
	found := false
	for _, r := range e.logs.Find("sqlqueue: lease lost; another claim owns the row and the settlement changed nothing") {
		found = found || (r.Attrs["message_id"] == sa[0].Delivery.ID() && r.Attrs["attempt"] == int64(1) && r.Attrs["queue"] == "q")
	}
	if !found {
		t.Errorf("no lease-lost warning with queue, message_id and attempt")
	}

	b.release <- nil
	sb := e.rec.WaitSettled(2)
	if sb[1].Err != nil {
		t.Fatalf("B's ack failed: %v", sb[1].Err)
	}
	stopA()
	stopB()
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("B's ack should delete the row; rows = %+v", rows)
	}
}

// leaseExtended: a slow handler's lease is renewed at half the lease, so a claimant past the
// original lease finds nothing and the slow handler's ack succeeds.
func leaseExtended(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	e.publish(p, Refund{Card: "c"})
	lease := 10 * time.Second
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	appA := e.app(nil)
	subscribe(e, appA, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-release
		return nil
	}, sqlqueue.LeaseFor(lease))
	stopA := e.run(appA)
	waitFor(t, entered, "the slow handler")
	if r := e.rows(tb); len(r) != 1 {
		t.Fatalf("rows = %+v", r)
	} else {
		e.timeIs("locked_until after the claim", r[0].LockedUntil, Epoch.Add(lease))
	}
	// The only timer armed now is the extension's; it is armed again once the extension
	// has committed.
	if err := e.clock.BlockUntil(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(lease / 2)
	if err := e.clock.BlockUntil(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	r := e.rows(tb)
	e.timeIs("locked_until after the extension", r[0].LockedUntil, Epoch.Add(lease/2+lease))

	// B's clock is past the original lease but inside the extended one.
	clockB := clock.NewVirtual(Epoch.Add(lease + time.Second))
	calledB := make(chan struct{}, 1)
	appB := e.app(clockB)
	subscribe(e, appB, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		calledB <- struct{}{}
		return nil
	}, sqlqueue.LeaseFor(lease))
	stopB := e.run(appB)
	// B has claimed (and found nothing) once its poll timer and extension timer are armed.
	if err := clockB.BlockUntil(e.ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calledB:
		t.Fatalf("B claimed a row whose lease was extended")
	default:
	}
	close(release)
	s := e.rec.WaitSettled(1)
	if s[0].Err != nil {
		t.Errorf("the slow handler's ack failed: %v", s[0].Err)
	}
	stopB()
	stopA()
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("rows = %+v; want the row deleted", rows)
	}
}

// lostInGroup: A claims three rows and stalls; B takes one of them after A's lease. A's three
// acks are settled together: the grouped statement matches two rows, and only the third
// settlement reports ErrLeaseLost.
func lostInGroup(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	ids := []int64{e.publish(p, Refund{Amount: 1}), e.publish(p, Refund{Amount: 2}), e.publish(p, Refund{Amount: 3})}
	lease := 10 * time.Second
	entered := make(chan struct{}, 3)
	releaseA := make(chan struct{})
	appA := e.app(nil)
	subscribe(e, appA, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-releaseA
		return nil
	}, sqlqueue.LeaseFor(lease), core.Workers(3))
	stopA := e.run(appA)
	for range 3 {
		waitFor(t, entered, "A's three handlers")
	}

	clockB := clock.NewVirtual(Epoch.Add(lease + time.Second))
	tookB := make(chan string, 1)
	releaseB := make(chan struct{})
	appB := e.app(clockB)
	subscribe(e, appB, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		tookB <- m.ID()
		<-releaseB
		return nil
	}, sqlqueue.LeaseFor(lease), sqlqueue.BatchSize(1))
	stopB := e.run(appB)
	taken := waitFor(t, tookB, "B's claim of the first row")
	if taken != fmt.Sprint(ids[0]) {
		t.Fatalf("B took row %s; want %d", taken, ids[0])
	}

	close(releaseA)
	s := e.rec.WaitSettled(3)
	for _, x := range s {
		lost := errors.Is(x.Err, sqlqueue.ErrLeaseLost)
		if want := x.Delivery.ID() == taken; lost != want {
			t.Errorf("row %s: settlement error %v; want lease lost = %v", x.Delivery.ID(), x.Err, want)
		}
	}
	if rows := e.rows(tb); len(rows) != 1 || fmt.Sprint(rows[0].ID) != taken || rows[0].Attempt != 2 {
		t.Errorf("rows = %+v; want only B's row, attempt 2", rows)
	}
	close(releaseB)
	e.rec.WaitSettled(4)
	stopB()
	stopA()
	if rows := e.rows(tb); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}

// tokenIs checks a lease token: want, or a few microseconds later (a subscription's tokens
// are unique, so one stamped in the same microsecond as another moves on by one).
func (e *env) tokenIs(what string, got *time.Time, want time.Time) {
	e.t.Helper()
	if got == nil {
		e.t.Errorf("%s is NULL; want %v", what, want)
		return
	}
	if d := got.Sub(want); d < 0 || d >= time.Millisecond {
		e.t.Errorf("%s = %v; want %v (or within a millisecond after)", what, got.UTC(), want)
	}
}

// leaseOverran: a handler that ignores its context past core.Timeout and its grace keeps its
// lease no longer: the extension leaves it to run out, so another claim can take the row.
func leaseOverran(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	e.publish(p, Refund{Card: "c"})
	const lease = 10 * time.Second
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-release // ignores its context
		return nil
	}, sqlqueue.LeaseFor(lease), core.Timeout(2*time.Second)) // grace: 1 s
	warned := e.tap.watch("sqlqueue: handler past its timeout and grace; its lease is no longer extended and another claim may take the row")
	stop := e.run(a)
	waitFor(t, entered, "the handler")
	e.clock.Advance(lease / 2)
	r := waitFor(t, warned, "the extension to pass over the overrunning handler")
	if attr(r, "attempt").Int64() != 1 || attr(r, "queue").String() != "q" {
		t.Errorf("warning attrs: %v", r)
	}
	rows := e.rows(tb)
	if len(rows) != 1 {
		t.Fatalf("rows = %+v", rows)
	}
	e.timeIs("locked_until, not extended", rows[0].LockedUntil, Epoch.Add(lease))
	close(release)
	e.rec.WaitSettled(1)
	stop()
}
