package lease

import (
	"errors"

	"github.com/settlehq/settle/core"
)

// This file is what every completion strategy does once a settlement is over: record it (a
// failed one holds the row back), forget the delivery, and tell core.

// done records d's settlement and reports it (one delivery, settled alone).
func (l *Source) done(d *delivery, v core.Verdict, err error, settled core.Settled) {
	l.record(d, v, err)
	l.track.forget(d)
	if settled != nil {
		settled(d, v, err)
	}
}

// report tells core how items were settled: err for all, or per item lost (nil lost: none) or
// done. Each item is recorded as done records it (its outcome kept in its err), then all are
// forgotten under one hold of the tracker's lock, then reported.
func (l *Source) report(items []item, lost []bool, err error) {
	for i := range items {
		it := &items[i]
		it.err = err
		if err == nil && lost != nil && lost[i] {
			it.err = l.lost(it.d)
		}
		if it.err == nil {
			l.rt.WakeAfter(it.v)
		}
		l.record(it.d, it.v, it.err)
	}
	l.track.forgetAll(items)
	for _, it := range items {
		if it.settled != nil {
			it.settled(it.d, it.v, it.err)
		}
	}
	l.settle.settledSome()
}

// record notes d's settlement (err: how it failed) before it is forgotten and reported. A
// settlement that failed (its row still holds this delivery's lease) holds the row back for its
// failure backoff.
func (l *Source) record(d *delivery, v core.Verdict, err error) {
	rt := l.rt
	switch {
	case err == nil:
		rt.Holds.Settled(d.RowID())
	case v.Action != core.ActAbandon && !errors.Is(err, ErrLeaseLost):
		until, _ := rt.Holds.Failed(&d.Delivery, v, err)
		rt.Holds.HoldAlone(l.st.Settlements, &d.Delivery, d.token, v, err, until)
	}
	d.mu.Lock()
	d.settled = true
	d.mu.Unlock()
}

// lost is the error of d's settlement that found its row under another claim's lease.
func (l *Source) lost(d *delivery) error {
	l.rt.Log.Warn("sqlqueue: lease lost; another claim owns the row and the settlement changed nothing",
		"queue", l.rt.Q.Name, "message_id", d.ID(), "attempt", d.Attempt())
	return &LeaseLostError{Queue: l.rt.Q.Name, Table: l.rt.Table, ID: d.RowID(), Attempt: d.Attempt()}
}
