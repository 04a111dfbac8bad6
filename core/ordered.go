package core

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// orderedKey is the Options.ext key of Ordered: an endpoint acknowledges it by reading it
// (Options.Ordered), and a subscription whose endpoint never does is refused.
type orderedKey struct{}

// orderedOption is Ordered's name as a user writes it, for errors.
const orderedOption = "core.Ordered()"

// Ordered asks that the subscription handle the messages of one ordering key (core.OrderingKey)
// one at a time, across every process that subscribes to the queue, in publish order. A message
// of a key starts only once its predecessor has settled: a retry or a retry-after holds the key
// until the message is acknowledged, dropped or dead-lettered; an abandoned delivery comes back
// before any later message of its key. Messages without a key are not ordered, and different
// keys run in parallel, up to Workers. See docs/ordering.md for what each backend does.
//
// Only an endpoint whose backend orders keys accepts it (it reads Options.Ordered while it
// opens); on any other the subscription fails to start with an *UnsupportedError naming the
// option and the backend.
func Ordered() Option {
	return OptionFunc(func(o *Options) error {
		o.SetExt(orderedKey{}, orderedOption, true)
		return nil
	})
}

// Ordered reports whether the subscription asked for Ordered. An endpoint that orders keys
// calls it in Endpoint.Open, and by calling it takes on the contract of Ordered; an endpoint
// that never calls it leaves the option unread, and the subscription is refused.
func (o *Options) Ordered() bool {
	_, ok := o.Ext(orderedKey{})
	return ok
}

// asksOrdered reports whether Ordered was given, without counting as the endpoint's read of it
// (a description must not hide the refusal of an endpoint that does not order keys).
func (o *Options) asksOrdered() bool {
	_, ok := o.ext[orderedKey{}]
	return ok
}

// unreadOrdered returns the refusal of an Ordered option the endpoint ep did not read, nil when
// it was read or not given.
func (o *Options) unreadOrdered(ep Endpoint) error {
	e, ok := o.ext[orderedKey{}]
	if !ok || e.read {
		return nil
	}
	return &UnsupportedError{
		Option:  orderedOption,
		Backend: endpointName(ep, o),
		Reason:  "the backend does not order the messages of a key (it declares no ordering)",
		Instead: "subscribe without core.Ordered() to handle the queue unordered, or use a backend that orders keys (docs/ordering.md)",
	}
}

// endpointName names ep as its errors do: its backend and queue where it describes itself
// (for a subscription with options o), otherwise its Go type and queue.
func endpointName(ep Endpoint, o *Options) string {
	if d, ok := ep.(Describer); ok {
		sub := SubscriptionDescription{Name: o.Name, Queue: ep.Queue(), Cap: o.Cap, DeadLetterTo: o.DeadLetterTo, Workers: o.Workers}
		if b := d.Describe(sub).Backend; b != "" {
			return fmt.Sprintf("%s queue %q", b, ep.Queue())
		}
	}
	return fmt.Sprintf("%T queue %q", ep, ep.Queue())
}

// HeldKeys logs, for a backend or a source that orders keys, that a key is held: its head was
// retried, and its later messages wait until the head settles. It writes one debug line per
// interval at most (with how many it left out), so a key retried in a tight loop does not flood
// the log. Its methods are safe for concurrent use.
type HeldKeys struct {
	log   *slog.Logger
	clock clock.Clock
	every time.Duration
	pace  LogPace
}

// NewHeldKeys returns a HeldKeys that logs to log at most once every interval on c.
func NewHeldKeys(log *slog.Logger, c clock.Clock, every time.Duration) *HeldKeys {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HeldKeys{log: log, clock: c, every: every}
}

// Wait records that the key of queue is held by message id at attempt, with waiting later
// messages behind it.
func (h *HeldKeys) Wait(queue, key, id string, attempt, waiting int) {
	log, skipped := h.pace.Allow(h.clock.Now(), h.every)
	if !log {
		return
	}
	h.log.Debug("settle: ordered key held by a message that has not settled; later messages of the key wait",
		"queue", queue, "ordering_key", key, "message_id", id, "attempt", attempt, "waiting", waiting, "not_logged", skipped)
}

// ErrKeyNotHeld is returned by KeySequencer.Release for a delivery that does not hold its key.
var ErrKeyNotHeld = errors.New("settle: the delivery does not hold its ordering key")

// KeySequencer keeps the keyed deliveries one process took from a stream in key order: a source
// that receives several messages of one key at once (a broker partition consumed with a
// prefetch) admits each delivery as it arrives and hands out only those Admit lets through;
// when a delivery of a key settles for good (ack, drop, dead letter) Release returns the next
// delivery of the key, which may be handed out then. A delivery that is retried or abandoned
// keeps the key: the source hands it out again (or the broker redelivers it) before Release.
// Deliveries without a key pass at once. It is safe for concurrent use.
type KeySequencer struct {
	mu   sync.Mutex
	keys map[string]*keyLine
}

// keyLine is one held key: the delivery that holds it and those that wait behind it.
type keyLine struct {
	head    Delivery
	waiting []Delivery
}

// Admit reports whether d may be handed out now: it has no key, or no other delivery holds
// its key (d then holds it). A delivery that may not waits behind its key, in the order it was
// admitted, until Release hands it out.
func (s *KeySequencer) Admit(d Delivery) bool {
	k := OrderingKeyOf(d)
	if k == "" {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = make(map[string]*keyLine)
	}
	l := s.keys[k]
	if l == nil {
		s.keys[k] = &keyLine{head: d}
		return true
	}
	l.waiting = append(l.waiting, d)
	return false
}

// Release frees the key of d, which settled for good, and returns the delivery that holds the
// key now (nil when none waits). It fails with ErrKeyNotHeld when d does not hold its key.
func (s *KeySequencer) Release(d Delivery) (Delivery, error) {
	k := OrderingKeyOf(d)
	if k == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.keys[k]
	if l == nil || l.head != d {
		return nil, fmt.Errorf("%w: message %s, key %q", ErrKeyNotHeld, d.ID(), k)
	}
	if len(l.waiting) == 0 {
		delete(s.keys, k)
		return nil, nil
	}
	l.head = l.waiting[0]
	l.waiting[0] = nil
	l.waiting = l.waiting[1:]
	return l.head, nil
}

// Waiting returns how many deliveries wait behind key.
func (s *KeySequencer) Waiting(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.keys[key]; l != nil {
		return len(l.waiting)
	}
	return 0
}

// Drain removes every held key and returns the deliveries that waited, in key order within each
// key, for a source that closes and gives them back.
func (s *KeySequencer) Drain() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for _, l := range s.keys {
		out = append(out, l.waiting...)
	}
	s.keys = nil
	return out
}
