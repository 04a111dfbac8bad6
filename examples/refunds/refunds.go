package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Refund is one refund request, as a row's JSON payload.
type Refund struct {
	// Ref is the merchant's reference.
	Ref string `json:"ref"`
	// Card is the card to refund to; its prefix decides what the fake processor says.
	Card string `json:"card"`
	// Cents is the amount.
	Cents int64 `json:"cents"`
}

// The processor's refusals.
var (
	ErrBusy        = errors.New("processor busy")
	ErrUnavailable = errors.New("processor unavailable")
	ErrDeclined    = errors.New("card declined")
)

// Process is the fake card processor: a card starting with "busy" gets ErrBusy, "down"
// ErrUnavailable, "closed" ErrDeclined; any other card is refunded.
func Process(_ context.Context, r Refund) error {
	switch {
	case strings.HasPrefix(r.Card, "busy"):
		return ErrBusy
	case strings.HasPrefix(r.Card, "down"):
		return ErrUnavailable
	case strings.HasPrefix(r.Card, "closed"):
		return ErrDeclined
	}
	return nil
}

// Queue names.
const (
	Queue     = "refunds"
	DeadQueue = "refunds.dead"
	// MaxAttempts is the DeadLetterAfter cap.
	MaxAttempts = 5
)

// MaxBackoff is the longest backoff of a busy processor: 64 × base.
func MaxBackoff(base time.Duration) time.Duration { return 64 * base }

// Policy is the refunds subscription's error policy: core.Backoff, an exponential backoff with
// full jitter from base up to MaxBackoff(base). A busy processor's plain error becomes
// RetryAfter(delay) where the backend keeps delays (the SQL table's retry_after, the waiting
// queue refunds.retry, JetStream's -NAK with delay), so busy refunds of many replicas do not
// come back in lockstep.
func Policy(base time.Duration) core.Option {
	return core.OnError(core.Backoff(base, MaxBackoff(base)))
}

// HandleRefund turns the processor's answer into an outcome: busy → the error itself (the
// subscription's Policy backs off), unavailable → Retry, declined → Drop (with a warning),
// success → ack.
func HandleRefund(log *slog.Logger) core.Handler[Refund] {
	return func(ctx context.Context, m *core.Message[Refund]) error {
		err := Process(ctx, m.Payload)
		switch {
		case err == nil:
			log.Info("refunded", "ref", m.Payload.Ref, "cents", m.Payload.Cents, "attempt", m.Attempt())
			return nil
		case errors.Is(err, ErrBusy):
			return err // Policy: RetryAfter with a backoff
		case errors.Is(err, ErrUnavailable):
			return core.Retry().Because(err)
		case errors.Is(err, ErrDeclined):
			log.Warn("refund declined; dropping it", "ref", m.Payload.Ref, "card", m.Payload.Card, "message_id", m.ID(), "attempt", m.Attempt())
			return core.Drop().Because(err)
		}
		return err
	}
}

// HandleDead logs each dead letter with the attempts it was given. A row moved to the
// dead-letter group keeps its attempt column, so its first delivery from refunds.dead reports
// one more than it spent in refunds.
func HandleDead(log *slog.Logger) core.Handler[Refund] {
	return func(ctx context.Context, m *core.Message[Refund]) error {
		log.Warn("dead letter: refund gave up", "ref", m.Payload.Ref, "card", m.Payload.Card, "message_id", m.ID(),
			"attempts", m.Attempt()-1)
		return nil
	}
}

// Mount subscribes both handlers.
func Mount(app *core.App, main, dead core.Endpoint, base time.Duration, opts ...core.Option) error {
	log := app.Logger()
	if err := core.Subscribe(app, main, HandleRefund(log),
		append([]core.Option{core.DeadLetterAfter(MaxAttempts, DeadQueue), Policy(base)}, opts...)...); err != nil {
		return err
	}
	return core.Subscribe(app, dead, HandleDead(log), opts...)
}

// MountKeepingDead subscribes the refunds handler alone: the dead letters it leaves in
// refunds.dead stay there, for the settle command to list, redrive or purge.
func MountKeepingDead(app *core.App, main core.Endpoint, base time.Duration, opts ...core.Option) error {
	return core.Subscribe(app, main, HandleRefund(app.Logger()),
		append([]core.Option{core.DeadLetterAfter(MaxAttempts, DeadQueue), Policy(base)}, opts...)...)
}

// Samples are the demo's refunds: two of each kind.
var Samples = []Refund{
	{Ref: "r-ok-1", Card: "4242-4242", Cents: 1250},
	{Ref: "r-ok-2", Card: "5555-4444", Cents: 990},
	{Ref: "r-busy-1", Card: "busy-4000", Cents: 300},
	{Ref: "r-busy-2", Card: "busy-4001", Cents: 450},
	{Ref: "r-down-1", Card: "down-3000", Cents: 700},
	{Ref: "r-down-2", Card: "down-3001", Cents: 120},
	{Ref: "r-closed-1", Card: "closed-2000", Cents: 5000},
	{Ref: "r-closed-2", Card: "closed-2001", Cents: 80},
}

