package sqlqueuetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// crashNeighbours: a poison row claimed with five neighbours (one worker: they are never handed
// to a handler) kills its process (frozen in its handler, its lease left to run out) three
// times. The poison row ends in the dead letter without its handler at attempt 4, "not settled
// after 3 attempts"; the neighbours, charged the one attempt of the claim they shared with it,
// are rescued one at a time, as suspects, and acked at attempt 2. Before, every new process
// claimed all six lapsed rows together, each crash charged all six, and after three crashes
// all six were dead-lettered.
func crashNeighbours(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	poison := e.publish(p, Refund{Card: "poison"})
	for i := range 5 {
		e.publish(p, Refund{Amount: i})
	}
	const lease = 10 * time.Second
	dead := make(chan struct{})
	defer close(dead)
	for round := 1; round <= crashLoopCap+1; round++ {
		// Each process's clock is past the previous one's lease; the previous process is
		// frozen in its handler (its own clock never moves: it never extends its leases).
		c := clock.NewVirtual(Epoch.Add(time.Duration(round-1) * (lease + time.Second)))
		entered := make(chan int, 1)
		a := e.app(c)
		subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
			if m.Payload.Card == "poison" {
				entered <- m.Attempt()
				<-dead
			}
			return nil
		}, core.DeadLetterAfter(crashLoopCap, "q.dead"), sqlqueue.LeaseFor(lease), sqlqueue.BatchSize(10), core.Workers(1))
		e.run(a)
		if round <= crashLoopCap {
			if at := waitFor(t, entered, "the poison row"); at != round {
				t.Fatalf("round %d: the poison row delivered with attempt %d; want %d", round, at, round)
			}
			continue
		}
		s := e.rec.WaitSettled(6)
		for _, x := range s {
			id, _ := sqlqueue.RowID(x.Delivery)
			sus, _ := x.Delivery.(core.Suspect)
			switch {
			case x.Err != nil:
				t.Errorf("row %d: settlement failed: %v", id, x.Err)
			case id == poison:
				if x.Verdict.Action != core.ActDeadLetter || x.Delivery.Attempt() != crashLoopCap+1 || !strings.Contains(core.Reason(x.Verdict), "not settled after 3 attempts") {
					t.Errorf("poison row: %v at attempt %d (%s); want a dead letter at attempt %d, not settled", x.Verdict, x.Delivery.Attempt(), core.Reason(x.Verdict), crashLoopCap+1)
				}
			case x.Verdict.Action != core.ActAck || x.Delivery.Attempt() != 2:
				t.Errorf("neighbour %d: %v at attempt %d (%s); want an ack at attempt 2", id, x.Verdict, x.Delivery.Attempt(), core.Reason(x.Verdict))
			case sus == nil || !sus.Suspect():
				t.Errorf("neighbour %d: its claim had lapsed, but it was not delivered as suspect", id)
			}
		}
		select {
		case at := <-entered:
			t.Fatalf("the poison row's handler was called at attempt %d, past the cap", at)
		default:
		}
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].ID != poison || rows[0].Group != "q.dead" || rows[0].Attempt != crashLoopCap+1 {
		t.Fatalf("rows = %+v; want only the poison row, in q.dead with attempt %d", rows, crashLoopCap+1)
	}
}

// givenBackUncounted: rows a stopping App had claimed but never handed to a handler are
// released with the attempt their claim counted taken back: no handler saw them, and a
// graceful stop must not bring them closer to the cap.
func givenBackUncounted(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	for i := range 4 {
		e.publish(p, Refund{Amount: i})
	}
	entered := make(chan int, 4)
	release := make(chan struct{})
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- m.Payload.Amount
		<-release
		return nil
	}, sqlqueue.BatchSize(4), sqlqueue.FlushLimits(100, 0), core.Workers(1))
	stop := e.run(a)
	waitFor(t, entered, "the first row")
	e.stopWhileHandling(stop, release)
	e.leftUntouched(tb, 3)
}

