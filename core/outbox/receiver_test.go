package outbox

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// slowDB is a database whose statements wait until release is closed, and report each
// statement they ran on ran.
type slowDB struct {
	driver.DB
	release chan struct{}
	ran     chan []any
}

func (db *slowDB) Exec(ctx context.Context, _ string, args ...any) (driver.Result, error) {
	select {
	case <-db.release:
	case <-ctx.Done():
		return driver.Result{}, ctx.Err()
	}
	db.ran <- args
	return driver.Result{RowsAffected: 1}, nil
}

// qDialect spells SQL with ? placeholders and keeps times as they are.
type qDialect struct{ sqlqueue.Dialect }

func (qDialect) Name() string           { return "q" }
func (qDialect) Quote(s string) string  { return `"` + s + `"` }
func (qDialect) Placeholder(int) string { return "?" }
func (qDialect) Time(t time.Time) any   { return t }
func (qDialect) Returning() bool        { return false }

// recordDelivery is a delivery of an outbox record.
type recordDelivery struct {
	core.Delivery
	id int64
}

func (d recordDelivery) ID() string   { return "m1" }
func (d recordDelivery) Attempt() int { return 1 }
func (d recordDelivery) Headers() map[string]string {
	return map[string]string{HeaderID: strconv.FormatInt(d.id, 10)}
}

// TestReceiverMarksOffTheSettlementPath: the receiver's mark of a dropped record runs after the
// settlement observer returned, on a goroutine of its own: a database that takes its time does
// not hold up the settlement path; WaitMarked (and Close) wait for the mark.
func TestReceiverMarksOffTheSettlementPath(t *testing.T) {
	db := &slowDB{release: make(chan struct{}), ran: make(chan []any, 1)}
	o, err := newOutbox(qDialect{}, db, StandardTable("outbox"), nil)
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	go func() {
		o.settled(core.Settlement{Queue: "payouts", Delivery: recordDelivery{id: 7}, Verdict: core.Verdict{Action: core.ActDrop}})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the settlement observer waited for the database")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.WaitMarked(ctx); err == nil {
		t.Fatal("WaitMarked returned before the mark was written")
	}
	close(db.release)
	if err := o.WaitMarked(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case args := <-db.ran:
		if args[len(args)-1] != int64(7) {
			t.Errorf("the mark named %v; want record 7 last", args)
		}
	default:
		t.Fatal("WaitMarked returned without the mark")
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
}