// Tally follows settlements (an App observer) and says where each tracked message ended:
// refunded, declined (dropped) or dead-lettered, and whether the dead-letter handler saw it.
type Tally struct {
	mu      sync.Mutex
	main    map[string]bool   // the queues whose settlements end a message
	dead    map[string]bool   // the dead-letter queues
	refs    map[string]string // message id → ref
	ended   map[string]string // message id → where it ended
	tries   map[string]int    // message id → attempts in refunds
	deadSaw map[string]bool   // message id → logged by the dead-letter handler
	noDead  bool              // no handler reads the dead letters (LeaveDead)
	done    chan struct{}
	closed  bool
}

// LeaveDead tells the tally that no handler consumes the dead letters: a message has ended
// once it is moved there.
func (t *Tally) LeaveDead() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noDead = true
}

// NewTally returns an empty Tally for the queue refunds and its dead letter refunds.dead.
func NewTally() *Tally { return NewTallyFor(map[string]string{Queue: DeadQueue}) }

// NewTallyFor returns an empty Tally for the given queues, each mapped to its dead letter.
func NewTallyFor(queues map[string]string) *Tally {
	t := &Tally{main: map[string]bool{}, dead: map[string]bool{},
		refs: map[string]string{}, ended: map[string]string{}, tries: map[string]int{}, deadSaw: map[string]bool{},
		done: make(chan struct{})}
	for q, d := range queues {
		t.main[q], t.dead[d] = true, true
	}
	return t
}

// Track adds a message to wait for.
func (t *Tally) Track(id, ref string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refs[id] = ref
}

// Observe is a core.Observer.
func (t *Tally) Observe(s core.Settlement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := s.Delivery.ID()
	if _, ok := t.refs[id]; !ok || s.Err != nil {
		return
	}
	switch {
	case t.dead[s.Queue]:
		t.deadSaw[id] = true
		if t.ended[id] == "" { // the server moved it (a quorum queue's delivery limit)
			t.ended[id] = "dead letter (" + s.Queue + ")"
		}
		// The copy says how many deliveries its message had; the dead-letter reader's settlement
		// may be observed before the origin's own (two subscriptions, two goroutines).
		if info, ok, _ := core.ParseDeadLetterInfo(s.Delivery.Headers()); ok && info.Count > t.tries[id] {
			t.tries[id] = info.Count
		}
	case !t.main[s.Queue]:
		return
	case s.Verdict.Action == core.ActAck && strings.HasSuffix(s.Queue, PayoutQueue):
		t.ended[id] = "paid out"
	case s.Verdict.Action == core.ActAck:
		t.ended[id] = "refunded"
	case s.Verdict.Action == core.ActDrop:
		t.ended[id] = "declined, dropped"
	case s.Verdict.Action == core.ActDeadLetter:
		t.ended[id] = "dead letter (" + s.Verdict.Dest + ")"
	}
	if t.main[s.Queue] {
		t.tries[id] = max(t.tries[id], s.Delivery.Attempt())
	}
	if !t.closed && t.finished() {
		t.closed = true
		close(t.done)
	}
}

func (t *Tally) finished() bool {
	if len(t.refs) == 0 {
		return false
	}
	for id := range t.refs {
		e, ok := t.ended[id]
		if !ok || (strings.HasPrefix(e, "dead letter") && !t.deadSaw[id] && !t.noDead) {
			return false
		}
	}
	return true
}

// Done is closed once every tracked message has ended (and each dead letter was handled).
func (t *Tally) Done() <-chan struct{} { return t.done }

// Outcome is where one refund ended.
type Outcome struct {
	Ref, Ended string
	Attempts   int
}

// Outcomes lists where each tracked refund ended, by ref.
func (t *Tally) Outcomes() []Outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Outcome
	for id, ref := range t.refs {
		out = append(out, Outcome{Ref: ref, Ended: t.ended[id], Attempts: t.tries[id]})
	}
	slices.SortFunc(out, func(a, b Outcome) int { return strings.Compare(a.Ref, b.Ref) })
	return out
}

// Print writes the summary table.
func (t *Tally) Print(w io.Writer) {
	fmt.Fprintln(w, "refund        attempts  ended")
	for _, o := range t.Outcomes() {
		fmt.Fprintf(w, "%-13s %8d  %s\n", o.Ref, o.Attempts, o.Ended)
	}
}

// Seed publishes the samples and tracks them.
func Seed(ctx context.Context, p *sqlqueue.Publisher, t *Tally) error {
	for _, r := range Samples {
		id, err := sqlqueue.Publish(ctx, p, r)
		if err != nil {
			return err
		}
		t.Track(fmt.Sprint(id), r.Ref)
	}
	return nil
}