// leftUntouched checks that table tb holds the n rows never handed out, each as it was
// published: attempt 0, no lease.
func (e *env) leftUntouched(tb sqlqueue.Table, n int) {
	e.t.Helper()
	rows := e.rows(tb)
	if len(rows) != n {
		e.t.Fatalf("%d rows left: %+v; want the %d never handed out", len(rows), rows, n)
	}
	for _, r := range rows {
		if r.Attempt != 0 {
			e.t.Errorf("row %d never handed out: attempt %d; want 0", r.ID, r.Attempt)
		}
		e.isNull("locked_until of a row never handed out", r.LockedUntil)
	}
}

// givenBackAhead: the rows of a claim made ahead of the workers (lease form, the automatic
// claim size: internal/lease/ahead.go) and never handed out are released when the App stops, with the
// attempt their claim counted taken back, like the unhanded rows of the claim being handled.
// The first claim (10 rows) comes back full and fast, so the second (20 rows) runs the next
// one ahead as it hands out its first row, whose handler holds until the App stops.
func givenBackAhead(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	const n = 60
	for i := range n {
		e.publish(p, Refund{Amount: i})
	}
	ahead := e.tap.watch("sqlqueue: claimed ahead of the workers")
	entered := make(chan int, n)
	release := make(chan struct{})
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- m.Payload.Amount
		if m.Payload.Amount == 10 {
			<-release
		}
		return nil
	}, sqlqueue.FlushLimits(100, 0), core.Workers(1))
	stop := e.run(a)
	for want := range 11 {
		if got := waitFor(t, entered, "the first claim's rows and the second's first"); got != want {
			t.Fatalf("handled amount %d; want %d", got, want)
		}
	}
	r := waitFor(t, ahead, "a claim ahead of the workers")
	if rows := attr(r, "rows").Int64(); rows != n-30 {
		t.Errorf("the claim ahead took %d rows; want the %d left after the first two claims", rows, n-30)
	}
	e.stopWhileHandling(stop, release)
	e.leftUntouched(tb, n-11)
}

// givenBackAheadRowLock: the rows of a row-lock claim made ahead of the workers (the automatic
// claim size past its ramp: internal/rowlock/ahead.go) and never handed out are released when the App
// stops, their attempt as it was: the handler holds on the first row it gets after a claim
// ahead, until the App stops.
func givenBackAheadRowLock(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	const n = 400
	for i := range n {
		e.publish(p, Refund{Amount: i})
	}
	ahead := e.tap.watch("sqlqueue: claimed ahead of the workers")
	holds := make(chan bool, n) // per row handed out: whether its handler holds
	release := make(chan struct{})
	a := e.app(nil)
	held := false // the handler's own (one worker)
	subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormRowLock), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		select {
		case <-ahead:
			held = true
		default:
		}
		holds <- held
		if held {
			<-release
		}
		return nil
	}, sqlqueue.FlushLimits(100, 0), core.Workers(1))
	stop := e.run(a)
	handled := 0
	for {
		hold := waitFor(t, holds, "a row")
		handled++
		if hold {
			break
		}
		if handled == n {
			t.Fatal("every row was handled and no claim ran ahead of the worker")
		}
	}
	e.stopWhileHandling(stop, release)
	e.leftUntouched(tb, n-handled)
}

