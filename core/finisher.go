package core

import (
	"context"
	"errors"
	"log/slog"

	"github.com/settlehq/settle/core/clock"
)

// Finisher performs resolved verdicts on deliveries. It is the one interface every backend
// implements: a SQL claim form, an AMQP consumer, the in-memory queue of coretest.
//
// Finish performs v on d and calls settled exactly once, when the settlement is durable (err ==
// nil) or has failed. It may call settled before it returns (one statement or frame per message)
// or later, from another goroutine, when it groups the settlements of many deliveries into one
// statement or one `multiple` acknowledgement. Finish must not block until other deliveries are
// settled: the worker that calls it goes on to the next message. A Finisher that can settle a
// batch handler's deliveries together implements BatchFinisher as well.
//
// A failed settlement leaves the message where the backend's form puts an abandoned one (the
// transaction rolls back, the lease runs out, the channel requeues); it is never lost.
type Finisher interface {
	Finish(ctx context.Context, d Delivery, v Verdict, settled Settled)
}

// Settled reports the settlement of one delivery. Core creates one per subscription, so
// reporting allocates nothing.
type Settled func(d Delivery, v Verdict, err error)

// ErrSettlementUnknown is matched (errors.Is) by a settlement error when the backend sent the
// settlement but cannot tell whether the server applied it: the frame or statement left, and its
// confirmation was lost (the connection dropped before the answer came, or the answer did not
// come in time). Such a settlement is neither durable nor failed: the message is gone if the
// server applied it, and comes back as an abandoned one would if it did not. A backend reports
// it as the settlement's error, wrapped in its own (which names the frame and the message), so
// that core logs it as unknown and reports EventSettlementUnknown instead of a failure. An
// error that does not match it says the settlement was not applied.
var ErrSettlementUnknown = errors.New("settlement unknown: sent, but the server's confirmation was lost")

// Source hands out deliveries for one subscription: a claim loop over a queue table, an AMQP
// consumer. Core never calls Next concurrently (each call completes before the next begins,
// though not always on the same goroutine: a free worker calls it for the delivery it will
// handle), and only when a worker is free to take the delivery, so a source that claims in
// batches should not claim far more than it is asked for. A worker of a batch subscription
// (Options.BatchSize > 0) calls Next up to BatchSize times in a row to fill its batch, the calls
// after the first with a context that ends after Options.BatchWait: a source that claims or
// prefetches at least BatchSize messages fills a batch in one round trip.
type Source interface {
	// Next returns the next delivery, blocking until one is available or ctx is done (then it
	// returns ctx.Err()). Any other error is logged by core, which calls Next again after a
	// backoff on the clock; a source recovers its own connection.
	Next(ctx context.Context) (Delivery, error)
	// Close stops the source. Deliveries it claimed but has not handed out are given back as
	// abandoned ones would be. Core calls Close after every handed-out delivery has settled.
	Close() error
}

// Endpoint is a queue on a backend, ready to be subscribed to: a queue table or group, an AMQP
// queue. Backends construct them (postgres.Lease(...), amqp.Classic(...)); the App opens each one
// for its subscription at start.
type Endpoint interface {
	// Queue names the queue, for logs and as the default subscription name.
	Queue() string
	// Open checks (or declares) what the subscription needs on the backend and returns its
	// source and finisher. An error names what is missing or impossible; the App refuses to
	// start with it.
	Open(ctx context.Context, sub Subscription) (Source, Finisher, error)
}

// Subscription is what an Endpoint learns about the subscription it is opened for.
type Subscription struct {
	// Name is the subscription's unique name in its App.
	Name string
	// Queue is the endpoint's queue.
	Queue string
	// Options are the subscription's mount options, validated.
	Options *Options
	// Logger is the App's logger with the subscription and queue attached.
	Logger *slog.Logger
	// Clock is the App's clock; every timed path of the backend takes its time from it.
	Clock clock.Clock
	// Report tells the App of an event of this subscription (a refused copy, a reconnection, a
	// settlement that failed); core fills in the subscription, queue and time. Never nil.
	Report func(Event)
}

// Backend is something the App starts before its subscriptions open and closes after they have
// stopped, in reverse order of registration: a connection pool, an AMQP connection.
type Backend interface {
	Close() error
}

// Starter is implemented by a Backend that has work to do before subscriptions open (connect,
// check the server version).
type Starter interface {
	Start(ctx context.Context) error
}
