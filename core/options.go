package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Options are a subscription's mount options after validation. Backends read them in
// Endpoint.Open; users set them with Option values.
type Options struct {
	// Name overrides the subscription's name (default: the endpoint's queue).
	Name string
	// Cap is the DeadLetterAfter attempt cap; 0 means none.
	Cap int
	// DeadLetterTo is the DeadLetterAfter destination; set exactly when Cap is.
	DeadLetterTo string
	// Workers is the number of concurrent handlers (default 1).
	Workers int
	// OnError, OnPanic and OnDecodeError are the failure policies (defaults: retry, retry,
	// dead letter).
	OnError, OnPanic, OnDecodeError Policy
	// Timeout bounds each handler call (0: none); see the Timeout option.
	Timeout time.Duration
	// Codec decodes payloads (default JSON).
	Codec Codec
	// Middleware wraps the handler, outermost first.
	Middleware []Middleware
	// Observers are told of this subscription's settlements, before the App's observers.
	Observers []Observer
	// Replies are the publishers the handler replies through (see Replies).
	Replies []Replier
	// BatchSize is, for a batch subscription (SubscribeBatch), the most messages its handler
	// gets at once; 0 for a single-message subscription. A backend sizes its claims and prefetch
	// to at least BatchSize (BatchSize × Workers keeps every worker's batch full), so that a
	// batch fills from what the backend already holds. Ordering keys and flow control count a
	// batch as the messages it holds.
	BatchSize int
	// BatchWait is, for a batch subscription, how long its worker waits on the App's clock to
	// fill a batch once the first message has arrived; 0 for a single-message subscription.
	BatchWait time.Duration

	batchOpts []string    // the batch options given, for Subscribe's refusal
	limits    []limitSpec // Concurrency and Rate, in the order given
	pause     *pauseState // Pausable; nil for none

	ext extValues
}

// extValue is a backend option's value: the options that set it, for errors, and whether the
// endpoint the subscription was opened on read it.
type extValue struct {
	value any
	names []string
	read  bool
}

// extValues are the backend options of a subscription or a publish, by key.
type extValues map[any]*extValue

// get returns the value stored under key, marking it read.
func (x extValues) get(key any) (any, bool) {
	e, ok := x[key]
	if !ok {
		return nil, false
	}
	e.read = true
	return e.value, true
}

// set stores value under key on behalf of the option named name, allocating the map if needed.
func (x *extValues) set(key any, name string, value any) {
	if *x == nil {
		*x = make(extValues)
	}
	e := (*x)[key]
	if e == nil {
		e = &extValue{}
		(*x)[key] = e
	}
	e.value = value
	if name != "" && !slices.Contains(e.names, name) {
		e.names = append(e.names, name)
	}
}

// Ext returns the value a backend option stored under key, and whether one was stored. An
// endpoint reads its own options with it in Endpoint.Open; the options it never reads are
// refused (see SetExt).
func (o *Options) Ext(key any) (any, bool) { return o.ext.get(key) }

// SetExt stores a backend option's value under key on behalf of the option named name (as a user
// writes it: "sqlqueue.Transactional()"). Backends call it from their own Option constructors
// (see OptionFunc); several options may share one key (one config struct). A subscription whose
// endpoint never reads key with Ext while it opens fails to start with an error naming the
// options that set it: an option a backend does not understand is refused, not ignored.
func (o *Options) SetExt(key any, name string, value any) { o.ext.set(key, name, value) }

// sealExt forgets the reads the options made while they were applied: from now on a read is the
// endpoint's.
func (o *Options) sealExt() {
	for _, e := range o.ext {
		e.read = false
	}
}