// rescuedUncounted: a process whose rescue claim of a lapsed row has committed and that dies
// before the row's handler starts charges the row nothing. The poison row's first process
// freezes in its handler (attempt 1, its lease runs out); the second freezes the moment its
// rescue claim of that row commits, as a process killed right there would; the row is still at
// attempt 1, and the third process hands it to its handler at attempt 2. Before, the rescue
// claim counted the attempt: the second process ran the handler, or, killed in between,
// charged the row an attempt no handler saw, and a row lapsed in one crash could reach the cap
// after a single run of its handler.
func rescuedUncounted(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb, p := e.deletingQueue()
	poison := e.publish(p, Refund{Card: "poison"})
	const lease = 10 * time.Second
	dead := make(chan struct{})
	defer close(dead)
	opts := []core.Option{core.DeadLetterAfter(crashLoopCap, "q.dead"), sqlqueue.LeaseFor(lease), core.Workers(1)}
	// process starts a process whose clock is past the previous one's lease; its handler
	// reports the attempt and freezes unless ack is set.
	process := func(round int, ep core.Endpoint, ack bool) <-chan int {
		entered := make(chan int, 1)
		a := e.app(clock.NewVirtual(Epoch.Add(time.Duration(round-1) * (lease + time.Second))))
		subscribe(e, a, ep, func(ctx context.Context, m *core.Message[Refund]) error {
			entered <- m.Attempt()
			if !ack {
				<-dead
			}
			return nil
		}, opts...)
		e.run(a)
		return entered
	}
	if at := waitFor(t, process(1, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), false), "the first handler"); at != 1 {
		t.Fatalf("first process: attempt %d; want 1", at)
	}
	fz := &freezing{DB: f.DB, mark: " IS NOT NULL", frozen: make(chan struct{}), dead: dead}
	ep, err := sqlqueue.NewLease(f.Dialect.(driver.LeaseDialect), fz, tb, "q")
	if err != nil {
		t.Fatalf("NewLease: %v", err)
	}
	second := process(2, ep, false)
	waitFor(t, fz.frozen, "the second process's rescue claim to commit")
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].ID != poison || rows[0].Attempt != 1 || rows[0].LockedUntil == nil {
		t.Fatalf("after a rescue claim whose handler never started: rows = %+v; want the poison row at attempt 1, leased", rows)
	}
	third := process(3, e.endpoint(formOf(f, sqlqueue.FormLease), tb, "q"), true)
	if at := waitFor(t, third, "the third handler"); at != 2 {
		t.Errorf("third process: attempt %d; want 2 (the second never ran the handler)", at)
	}
	select {
	case at := <-second:
		t.Errorf("the second process ran the handler (attempt %d) after it froze", at)
	default:
	}
	s := e.rec.WaitSettled(1)
	if x := s[0]; x.Err != nil || x.Verdict.Action != core.ActAck || x.Delivery.Attempt() != 2 {
		t.Errorf("settlement: %v at attempt %d (err %v); want an ack at attempt 2", x.Verdict, x.Delivery.Attempt(), x.Err)
	}
}

// freezing is a DB that freezes, as a process killed at that moment would stop, as soon as a
// transaction that ran a statement containing mark (the lease form's rescue claim is the one
// statement in a transaction that looks for a locked_until IS NOT NULL) has committed: every call from then on
// blocks until dead is closed, and then fails.
type freezing struct {
	sqlqueue.DB
	mark   string
	frozen chan struct{}
	once   sync.Once
	dead   <-chan struct{}
}

var errFrozen = errors.New("sqlqueuetest: the process is frozen")

func (z *freezing) wait() error {
	select {
	case <-z.frozen:
		<-z.dead
		return errFrozen
	default:
		return nil
	}
}

func (z *freezing) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	if err := z.wait(); err != nil {
		return sqlqueue.Result{}, err
	}
	return z.DB.Exec(ctx, sql, args...)
}

func (z *freezing) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	if err := z.wait(); err != nil {
		return nil, err
	}
	return z.DB.Query(ctx, sql, args...)
}

func (z *freezing) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	if err := z.wait(); err != nil {
		return nil, err
	}
	tx, err := z.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &freezingTx{Transaction: tx, z: z}, nil
}

func (z *freezing) Conn(ctx context.Context) (driver.Conn, error) {
	if err := z.wait(); err != nil {
		return nil, err
	}
	return z.DB.Conn(ctx)
}

