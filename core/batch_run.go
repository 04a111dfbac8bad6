package core

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// batchWorker is one worker of a batch subscription: it fills a batch from the source under the
// pull lock, then handles it holding alone as a single-message worker holds it for one
// delivery (exclusively for a suspect delivery, which is always alone in its batch).
func (s *subscription) batchWorker(pullCtx, workCtx context.Context, pull *sync.Mutex, alone *sync.RWMutex, backoff *time.Duration, isolate bool) {
	b := s.batch()
	buf := make([]Delivery, 0, s.opts.BatchSize)
	for {
		pull.Lock()
		ds, ok := s.collect(pullCtx, backoff, buf)
		if !ok {
			pull.Unlock()
			return
		}
		switch {
		case !isolate:
			pull.Unlock()
			s.processBatch(workCtx, ds, b)
		case isSuspect(ds[0]):
			alone.Lock()
			pull.Unlock()
			s.processBatch(workCtx, ds, b)
			alone.Unlock()
		default:
			alone.RLock()
			pull.Unlock()
			s.processBatch(workCtx, ds, b)
			alone.RUnlock()
		}
	}
}

// collect fills buf with the next batch: the first delivery (waiting for it as long as it
// takes), then as many more as the source hands out within BatchWait, up to BatchSize. A
// suspect delivery is a batch of its own: taken first, it ends the batch at once; taken later,
// it is kept (carry) to start the next batch. False when pullCtx is done and nothing is
// carried. The caller holds the pull lock.
func (s *subscription) collect(pullCtx context.Context, backoff *time.Duration, buf []Delivery) ([]Delivery, bool) {
	buf = buf[:0]
	if d := s.carry; d != nil {
		s.carry = nil
		return append(buf, d), true
	}
	d, ok := s.next(pullCtx, backoff)
	if !ok {
		return nil, false
	}
	buf = append(buf, d)
	if s.opts.BatchSize == 1 || isSuspect(d) {
		return buf, true
	}
	wctx, cancel := clock.WithTimeout(pullCtx, s.app.clock, s.opts.BatchWait)
	defer cancel()
	for len(buf) < s.opts.BatchSize {
		d, err := s.src.Next(wctx)
		if err != nil {
			if wctx.Err() == nil { // the batch goes as it is; the next one backs off if this persists
				s.info.Logger.Error("settle: taking the next delivery of a batch failed; handling the batch taken so far", "error", err, "batch", len(buf))
				s.fail(err)
				s.report(Event{Kind: EventSourceFailed, Err: err})
			}
			break
		}
		s.inflight.Add(1)
		if isSuspect(d) {
			s.carry = d
			break
		}
		buf = append(buf, d)
	}
	return buf, true
}

// processBatch handles one batch: each delivery is admitted (charged, checked against the cap)
// and decoded on its own, those that fail are settled on their own, and the rest go to the
// handler in one call; each then gets its verdict through verdict, as a single message does,
// and the batch is finished together where the finisher can (BatchFinisher).
func (s *subscription) processBatch(ctx context.Context, ds []Delivery, b batchCall) {
	live := make([]Delivery, 0, len(ds)) // the finisher's: a fresh slice per batch
	b.start(len(ds))
	for _, d := range ds {
		if !s.admit(ctx, d) {
			continue
		}
		if err := b.decode(d); err != nil {
			s.fin.Finish(ctx, d, s.verdict(ctx, d, err), s.settled)
			continue
		}
		live = append(live, d)
	}
	if len(live) == 0 {
		return
	}
	hctx, stopTimeout := s.withTimeout(ctx, live[0], len(live))
	err := s.callBatch(hctx, b)
	stopTimeout()
	vs := s.batchVerdicts(ctx, live, err)
	if bf, ok := s.fin.(BatchFinisher); ok {
		bf.FinishBatch(ctx, live, vs, s.settled)
		return
	}
	for i, d := range live {
		s.fin.Finish(ctx, d, vs[i], s.settled)
	}
}

func (s *subscription) callBatch(ctx context.Context, b batchCall) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return b.call(ctx)
}

// batchVerdicts turns a batch handler's return value into one resolved verdict per delivery:
// a BatchResult's element for each, or the one answer for all. A BatchResult that does not fit
// the batch retries every message of it (the cap still applies): a handler's indexing mistake
// must not drop or dead-letter messages by a policy meant for their failures.
func (s *subscription) batchVerdicts(ctx context.Context, live []Delivery, err error) []Verdict {
	vs := make([]Verdict, len(live))
	var res *BatchResult
	if err != nil && errors.As(err, &res) {
		if bad := res.check(len(live)); bad != nil {
			var e *BatchResultError
			errors.As(bad, &e)
			s.info.Logger.Warn("settle: batch handler's result does not fit its batch; retrying the batch",
				"message_id", live[0].ID(), "batch", e.Batch, "result", e.Result, "problem", e.Problem)
			for i, d := range live {
				vs[i] = s.resolve(d, Verdict{Action: ActRetry, Cause: bad})
			}
			return vs
		}
	}
	for i, d := range live {
		e := err
		if res != nil {
			e = res.items[i].err
		}
		vs[i] = s.verdict(ctx, d, e)
	}
	return vs
}