// unread returns an error naming the backend options the endpoint ep did not read: an
// *UnsupportedError for Ordered, which is core's own.
func (o *Options) unread(ep Endpoint) error {
	if err := o.unreadOrdered(ep); err != nil {
		return err
	}
	var names []string
	for k, e := range o.ext {
		if _, ordered := k.(orderedKey); !ordered && !e.read {
			names = append(names, e.names...)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	if len(names) == 1 {
		return fmt.Errorf("option %s does not apply to this endpoint (it belongs to another backend)", names[0])
	}
	return fmt.Errorf("options %s do not apply to this endpoint (they belong to another backend)", strings.Join(names, ", "))
}

// Apply applies opts to o in order. A backend's option made with OptionFunc uses it to apply
// other options as part of itself (one mount option that registers several custom events).
func (o *Options) Apply(opts ...Option) error {
	for _, opt := range opts {
		if opt == nil {
			return errors.New("nil option")
		}
		if err := opt.apply(o); err != nil {
			return err
		}
	}
	return nil
}

// Option configures a subscription.
type Option interface {
	apply(*Options) error
}

// OptionFunc makes an Option of a function; backends use it for their own mount options
// (sqlqueue.Transactional, sqlqueue.LeaseFor), storing their values with Options.SetExt. An
// error it returns makes Subscribe fail and should name the option.
type OptionFunc func(*Options) error

func (f OptionFunc) apply(o *Options) error { return f(o) }

// DeadLetterAfter caps the attempts of a message: a retry or retry-after at attempt n moves it
// to dest instead (n == 1 moves on the first failure). The cap and the destination are one
// option so that half of it cannot be written.
func DeadLetterAfter(n int, dest string) Option {
	return OptionFunc(func(o *Options) error {
		if n < 1 {
			return fmt.Errorf("DeadLetterAfter(%d, %q): the cap must be at least 1", n, dest)
		}
		if strings.TrimSpace(dest) == "" {
			return fmt.Errorf("DeadLetterAfter(%d, %q): the destination is empty", n, dest)
		}
		o.Cap, o.DeadLetterTo = n, dest
		return nil
	})
}

// Workers runs up to n handlers of the subscription at once; deliveries are taken in order.
func Workers(n int) Option {
	return OptionFunc(func(o *Options) error {
		if n < 1 {
			return fmt.Errorf("Workers(%d): need at least one worker", n)
		}
		o.Workers = n
		return nil
	})
}

// Name names the subscription (default: the endpoint's queue name). Names are unique per App.
func Name(name string) Option {
	return OptionFunc(func(o *Options) error {
		if strings.TrimSpace(name) == "" {
			return errors.New("Name(\"\"): the subscription name is empty")
		}
		o.Name = name
		return nil
	})
}

// Timeout gives every handler call of the subscription a deadline d on the App's clock: its
// context is cancelled with context.DeadlineExceeded when d has passed. A handler that then
// returns an error (context.DeadlineExceeded, or anything else that is not an outcome) takes the
// subscription's error policy, as any failure does; one that returns nil or an outcome is
// settled as it asked. A handler still running TimeoutGrace(d) after its deadline is reported
// (a warning and an EventHandlerOverran), and the lease form stops extending its lease then, so
// a handler that ignores its context cannot hold its row forever.
func Timeout(d time.Duration) Option {
	return OptionFunc(func(o *Options) error {
		if d <= 0 {
			return fmt.Errorf("Timeout(%v): the timeout must be positive", d)
		}
		o.Timeout = d
		return nil
	})
}

// TimeoutGrace is how long after its Timeout a handler may still run before it is reported as
// ignoring its context: a tenth of the timeout, at least one second.
func TimeoutGrace(timeout time.Duration) time.Duration { return max(timeout/10, time.Second) }

// WithCodec decodes the subscription's payloads with c.
func WithCodec(c Codec) Option {
	return OptionFunc(func(o *Options) error {
		if c == nil {
			return errors.New("WithCodec(nil): no codec")
		}
		o.Codec = c
		return nil
	})
}

// Use wraps the subscription's handler in middleware, outermost first.
func Use(mw ...Middleware) Option {
	return OptionFunc(func(o *Options) error {
		for i, m := range mw {
			if m == nil {
				return fmt.Errorf("Use: middleware %d is nil", i)
			}
		}
		o.Middleware = append(o.Middleware, mw...)
		return nil
	})
}

// OnSettled tells o of every settlement of this subscription, after it is durable or has
// failed and before the App's observers hear of it (see Observer). Options that need to act after the outcome is settled (an outbox
// receiver marking a dropped record) install one.
func OnSettled(o Observer) Option {
	return OptionFunc(func(opts *Options) error {
		if o == nil {
			return errors.New("OnSettled(nil): no observer")
		}
		opts.Observers = append(opts.Observers, o)
		return nil
	})
}

func buildOptions(opts []Option) (*Options, error) {
	o := &Options{Workers: 1, OnError: PolicyRetry, OnPanic: PolicyRetry, OnDecodeError: PolicyDeadLetter, Codec: JSON}
	if err := o.Apply(opts...); err != nil {
		return nil, err
	}
	o.sealExt()
	return o, nil
}
