package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// BatchHandler is a typed handler of a batch subscription (SubscribeBatch): it is called with up
// to the subscription's BatchSize decoded messages, each with its own id, attempt and headers,
// in the order they were taken. It returns
//
//   - nil to acknowledge every message of the batch;
//   - an outcome (Drop, Retry, RetryAfter) or any other error, for every message of the batch:
//     each message takes it as a single message's handler would (an error takes the error
//     policy, a retry at the cap becomes a dead letter, each message counted by its own attempt);
//   - a *BatchResult (NewBatchResult) to settle each message on its own.
//
// The slice and the messages are the handler's: core does not reuse them.
type BatchHandler[T any] func(ctx context.Context, batch []*Message[T]) error

// BatchResult is a batch handler's answer for each message of its batch: element i settles
// batch[i]. It is built with NewBatchResult(len(batch)) and one call per element (Ack, Retry,
// RetryAfter, Drop, Fail), and returned as the handler's error. A result that does not fit its
// batch — of another length, with an element given twice, out of range, or never given — is
// not guessed at: every message of the batch is retried (a retry at the cap is a dead letter,
// as always), with a *BatchResultError as the cause, and a warning says what was wrong, with
// the counts.
type BatchResult struct {
	items   []batchItem
	problem string // the first misuse, "" when none
}

type batchItem struct {
	set bool
	err error // nil: ack
}

// NewBatchResult returns a result for a batch of n messages, none of them answered yet.
func NewBatchResult(n int) *BatchResult {
	return &BatchResult{items: make([]batchItem, max(n, 0))}
}

// Ack acknowledges message i.
func (r *BatchResult) Ack(i int) *BatchResult { return r.set(i, nil) }

// Retry returns message i for another attempt (Retry).
func (r *BatchResult) Retry(i int) *BatchResult { return r.set(i, Retry()) }

// RetryAfter returns message i for another attempt after d (RetryAfter).
func (r *BatchResult) RetryAfter(i int, d time.Duration) *BatchResult {
	return r.set(i, RetryAfter(d))
}

// Drop settles message i as not to be processed again (Drop).
func (r *BatchResult) Drop(i int) *BatchResult { return r.set(i, Drop()) }

// Fail answers message i with err, as a single message's handler returning err would: an
// outcome is performed, any other error takes the error policy. A nil err is a misuse (use Ack).
func (r *BatchResult) Fail(i int, err error) *BatchResult {
	if err == nil {
		r.misuse("Fail(" + strconv.Itoa(i) + ", nil): no error (use Ack)")
		return r
	}
	return r.set(i, err)
}

// Len is the number of messages the result answers for.
func (r *BatchResult) Len() int { return len(r.items) }

func (r *BatchResult) set(i int, err error) *BatchResult {
	switch {
	case i < 0 || i >= len(r.items):
		r.misuse("element " + strconv.Itoa(i) + " is out of range for a result of " + strconv.Itoa(len(r.items)))
	case r.items[i].set:
		r.misuse("element " + strconv.Itoa(i) + " is answered twice")
	default:
		r.items[i] = batchItem{set: true, err: err}
	}
	return r
}

func (r *BatchResult) misuse(p string) {
	if r.problem == "" {
		r.problem = p
	}
}

// Error says the result is a per-message one; a handler returns it as its error.
func (r *BatchResult) Error() string {
	return "settle: per-message batch result of " + strconv.Itoa(len(r.items)) + " elements"
}

// check returns what makes r unfit for a batch of n messages, nil when it fits.
func (r *BatchResult) check(n int) error {
	if r.problem != "" {
		return &BatchResultError{Batch: n, Result: len(r.items), Problem: r.problem}
	}
	if len(r.items) != n {
		return &BatchResultError{Batch: n, Result: len(r.items), Problem: "the result's length is not the batch's"}
	}
	for i := range r.items {
		if !r.items[i].set {
			return &BatchResultError{Batch: n, Result: len(r.items), Problem: "element " + strconv.Itoa(i) + " is never answered"}
		}
	}
	return nil
}

// BatchResultError is the cause of the retry of every message of a batch whose handler's
// BatchResult does not fit it.
type BatchResultError struct {
	// Batch is the number of messages the handler was given; Result the length of its result.
	Batch, Result int
	// Problem says what is wrong.
	Problem string
}

func (e *BatchResultError) Error() string {
	return fmt.Sprintf("settle: batch result does not fit its batch of %d messages (result of %d): %s", e.Batch, e.Result, e.Problem)
}

// BatchFinisher is implemented by a Finisher that settles a batch's deliveries together: one
// statement for the batch on a SQL queue, a `multiple` acknowledgement on RabbitMQ, pipelined
// acknowledgements on NATS. Core calls FinishBatch with the deliveries a batch handler was given
// and their verdicts (vs[i] for ds[i], each resolved on its own: they may differ); without it,
// core calls Finish for each. FinishBatch keeps Finish's contract for every delivery: it calls
// settled exactly once per delivery, when that settlement is durable or has failed, maybe
// later and from another goroutine, and does not block on other batches. The slices are the
// finisher's.
//
// Deliveries settled before the handler runs (one whose payload does not decode, one past its
// cap, one whose attempt could not be counted) are finished one by one with Finish.
type BatchFinisher interface {
	Finisher
	FinishBatch(ctx context.Context, ds []Delivery, vs []Verdict, settled Settled)
}

