package core

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// AppInfo names the service an App is: what its description (App.Describe) and the documents
// made from it (an AsyncAPI document) call it.
type AppInfo struct {
	// Name is the service's name ("refunds").
	Name string
	// Version is the service's version ("0.1.0").
	Version string
	// Description says what the service does, in a sentence or a paragraph.
	Description string
}

// WithInfo names the App's service and gives its version (see AppInfo). Both are required by
// the documents made from the App's description; empty ones are refused there, naming this
// option.
func WithInfo(name, version string) AppOption {
	return func(a *App) { a.info.Name, a.info.Version = strings.TrimSpace(name), strings.TrimSpace(version) }
}

// WithDescription says what the App's service does (AppInfo.Description).
func WithDescription(text string) AppOption {
	return func(a *App) { a.info.Description = strings.TrimSpace(text) }
}

// ErrNoInfo is returned by a document generator for an App without a name or version
// (WithInfo).
var ErrNoInfo = errors.New("settle: the App has no name or version (give core.New core.WithInfo(name, version))")

// Info returns what WithInfo and WithDescription set.
func (a *App) Info() AppInfo { return a.info }

// Description is what an App has mounted, read-only: its info, its subscriptions in the order
// they were mounted, and its publishers. Nothing in it refers back into the App: changing it
// changes nothing.
type Description struct {
	Info AppInfo
	// Subscriptions are the App's mounted handlers, each a receive operation.
	Subscriptions []SubscriptionDescription
	// Publishers are what the App sends through, each a send operation: the publishers it
	// declared with Publishes, then those its subscriptions reply through (Replies), each once.
	Publishers []PublisherDescription
}

// SubscriptionDescription is one mounted handler and its options.
type SubscriptionDescription struct {
	// Name is the subscription's unique name in its App, Queue its endpoint's queue.
	Name, Queue string
	// Payload is the handler's payload type: the T of Subscribe[T].
	Payload reflect.Type
	// ContentType is the codec's content type ("application/json").
	ContentType string
	// Cap is the DeadLetterAfter cap (0: none), DeadLetterTo its destination.
	Cap          int
	DeadLetterTo string
	// Workers is how many handlers run at once.
	Workers int
	// Timeout bounds each handler call (0: none).
	Timeout time.Duration
	// BatchSize and BatchWait are a batch subscription's (SubscribeBatch); 0 for a
	// single-message one.
	BatchSize int
	BatchWait time.Duration
	// Ordered says the subscription asked for its keys in order (core.Ordered).
	Ordered bool
	// Limits are its flow-control limits as written ("Concurrency(5)", "Rate(50, 1s, 10)"),
	// followed by " per key" where PerKey splits them and " shared" where a store shares them
	// across processes (SharedIn); in the order given.
	Limits []string
	// Pausable says the subscription can be paused and resumed (core.Pausable).
	Pausable bool
	// OnError, OnPanic and OnDecodeError are the failure policies (Policy.String: "retry",
	// "drop", "dead_letter", "backoff(100ms, 6.4s)").
	OnError, OnPanic, OnDecodeError string
	// Endpoint is the endpoint's own description; nil when it does not implement Describer.
	Endpoint *EndpointDescription
}

// PublisherDescription is one publisher registered with the App: what it sends where.
type PublisherDescription struct {
	// Name is the publisher's name in its App, Queue the queue (or subject, or exchange) it
	// publishes to.
	Name, Queue string
	// Payload is the type it publishes.
	Payload reflect.Type
	// ContentType is its codec's content type.
	ContentType string
	// Endpoint is the destination's description on its backend; nil when it has none.
	Endpoint *EndpointDescription
}

// Describer is implemented by an Endpoint that can say what it is on its backend. Describe
// gets the subscription it would be opened for (without Endpoint), since some of what a queue
// is depends on the subscription's options (a quorum queue's delivery limit is its cap). It
// must not touch the server or the options: it reports configuration.
type Describer interface {
	Describe(sub SubscriptionDescription) EndpointDescription
}

// Backend kinds of EndpointDescription.Backend.
const (
	BackendAMQP = "amqp"
	BackendNATS = "nats"
	BackendSQL  = "sql"
	// BackendRedis is a Redis stream with a consumer group; its details are in Settings.
	BackendRedis = "redis"
)

// EndpointDescription is an endpoint as its backend has it, in neutral terms: exactly one of
// AMQP, NATS and SQL is set, matching Backend.
type EndpointDescription struct {
	// Backend is BackendAMQP, BackendNATS or BackendSQL (or another backend's own word).
	Backend string
	AMQP    *AMQPQueue
	NATS    *NATSQueue
	SQL     *SQLQueue
	// Delay says where a RetryAfter (or Backoff) copy waits: "process" when it waits in the
	// process (lost with it), otherwise the backend's durable place ("waiting queue
	// \"refunds.retry\"", "server (-NAK with delay)", "retry_after column").
	Delay string
	// Related are the other queues the endpoint uses for the subscription (a waiting queue
	// that holds delayed copies, the dead-letter queue it declares): each is a channel of its
	// own in a document.
	Related []RelatedQueue
	// Settings are the backend's own settings of the endpoint (prefetch, ack wait, publish
	// policy), by name, with values a JSON encoder takes as they are (strings, numbers,
	// booleans).
	Settings map[string]any
}