type freezingTx struct {
	sqlqueue.Transaction
	z      *freezing
	marked bool
}

func (x *freezingTx) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	x.marked = x.marked || strings.Contains(sql, x.z.mark)
	return x.Transaction.Exec(ctx, sql, args...)
}

func (x *freezingTx) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	x.marked = x.marked || strings.Contains(sql, x.z.mark)
	return x.Transaction.Query(ctx, sql, args...)
}

func (x *freezingTx) Commit(ctx context.Context) error {
	err := x.Transaction.Commit(ctx)
	if err == nil && x.marked {
		x.z.once.Do(func() { close(x.z.frozen) })
	}
	return err
}

// RunCrash runs the cases of processes that die with deliveries in hand: a poison row must
// reach its dead letter after the cap without taking the rows claimed beside it along, and
// rows a stopping process claimed but never handed out keep their attempt.
func RunCrash(t *testing.T, open Open) {
	f := open(t)
	if f.Lease != nil {
		t.Run("lease/neighbours", func(t *testing.T) { t.Parallel(); crashNeighbours(t, open(t)) })
		t.Run("lease/given_back", func(t *testing.T) { t.Parallel(); givenBackUncounted(t, open(t)) })
		t.Run("lease/given_back_ahead", func(t *testing.T) { t.Parallel(); givenBackAhead(t, open(t)) })
		if _, ok := f.Dialect.(driver.LeaseDialect); ok {
			t.Run("lease/rescued_uncounted", func(t *testing.T) { t.Parallel(); rescuedUncounted(t, open(t)) })
		}
	}
	// (A single-writer database holds one row-lock claim at a time: nothing is claimed beside a
	// crash there.)
	if f.RowLock != nil && !driver.IsSingleWriter(f.Dialect) {
		t.Run("rowlock/neighbours", func(t *testing.T) { t.Parallel(); crashNeighboursRowLock(t, open(t)) })
		t.Run("rowlock/given_back_ahead", func(t *testing.T) { t.Parallel(); givenBackAheadRowLock(t, open(t)) })
	}
	if f.Advisory != nil {
		t.Run("advisory/neighbours", func(t *testing.T) { t.Parallel(); crashNeighboursAdvisory(t, open(t)) })
	}
}

