package asyncapi

import "encoding/json"

// The document's objects, in the AsyncAPI 3.0 shape. Maps are rendered with sorted keys,
// structs in field order, so that a document is the same for the same App.

type document struct {
	AsyncAPI           string                `json:"asyncapi"`
	Info               info                  `json:"info"`
	DefaultContentType string                `json:"defaultContentType,omitempty"`
	Channels           map[string]*channel   `json:"channels"`
	Operations         map[string]*operation `json:"operations"`
	Components         components            `json:"components"`
}

type info struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

type ref struct {
	Ref string `json:"$ref"`
}

type channel struct {
	Address     string         `json:"address"`
	Description string         `json:"description,omitempty"`
	Messages    map[string]ref `json:"messages,omitempty"`
	Bindings    *bindings      `json:"bindings,omitempty"`
	Roles       []string       `json:"x-settle-roles,omitempty"`
	Backend     string         `json:"x-settle-backend,omitempty"`
	NATS        *natsChannel   `json:"x-settle-nats,omitempty"`
	SQL         *sqlChannel    `json:"x-settle-sql,omitempty"`
	About       []string       `json:"x-settle-about,omitempty"`
	key         string         // its id in channels
	ownBinding  bool           // Bindings come from the queue's own endpoint
}

type bindings struct {
	AMQP *amqpChannel `json:"amqp,omitempty"`
}

// amqpChannel is the AMQP channel binding 0.3.0 of a queue; what the binding has no field for
// (the queue type and arguments, the exchanges it is bound to) is in x-settle- fields.
type amqpChannel struct {
	Is             string         `json:"is"`
	Queue          amqpQueue      `json:"queue"`
	BindingVersion string         `json:"bindingVersion"`
	QueueType      string         `json:"x-settle-queue-type,omitempty"`
	Arguments      map[string]any `json:"x-settle-arguments,omitempty"`
	Exchanges      []amqpExchange `json:"x-settle-exchanges,omitempty"`
}

type amqpQueue struct {
	Name       string `json:"name"`
	Durable    bool   `json:"durable"`
	Exclusive  bool   `json:"exclusive"`
	AutoDelete bool   `json:"autoDelete"`
}

type amqpExchange struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	RoutingKey string `json:"routingKey"`
}

type natsChannel struct {
	Stream   string   `json:"stream"`
	Consumer string   `json:"consumer,omitempty"`
	Subjects []string `json:"subjects,omitempty"`
}

type sqlChannel struct {
	Table string `json:"table"`
	Group string `json:"group,omitempty"`
	Form  string `json:"form,omitempty"`
}

type operation struct {
	Action     string         `json:"action"`
	Channel    ref            `json:"channel"`
	Summary    string         `json:"summary,omitempty"`
	Messages   []ref          `json:"messages"`
	Name       string         `json:"x-settle-name,omitempty"`
	Role       string         `json:"x-settle-role,omitempty"`
	Workers    int            `json:"x-settle-workers,omitempty"`
	Cap        int            `json:"x-settle-cap,omitempty"`
	DeadLetter string         `json:"x-settle-dead-letter-to,omitempty"`
	Timeout    string         `json:"x-settle-timeout,omitempty"`
	Ordered    bool           `json:"x-settle-ordered,omitempty"`
	Limits     []string       `json:"x-settle-limits,omitempty"`
	Pausable   bool           `json:"x-settle-pausable,omitempty"`
	BatchSize  int            `json:"x-settle-batch-size,omitempty"`
	BatchWait  string         `json:"x-settle-batch-wait,omitempty"`
	OnError    string         `json:"x-settle-on-error,omitempty"`
	OnPanic    string         `json:"x-settle-on-panic,omitempty"`
	OnDecode   string         `json:"x-settle-on-decode-error,omitempty"`
	Delay      string         `json:"x-settle-delay,omitempty"`
	Settings   map[string]any `json:"x-settle-settings,omitempty"`
	ch         *channel
	msg        string // its message's name in components
}

type message struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Summary     string          `json:"summary,omitempty"`
	ContentType string          `json:"contentType,omitempty"`
	Headers     *ref            `json:"headers,omitempty"`
	Payload     json.RawMessage `json:"payload"`
}

type components struct {
	Schemas  map[string]json.RawMessage `json:"schemas,omitempty"`
	Messages map[string]*message        `json:"messages,omitempty"`
}