// AMQPQueue is a RabbitMQ queue as settle declares or expects it.
type AMQPQueue struct {
	// Name is the queue's name, Type "classic" or "quorum".
	Name, Type                     string
	Durable, Exclusive, AutoDelete bool
	// Arguments are the queue arguments it is declared with (x-delivery-limit, x-dead-letter-…),
	// settle's and the user's; values are strings, int64s or booleans.
	Arguments map[string]any
	// Bindings are the exchanges the queue is bound to.
	Bindings []AMQPBinding
}

// AMQPBinding binds a queue to an exchange of a kind ("direct", "fanout", "topic", "headers")
// with a routing key.
type AMQPBinding struct {
	Exchange, Kind, Key string
}

// NATSQueue is a JetStream durable pull consumer on a stream.
type NATSQueue struct {
	// Subject is the consumer's filter subject, Stream the stream that captures it, Subjects
	// the stream's subjects, Consumer the durable consumer's name.
	Subject, Stream, Consumer string
	Subjects                  []string
}

// SQLQueue is a queue in a SQL table.
type SQLQueue struct {
	// Table is the table (schema-qualified when it has a schema), Group the queue's group in
	// a table with a group column ("" otherwise), Form the claim form ("lease", "row_lock",
	// "advisory").
	Table, Group, Form string
}

// Roles of a RelatedQueue.
const (
	// RoleDelay is a queue where delayed copies wait before they come back.
	RoleDelay = "delay"
	// RoleDeadLetter is the dead-letter destination of the subscription's cap.
	RoleDeadLetter = "dead_letter"
)

// RelatedQueue is a queue an endpoint uses besides its own.
type RelatedQueue struct {
	// Role is RoleDelay or RoleDeadLetter, Name the queue's name (the address messages are
	// published to).
	Role, Name string
	// About says in a sentence what happens there.
	About string
	// AMQP is the queue as RabbitMQ has it, when the backend is AMQP.
	AMQP *AMQPQueue
}

// Describe returns what is mounted on the App (see Description). It may be called at any time,
// before Run or while it runs.
func (a *App) Describe() Description {
	a.mu.Lock()
	subs := append([]*subscription(nil), a.subs...)
	a.mu.Unlock()
	d := Description{Info: a.info, Subscriptions: make([]SubscriptionDescription, 0, len(subs))}
	for _, s := range subs {
		d.Subscriptions = append(d.Subscriptions, s.describe())
	}
	a.mu.Lock()
	pubs := append([]Replier(nil), a.publishers...)
	a.mu.Unlock()
	for _, s := range subs {
		pubs = append(pubs, s.opts.Replies...)
	}
	d.Publishers = describePublishers(pubs)
	return d
}

// Publishes declares publishers the App's code sends through outside its handlers (a periodic
// job, an HTTP endpoint that enqueues work), so that Describe lists them as send operations.
// The publishers a subscription replies through (Replies) are listed without it. A nil
// publisher is ignored.
func (a *App) Publishes(pubs ...Replier) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pubs {
		if p != nil && p.replyPublisher() != nil {
			a.publishers = append(a.publishers, p)
		}
	}
}

// describePublishers describes each distinct publisher of pubs once, in order, named after its
// queue ("payouts", then "payouts-2" for a second publisher to the same queue).
func describePublishers(pubs []Replier) []PublisherDescription {
	seen := make(map[*publisher]bool, len(pubs))
	names := make(map[string]int, len(pubs))
	var out []PublisherDescription
	for _, r := range pubs {
		p := r.replyPublisher()
		if p == nil || seen[p] {
			continue
		}
		seen[p] = true
		queue := p.target.Queue()
		name := queue
		if n := names[queue]; n > 0 {
			name = queue + "-" + strconv.Itoa(n+1)
		}
		names[queue]++
		pd := PublisherDescription{Name: name, Queue: queue, Payload: p.payload, ContentType: p.codec.ContentType()}
		if d, ok := p.target.(Describer); ok {
			ed := d.Describe(SubscriptionDescription{Name: name, Queue: queue, Payload: p.payload, ContentType: pd.ContentType})
			pd.Endpoint = &ed
		}
		out = append(out, pd)
	}
	return out
}

func (s *subscription) describe() SubscriptionDescription {
	o := s.opts
	sd := SubscriptionDescription{
		Name: s.name, Queue: s.queue, Payload: s.payload, ContentType: o.Codec.ContentType(),
		Cap: o.Cap, DeadLetterTo: o.DeadLetterTo, Workers: o.Workers, Timeout: o.Timeout,
		BatchSize: o.BatchSize, BatchWait: o.BatchWait, Ordered: o.asksOrdered(),
		Limits: describeLimits(o.limits), Pausable: o.pause != nil,
		OnError: o.OnError.String(), OnPanic: o.OnPanic.String(), OnDecodeError: o.OnDecodeError.String(),
	}
	if d, ok := s.ep.(Describer); ok {
		ed := d.Describe(sd)
		sd.Endpoint = &ed
	}
	return sd
}

// describeLimits writes each limit as its option was written, with how it is split and shared.
func describeLimits(specs []limitSpec) []string {
	var out []string
	for _, sp := range specs {
		d := sp.name
		if sp.key != nil {
			d += " per key"
		}
		if sp.store != nil {
			d += " shared"
		}
		out = append(out, d)
	}
	return out
}
