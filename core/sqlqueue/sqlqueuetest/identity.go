package sqlqueuetest

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// RunIdentity runs the cases about a table's identity: the advisory form's keys name the
// table as the server identifies it, so two spellings of one table (qualified with
// Fixture.Schema, and unqualified) serialise each other's rows. Skipped without the advisory
// form or without Fixture.Schema.
func RunIdentity(t *testing.T, open Open) {
	t.Run("advisory/two spellings", func(t *testing.T) {
		f := open(t)
		if f.Advisory == nil {
			t.Skip("the dialect has no advisory form")
		}
		if f.Schema == "" {
			t.Skip("Fixture.Schema is not set: the suite cannot spell the table both ways")
		}
		twoSpellings(t, f)
	})
}

// twoSpellings: one subscription holds a row through the qualified spelling of its table; a
// second App, subscribed through the unqualified spelling, must pass the held row over and take
// the next one.
func twoSpellings(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	fm := formOf(f, sqlqueue.FormAdvisory)
	plain := sqlqueue.StandardTable("spelled")
	plain.Columns.ProcessedAt = ""
	qualified := plain
	qualified.Schema = f.Schema
	e.create(plain)
	p := e.publisher(plain, "q")
	first := e.publish(p, Refund{Card: "held"})

	held, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // a failure below must not leave the handler waiting while the App stops
	a := e.app(nil)
	subscribe(e, a, e.endpoint(fm, qualified, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		held <- m.ID()
		<-release
		return nil
	}, sqlqueue.BatchSize(1))
	stopA := e.run(a)
	if id := waitFor(t, held, "the qualified subscription's delivery"); id != strconv.FormatInt(first, 10) {
		t.Fatalf("the qualified subscription took row %s; want %d", id, first)
	}

	second := e.publish(p, Refund{Card: "free"})
	got := make(chan string, 2)
	b := e.app(nil)
	subscribe(e, b, e.endpoint(fm, plain, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		got <- m.ID()
		return nil
	}) // a window of more than one row: a dialect without AdvisoryFilter passes the held key over by TryLock
	stopB := e.run(b)
	if id := waitFor(t, got, "the unqualified subscription's delivery"); id != strconv.FormatInt(second, 10) {
		t.Fatalf("the unqualified subscription (table %s) took row %s while the qualified one (table %s) held it: "+
			"their advisory keys differ, so one row was handled twice at once", plain.Ref(), id, qualified.Ref())
	}
	free()
	e.rec.WaitSettled(2)
	stopB()
	stopA()
	if rows := e.rows(plain); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}