// BatchSize makes a batch subscription (SubscribeBatch) hand its handler up to n messages at a
// time (default 100). Backends size their claims and prefetch to it (see Options.BatchSize).
func BatchSize(n int) Option {
	return OptionFunc(func(o *Options) error {
		if n < 1 {
			return fmt.Errorf("BatchSize(%d): a batch holds at least one message", n)
		}
		o.BatchSize = n
		o.batchOpts = append(o.batchOpts, "core.BatchSize")
		return nil
	})
}

// BatchWait bounds how long a batch subscription (SubscribeBatch) waits, on the App's clock,
// to fill a batch once its first message has arrived (default 100 ms): the handler then gets
// the partial batch.
func BatchWait(d time.Duration) Option {
	return OptionFunc(func(o *Options) error {
		if d <= 0 {
			return fmt.Errorf("BatchWait(%v): the wait must be positive", d)
		}
		o.BatchWait = d
		o.batchOpts = append(o.batchOpts, "core.BatchWait")
		return nil
	})
}

// Defaults of a batch subscription.
const (
	DefaultBatchSize = 100
	DefaultBatchWait = 100 * time.Millisecond
)

// SubscribeBatch mounts the batch handler h on the queue ep: h gets up to BatchSize messages at
// a time (a partial batch after BatchWait), and answers for all of them or for each (see
// BatchHandler). Every message of a batch is settled as a single message would be, through the
// same verdicts: its own attempt against the DeadLetterAfter cap, the error and panic policies
// (a panic takes the panic policy for every message of the batch), and a dead letter with its
// reason. A payload that does not decode takes the decode policy on its own and never enters a
// batch. A delivery that may have killed the process (Suspect) is handled alone, in a batch of
// one, with nothing else of the subscription running, so that a message that keeps crashing
// the process reaches the cap and its dead letter without its neighbours.
//
// A batch handler is not wrapped in middleware: SubscribeBatch refuses core.Use, and the App's
// middleware (WithMiddleware) wraps single-message handlers only (the subscription says so in a
// line when it opens). It refuses core.Replies. A
// backend whose deliveries give their handler a context of their own (DeliveryContext: a
// transaction) gives none to a batch handler; such a backend refuses batch subscriptions in
// Open until it has a form for them.
func SubscribeBatch[T any](a *App, ep Endpoint, h BatchHandler[T], opts ...Option) error {
	if ep == nil {
		return errors.New("settle: SubscribeBatch: nil endpoint")
	}
	if h == nil {
		return fmt.Errorf("settle: SubscribeBatch on %q: nil handler", ep.Queue())
	}
	o, err := buildOptions(opts)
	if err != nil {
		return fmt.Errorf("settle: SubscribeBatch on %q: %w", ep.Queue(), err)
	}
	switch {
	case len(o.Middleware) > 0:
		return fmt.Errorf("settle: SubscribeBatch on %q: core.Use does not apply to a batch handler (middleware wraps one message's handler)", ep.Queue())
	case len(o.Replies) > 0:
		return fmt.Errorf("settle: SubscribeBatch on %q: core.Replies does not apply to a batch handler (reply from a single-message subscription)", ep.Queue())
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchWait == 0 {
		o.BatchWait = DefaultBatchWait
	}
	codec := o.Codec
	newBatch := func() batchCall { return &typedBatch[T]{h: h, codec: codec} }
	return a.add(ep, o, &subscription{batch: newBatch, payload: reflect.TypeFor[T]()})
}

// batchCall is one worker's batch in the making: the typed half of a batch subscription.
type batchCall interface {
	// start begins a batch of up to n messages.
	start(n int)
	// decode decodes d's payload and adds it to the batch; a *DecodeError when it does not decode.
	decode(d Delivery) error
	// call calls the handler with the batch and starts a new one.
	call(ctx context.Context) error
}

type typedBatch[T any] struct {
	h     BatchHandler[T]
	codec Codec
	msgs  []*Message[T]
}

func (b *typedBatch[T]) start(n int) { b.msgs = make([]*Message[T], 0, n) }

func (b *typedBatch[T]) decode(d Delivery) error {
	m := &Message[T]{d: d}
	body := d.Body()
	if err := b.codec.Unmarshal(body, &m.Payload); err != nil {
		return &DecodeError{Size: len(body), Err: err}
	}
	b.msgs = append(b.msgs, m)
	return nil
}

func (b *typedBatch[T]) call(ctx context.Context) error {
	msgs := b.msgs
	b.msgs = nil // the handler keeps its slice
	return b.h(ctx, msgs)
}