// crashNeighboursAdvisory: the advisory form, four workers, a poison row and three neighbours
// all in their handlers when the process dies (the App stops under them and their deliveries
// are abandoned; its connections close and release their keys, as a killed process's would).
// Each next process takes the poison row alone, as a suspect, while the neighbours wait; after
// three crashes the poison row goes to the dead letter without its handler, and the neighbours,
// charged the one attempt of the first crash, are acked at attempt 2. Before, every process
// took all four again, and after three crashes all four were dead-lettered.
func crashNeighboursAdvisory(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	poison := e.publish(p, Refund{Card: "poison"})
	for i := range 3 {
		e.publish(p, Refund{Amount: i})
	}
	quit := make(chan struct{})
	defer close(quit)
	for round := 1; round <= crashLoopCap+1; round++ {
		entered := make(chan int64, 4)
		a := e.app(nil, core.WithShutdownTimeout(time.Second))
		subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormAdvisory), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
			id, _ := sqlqueue.RowID(m.Delivery())
			if round > crashLoopCap {
				return nil
			}
			entered <- id
			select { // dies here: never returns on its own
			case <-ctx.Done():
			case <-quit:
			}
			return ctx.Err()
		}, core.DeadLetterAfter(crashLoopCap, "q.dead"), core.Workers(4))
		stop := e.run(a)
		if round > crashLoopCap {
			break
		}
		want := 1 // the lapsed poison row, alone
		if round == 1 {
			want = 4
		}
		for range want {
			if id := waitFor(t, entered, "a handler"); round > 1 && id != poison {
				t.Fatalf("round %d: row %d delivered; want the lapsed poison row alone", round, id)
			}
		}
		armed := e.clock.Pending()
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		if err := e.clock.BlockUntil(e.ctx, armed+1); err != nil { // the shutdown timeout
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		waitFor(t, stopped, "the App to stop")
		select {
		case id := <-entered:
			t.Fatalf("round %d: row %d delivered beside the lapsed poison row", round, id)
		default:
		}
	}
	e.rec.WaitFor(func(all []core.Settlement) bool {
		n := 0
		for _, s := range all {
			if s.Err == nil && s.Verdict.Action != core.ActAbandon {
				n++
			}
		}
		return n == 4
	})
	for _, x := range e.rec.Settlements() {
		id, _ := sqlqueue.RowID(x.Delivery)
		switch {
		case x.Verdict.Action == core.ActAbandon:
		case x.Err != nil:
			t.Errorf("row %d: settlement failed: %v", id, x.Err)
		case id == poison:
			if x.Verdict.Action != core.ActDeadLetter || x.Delivery.Attempt() != crashLoopCap+1 || !strings.Contains(core.Reason(x.Verdict), "not settled after 3 attempts") {
				t.Errorf("poison row: %v at attempt %d (%s); want a dead letter at attempt %d, not settled", x.Verdict, x.Delivery.Attempt(), core.Reason(x.Verdict), crashLoopCap+1)
			}
		case x.Verdict.Action != core.ActAck || x.Delivery.Attempt() != 2:
			t.Errorf("neighbour %d: %v at attempt %d (%s); want an ack at attempt 2", id, x.Verdict, x.Delivery.Attempt(), core.Reason(x.Verdict))
		}
	}
	for _, r := range e.rows(tb) {
		switch {
		case r.ID == poison:
			if r.Group != "q.dead" || r.Attempt != crashLoopCap+1 {
				t.Errorf("poison row: group %q attempt %d; want q.dead with attempt %d", r.Group, r.Attempt, crashLoopCap+1)
			}
		case r.ProcessedAt == nil || r.Group != "q":
			t.Errorf("neighbour %d not processed: %+v", r.ID, r)
		}
	}
}

// crashShutdown is the shutdown timeout of the Apps crashStop stops: far longer than any other
// timer they arm (the poll interval), so that crashStop can tell it from them.
const crashShutdown = time.Minute

// crashStop stops an App (whose shutdown timeout is crashShutdown) with handlers that never
// return on their own, as a crash would leave them: it fires the App's shutdown timeout, which
// cancels the handlers and abandons their deliveries, and then waits for the App to stop. It
// fires no timer armed after that one: the App's next timeouts would close the source under
// the abandons it is still settling and then return without them, their claims' transactions
// still holding the rows into the next process, which would then pass over them (a killed
// process's connections close, and release its rows, before another process starts).
func (e *env) crashStop(stop func()) {
	e.t.Helper()
	cancelled := e.tap.watch(shutdownTimedOut)
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	for {
		// Until the shutdown timeout, the App's pollers may still be armed: fire each that
		// comes first (the App has stopped pulling, or will find it has when it looks). Each
		// moves the clock by at most a poll interval, possibly after the shutdown timeout was
		// armed: that one is the timer due more than half of it ahead.
		if err := e.clock.BlockUntil(e.ctx, 1); err != nil {
			e.t.Fatal(err)
		}
		due, ok := e.clock.NextDue()
		if !ok {
			continue // disarmed in between
		}
		shutdown := due.Sub(e.clock.Now()) > crashShutdown/2
		e.clock.AdvanceTo(due)
		if shutdown {
			break
		}
	}
	waitFor(e.t, cancelled, "the shutdown timeout to cancel the handlers")
	waitFor(e.t, stopped, "the App to stop")
	if l := e.logs.Find(shutdownUnder); len(l) > 0 {
		e.t.Fatalf("the App closed its source under the abandoned handlers (%v); want it stopped once their claims ended", l)
	}
}

