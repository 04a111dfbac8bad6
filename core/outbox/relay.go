package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// Waits of the background relay after a failed run.
const (
	relayRetryFirst = time.Second
	relayRetryMax   = time.Minute
)

// markEvery is how many confirmed records the relay marks in one statement.
const markEvery = 100

// Start checks the table and starts the relay in the background: it publishes every record not
// published yet, at RelayRate, then sweeps (SweepEvery) and prunes (PruneAfter) until Close.
// Only a missing table or column fails start-up; the App's readiness does not wait for the
// relay. A relay run that fails (the transport refuses a publish, the database is away) is
// logged and run again after a doubling wait (1 s to 1 min) on the outbox's clock.
func (o *Outbox) Start(ctx context.Context) error {
	if err := o.t.check(ctx, o.d, o.db); err != nil {
		return err
	}
	rctx, stop := context.WithCancel(context.Background())
	o.stop, o.done = stop, make(chan struct{})
	go o.run(rctx)
	return nil
}

// Close stops the relay, waiting for the record it is publishing, and waits for the receiver's
// pending marks (WaitMarked).
func (o *Outbox) Close() error {
	if o.stop != nil {
		o.stop()
		<-o.done
		o.stop = nil
	}
	return o.marks.wait(context.Background())
}

// Kick makes the relay run now instead of at its next sweep.
func (o *Outbox) Kick() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

func (o *Outbox) run(ctx context.Context) {
	defer close(o.done)
	if !o.relayUntilDone(ctx, "at start") {
		return
	}
	var sweep, prune clock.Timer
	var sweepC, pruneC <-chan time.Time
	if o.sweep > 0 {
		sweep = o.clock.NewTimer(o.sweep)
		defer sweep.Stop()
		sweepC = sweep.C()
	}
	if o.pruneEvery > 0 {
		prune = o.clock.NewTimer(o.pruneEvery)
		defer prune.Stop()
		pruneC = prune.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		// Each timer is re-armed once its work is done: the next sweep (prune) comes a full
		// interval after the last one ended.
		case <-sweepC:
			o.relayUntilDone(ctx, "in a sweep")
			sweep.Reset(o.sweep)
		case <-o.kick:
			o.relayUntilDone(ctx, "when kicked")
		case <-pruneC:
			o.pruneOnce(ctx)
			prune.Reset(o.pruneEvery)
		}
	}
}

// relayUntilDone runs the relay until a run completes, waiting a doubling backoff between
// failed runs; false when ctx ended it.
func (o *Outbox) relayUntilDone(ctx context.Context, when string) bool {
	var wait time.Duration
	for {
		n, err := o.PublishPending(ctx)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			if n > 0 || when == "at start" {
				o.log.Info("outbox: relayed the unpublished records "+when, "table", o.t.Ref().String(), "published", n)
			}
			return true
		}
		wait = clock.Backoff(wait, relayRetryFirst, relayRetryMax)
		o.log.Warn("outbox: relaying unpublished records failed; trying again", "table", o.t.Ref().String(),
			"published", n, "retry_in", wait, "error", err)
		if clock.Sleep(ctx, o.clock, wait) != nil {
			return false
		}
	}
}

// pendingRecord is a record the relay has still to publish.
type pendingRecord struct {
	id      int64
	dest    string
	payload []byte
	headers map[string]string
}

// PublishPending publishes, paced by RelayRate on the outbox's clock, every record not marked
// published yet, marks each once the transport confirmed it, and returns how many it
// published. It stops at the first failed publish: that record and the ones after it stay
// unpublished.
func (o *Outbox) PublishPending(ctx context.Context) (int, error) {
	start := o.clock.Now()
	interval := time.Second / time.Duration(o.rate)
	count := 0
	var last int64
	done := make([]int64, 0, markEvery)
	flush := func() error {
		// A mark outlives the caller's cancellation: the records are out, and an unmarked one
		// would be published again.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err := o.markDone(mctx, done)
		done = done[:0]
		return err
	}
	for {
		page, err := o.pending(ctx, last)
		if err != nil {
			return count, err
		}
		if len(page) == 0 {
			return count, nil
		}
		for _, r := range page {
			last = r.id
			if !o.claim(r.id) {
				continue // Send is publishing it
			}
			if wait := start.Add(time.Duration(count) * interval).Sub(o.clock.Now()); wait > 0 {
				if err := clock.Sleep(ctx, o.clock, wait); err != nil {
					o.release(r.id)
					return count, flushed(flush(), err)
				}
			}
			if err := o.publish(ctx, r.id, r.dest, r.payload, r.headers); err != nil {
				return count, flushed(flush(), err)
			}
			done = append(done, r.id)
			count++
			if len(done) == markEvery {
				if err := flush(); err != nil {
					return count, err
				}
			}
		}
		if err := flush(); err != nil {
			return count, err
		}
	}
}

// flushed returns the mark's error if the run's own is nil.
func flushed(markErr, err error) error {
	if err != nil {
		return err
	}
	return markErr
}

// pending reads the next page of unpublished records after id.
func (o *Outbox) pending(ctx context.Context, after int64) ([]pendingRecord, error) {
	rows, err := o.db.Query(ctx, o.selectPending, after)
	if err != nil {
		return nil, o.readErr(err)
	}
	defer rows.Close()
	var page []pendingRecord
	for rows.Next() {
		var r pendingRecord
		var raw []byte
		if err := rows.Scan(&r.id, &r.dest, &r.payload, &raw); err != nil {
			return nil, o.readErr(err)
		}
		if r.headers, err = DecodeHeaders(raw); err != nil {
			o.log.Warn("outbox: record headers are not a JSON object of strings; publishing without them",
				"table", o.t.Ref().String(), "record_id", r.id, "error", err)
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, o.readErr(err)
	}
	return page, nil
}

func (o *Outbox) readErr(err error) error {
	return fmt.Errorf("outbox: reading unpublished records of %s: %w", o.t.Ref(), err)
}

// pruneOnce deletes the records published more than the prune age ago.
func (o *Outbox) pruneOnce(ctx context.Context) {
	cutoff := o.now().Add(-o.pruneAge)
	r, err := o.db.Exec(ctx, o.prune, o.d.Time(cutoff))
	if err != nil {
		if ctx.Err() == nil {
			o.log.Warn("outbox: pruning published records failed; trying again at the next prune", "table", o.t.Ref().String(), "error", err)
		}
		return
	}
	if r.RowsAffected > 0 {
		o.log.Info("outbox: pruned published records", "table", o.t.Ref().String(), "deleted", r.RowsAffected, "published_before", cutoff)
	}
}
