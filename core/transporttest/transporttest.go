// Package transporttest is the conformance suite every settle backend runs from its own tests:
// for each outcome, what the backend holds afterwards, read back through the backend itself.
// The in-memory backend of coretest, RabbitMQ (real and in-process), NATS JetStream and the SQL
// dialects (through sqlqueuetest.RunTransport, for every claim form) call Run with a factory of
// fresh, isolated environments; Features says what a backend does
// differently, and the cases adapt or skip accordingly (Watermill's pubsub/tests is the model).
//
// The "Publishing" section proves core's publish API on the backend (options round-trip to the
// handler, not-before, dedup under concurrent publishers, priority, refusals, batches, reply
// handlers). It runs for a Backend that implements Targeter, and each case that depends on a
// capability runs as Features.Publish declares it: a capability left Undeclared skips its case
// with a message naming it, so a backend that has not declared its publishing yet still passes.
//
// The "Batch" section proves batch subscriptions (core.SubscribeBatch) as Features.Batch
// declares them, the same way.
//
// The "Ordered" section proves core.Ordered (see ordered.go) as Features.Ordered declares it.
package transporttest

import (
	"context"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// Features says how a backend differs from the runtime-counted default.
type Features struct {
	// NoHeaders: the backend carries no message headers (and so no dead-letter reasons).
	NoHeaders bool
	// CountsAtTake: the attempt is counted when a message is taken, before its handler runs (a
	// lease or advisory claim, a quorum queue's delivery count, JetStream's NumDelivered), so a
	// delivery that is abandoned still spends an attempt and a message that is never settled
	// reaches the cap. Backends that count only settled attempts (a classic queue's copies, the
	// in-memory queue) skip the case that proves it.
	CountsAtTake bool
	// Publish declares the backend's publishing capabilities, for the Publishing section.
	Publish PublishFeatures
	// Batch declares batch subscriptions (core.SubscribeBatch), for the Batch section:
	// Supported runs its cases, Refused proves that the backend's endpoints refuse them with
	// core.ErrUnsupported, Undeclared skips them.
	Batch Capability
	// Ordered declares whether the backend honours core.Ordered(), for the Ordered section
	// (Undeclared skips it, naming this field; Refused proves the refusal).
	Ordered Capability
}

// Capability is what a backend declares about one publishing capability. The zero value,
// Undeclared, declares nothing: the cases that need the capability skip, naming it.
type Capability uint8

const (
	// Undeclared: the backend has not said; the cases that need the capability skip.
	Undeclared Capability = iota
	// Supported: the backend honours the option; the suite proves it.
	Supported
	// Refused: the backend cannot honour the option and refuses it with an error matching
	// core.ErrUnsupported (naming the option); the suite proves the refusal.
	Refused
)

func (c Capability) String() string {
	switch c {
	case Supported:
		return "Supported"
	case Refused:
		return "Refused"
	}
	return "Undeclared"
}

// PublishFeatures are a backend's publishing capabilities: one per option of core's publish API
// whose support differs between backends, and reply handlers.
type PublishFeatures struct {
	// MessageID: a message published with core.MessageID is delivered with that Delivery.ID().
	MessageID Capability
	// Headers: the headers given with core.Headers reach the handler (Message.Headers).
	Headers Capability
	// CorrelationID: core.CorrelationID reaches the handler (core.CorrelationIDOf).
	CorrelationID Capability
	// OrderingKey: core.OrderingKey reaches the handler (core.OrderingKeyOf).
	OrderingKey Capability
	// NotBefore: core.Delay and core.NotBefore hold a message back, never delivering it early,
	// on the backend's clock (the Env's clock).
	NotBefore Capability
	// Dedup: a second publish with a core.DedupKey still pending stores nothing and answers a
	// Receipt.Duplicate, also under concurrent publishers.
	Dedup Capability
	// Priority: core.Priority orders a backlog, highest first and in publish order within one
	// priority.
	Priority Capability
	// Replies: reply handlers (core.Replies) publish on ack only, with stable ids, to a Target of
	// the backend.
	Replies Capability
}

// Targeter is implemented by a Backend that publishes through core's publish API; the
// Publishing section runs only for one.
type Targeter interface {
	// Target returns the core.Target of a logical queue, as the backend's users get it (the
	// endpoint itself, where it is a Target). The suite calls it once the backend is
	// registered with a running App's, or while mounting its subscriptions; publishing to it
	// must then work whether or not a subscription of that App reads the queue.
	Target(queue string) core.Target
}

// Message is a message as a queue holds it, read back through the backend.
type Message struct {
	Body    []byte
	Headers map[string]string
	// Count is, for a message in a dead letter, how many attempts it was delivered for (the
	// final count the backend records: settle-retry-count, x-death count, the attempt column).
	Count int
}

// Backend is a backend instance for one test, with its own isolated queues: the suite uses
// logical names ("work", "work.dead"), and the backend maps them to whatever keeps tests apart
// (a prefix, a schema, a vhost).
type Backend interface {
	// Register adds to app what it needs to reach the backend. It is called once for every App
	// the test starts (a test may run two Apps in turn on the same queues).
	Register(app *core.App)
	// Endpoint returns the endpoint for a logical queue name.
	Endpoint(queue string) core.Endpoint
	// Publish puts a fresh message on a logical queue.
	Publish(ctx context.Context, queue string, body []byte, headers map[string]string) error
	// Drain removes and returns the messages a logical queue holds (ready ones), in order. With
	// atLeast > 0 it waits (until ctx is done) for that many, for moves the server makes by
	// itself; with 0 it returns what the queue holds now.
	Drain(ctx context.Context, queue string, atLeast int) ([]Message, error)
}

// DeadLetterNamer is implemented by a backend whose dead-letter destination is not spelled as
// its logical queue name (a SQL table without a group column dead-letters to another table, and
// a dot in "work.dead" would read as a schema): the cases give core.DeadLetterAfter
// DeadLetterName("work.dead") and still Drain the logical name.
type DeadLetterNamer interface {
	DeadLetterName(queue string) string
}

// Env is one fresh environment: a backend and the clock the Apps run on.
type Env struct {
	Backend  Backend
	Features Features
	// Clock is the clock the Apps run on; Virtual is the same clock when it is virtual, nil on
	// real time. On real time the suite uses short delays and measures wall time.
	Clock   clock.Clock
	Virtual *clock.Virtual
	// LeakCheck, when set, is started before every App a case runs and checked once it has
	// stopped: an App must leave no goroutines behind (see coretest.LeakCheck). Cases run one
	// at a time, so the check sees only the App's own goroutines and the backend's.
	LeakCheck coretest.LeakCheck
}

// Factory returns a fresh environment for one test; it registers its own cleanup with t.
type Factory func(t *testing.T) Env

// Delay is the RetryAfter delay the suite uses on real time.
var Delay = 300 * time.Millisecond

// Run runs every case of the suite as a subtest of t, then the Publishing and Batch sections.
func Run(t *testing.T, newEnv Factory) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newEnv(t))
		})
	}
	for _, section := range []struct {
		name  string
		cases []testCase
	}{{"Publishing", publishing}, {"Batch", batching}, {"Ordered", ordered}} {
		t.Run(section.name, func(t *testing.T) {
			for _, c := range section.cases {
				t.Run(c.name, func(t *testing.T) {
					c.run(t, newEnv(t))
				})
			}
		})
	}
}