// The App's log lines when its shutdown timeout cancels the handlers still running, and when
// they are still running a timeout after that.
const (
	shutdownTimedOut = "settle: shutdown timeout: cancelling handlers still running; their deliveries are abandoned and come back"
	shutdownUnder    = "settle: handlers ignored cancellation; closing backends under them (their messages return by rollback, lease or requeue)"
)

// crashNeighboursRowLock: the row-lock form counting at claim, four workers each in a claim of
// one row (the claim size starts at one) — a poison row and three neighbours — when the
// process dies (the App stops under the handlers; the claims end without settling them, their
// committed counts and marks stay). Each next process takes the poison row alone, as a suspect,
// while the neighbours wait; after three crashes the poison row goes to the dead letter without
// its handler, and the neighbours are acked at attempt 2. Before, every process claimed all four
// again, and after three crashes all four were dead-lettered.
func crashNeighboursRowLock(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	poison := e.publish(p, Refund{Card: "poison"})
	for i := range 3 {
		e.publish(p, Refund{Amount: i})
	}
	quit := make(chan struct{})
	defer close(quit)
	for round := 1; round <= crashLoopCap+1; round++ {
		entered := make(chan int64, 4)
		a := e.app(nil, core.WithShutdownTimeout(crashShutdown))
		subscribe(e, a, e.endpoint(formOf(f, sqlqueue.FormRowLock), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
			id, _ := sqlqueue.RowID(m.Delivery())
			if round > crashLoopCap {
				return nil
			}
			entered <- id
			select { // dies here: never returns on its own
			case <-ctx.Done():
			case <-quit:
			}
			return ctx.Err()
		}, core.DeadLetterAfter(crashLoopCap, "q.dead"), core.Workers(4), sqlqueue.BatchSize(4), sqlqueue.CountAtClaim(true))
		stop := e.run(a)
		if round > crashLoopCap {
			break
		}
		want := 1 // the lapsed poison row, alone
		if round == 1 {
			want = 4
		}
		for range want {
			if id := waitFor(t, entered, "a handler"); round > 1 && id != poison {
				t.Fatalf("round %d: row %d delivered; want the lapsed poison row alone", round, id)
			}
		}
		if round > 1 {
			// The other workers claim nothing beside the suspect: one of them waits on the
			// clock (its poll) instead of entering a handler.
			idle := make(chan error, 1)
			go func() { idle <- e.clock.BlockUntil(e.ctx, 1) }()
			select {
			case id := <-entered:
				t.Fatalf("round %d: row %d delivered beside the lapsed poison row", round, id)
			case err := <-idle:
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		e.crashStop(stop)
		select {
		case id := <-entered:
			t.Fatalf("round %d: row %d delivered beside the lapsed poison row", round, id)
		default:
		}
	}
	e.rec.WaitFor(func(all []core.Settlement) bool {
		n := 0
		for _, s := range all {
			if s.Err == nil && s.Verdict.Action != core.ActAbandon {
				n++
			}
		}
		return n == 4
	})
	for _, x := range e.rec.Settlements() {
		id, _ := sqlqueue.RowID(x.Delivery)
		switch {
		case x.Verdict.Action == core.ActAbandon:
		case x.Err != nil:
			t.Errorf("row %d: settlement failed: %v", id, x.Err)
		case id == poison:
			if x.Verdict.Action != core.ActDeadLetter || x.Delivery.Attempt() != crashLoopCap+1 {
				t.Errorf("poison row: %v at attempt %d (%s); want a dead letter at attempt %d", x.Verdict, x.Delivery.Attempt(), core.Reason(x.Verdict), crashLoopCap+1)
			}
		case x.Verdict.Action != core.ActAck || x.Delivery.Attempt() != 2:
			t.Errorf("neighbour %d: %v at attempt %d (%s); want an ack at attempt 2", id, x.Verdict, x.Delivery.Attempt(), core.Reason(x.Verdict))
		}
	}
}
