package asyncapi

import (
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/settlehq/settle/core"
)

// Version is the AsyncAPI version of the documents.
const Version = "3.0.0"

// Option configures a document.
type Option func(*options) error

type options struct{ r *jsonschema.Reflector }

// GoComments takes the descriptions of payload types and fields from the doc comments of the Go
// package in dir (a path, relative or absolute) whose import path is importPath (for a
// command, "main"), and of the packages in its subfolders. The source must be
// readable where the document is made (a test, a build step), so a deployed binary usually
// does without.
func GoComments(importPath, dir string) Option {
	return func(o *options) error {
		r := o.r
		read := &jsonschema.Reflector{}
		if err := read.AddGoComments(importPath, dir); err != nil {
			return fmt.Errorf("asyncapi.GoComments(%q, %q): %w", importPath, dir, err)
		}
		// The reflector keys what it read by importPath joined with the folder it walked:
		// take the folder back out, keeping its subfolders' packages below importPath.
		walked := path.Join(importPath, filepath.ToSlash(dir))
		if r.CommentMap == nil {
			r.CommentMap = map[string]string{}
		}
		for k, v := range read.CommentMap {
			if rest, ok := strings.CutPrefix(k, walked); ok {
				k = importPath + rest
			}
			r.CommentMap[k] = v
		}
		return nil
	}
}

// Document is an AsyncAPI 3.0 document; JSON and YAML render it.
type Document struct{ doc *document }

// New returns the document of what app has mounted (see FromDescription).
func New(app *core.App, opts ...Option) (*Document, error) {
	return FromDescription(app.Describe(), opts...)
}

// FromDescription returns the document of an App's description. It fails with core.ErrNoInfo
// when the App has no name or version, and with a *TypeError naming the subscription when a
// payload type cannot be described as JSON Schema.
func FromDescription(d core.Description, opts ...Option) (*Document, error) {
	if d.Info.Name == "" || d.Info.Version == "" {
		return nil, fmt.Errorf("asyncapi: %w", core.ErrNoInfo)
	}
	r := &jsonschema.Reflector{Anonymous: true, AllowAdditionalProperties: true}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("asyncapi: nil option")
		}
		if err := o(&options{r}); err != nil {
			return nil, err
		}
	}
	b := &builder{
		doc: &document{
			AsyncAPI: Version, DefaultContentType: core.JSON.ContentType(),
			Info:     info{Title: d.Info.Name, Version: d.Info.Version, Description: d.Info.Description},
			Channels: map[string]*channel{}, Operations: map[string]*operation{},
		},
		schemas: newSchemas(r), names: map[string]reflect.Type{}, channels: map[string]*channel{},
		messages: map[messageKey]string{}, keys: map[string]messageKey{},
	}
	for _, s := range d.Subscriptions {
		if err := b.subscription(s); err != nil {
			return nil, err
		}
	}
	for _, p := range d.Publishers {
		if err := b.publisher(p); err != nil {
			return nil, err
		}
	}
	b.finish()
	return &Document{doc: b.doc}, nil
}

type builder struct {
	doc      *document
	schemas  *schemas
	names    map[string]reflect.Type // named payload types, by name
	channels map[string]*channel     // by backend and address
	messages map[messageKey]string   // component message names
	keys     map[string]messageKey   // what each component message is
	ops      []*operation            // in the order they were added
}

// messageKey identifies a component message: a payload type in an encoding, plain or as a dead
// letter (which carries the dead-letter headers).
type messageKey struct {
	t           reflect.Type
	contentType string
	dead        bool
}

// Channel roles (x-settle-roles).
const (
	roleQueue      = "queue"
	roleDeadLetter = core.RoleDeadLetter
	roleDelay      = core.RoleDelay
)

func (b *builder) subscription(s core.SubscriptionDescription) error {
	op := fmt.Sprintf("subscription %q", s.Name)
	backend, ep := "", s.Endpoint
	if ep != nil {
		backend = ep.Backend
	}
	ch := b.channel(backend, s.Queue, roleQueue)
	b.bind(ch, ep)
	msg, err := b.message(op, s.Payload, s.ContentType, false)
	if err != nil {
		return err
	}
	o := &operation{
		Action: "receive", Summary: fmt.Sprintf("settle subscription %q handles the messages of %s.", s.Name, s.Queue),
		Name: s.Name, Role: roleQueue, Workers: s.Workers, Cap: s.Cap, DeadLetter: s.DeadLetterTo,
		OnError: s.OnError, OnPanic: s.OnPanic, OnDecode: s.OnDecodeError,
		Ordered: s.Ordered, BatchSize: s.BatchSize, Limits: s.Limits, Pausable: s.Pausable,
	}
	if s.Timeout > 0 {
		o.Timeout = s.Timeout.String()
	}
	if s.BatchSize > 0 {
		o.BatchWait = s.BatchWait.String()
	}
	if ep != nil {
		o.Delay, o.Settings = ep.Delay, ep.Settings
	}
	b.operation("receive", s.Name, o, ch, msg)
	if s.Cap > 0 {
		dl := b.channel(backend, s.DeadLetterTo, roleDeadLetter)
		dmsg, err := b.message(op, s.Payload, s.ContentType, true)
		if err != nil {
			return err
		}
		b.operation("deadLetter", s.Name, &operation{
			Action: "send", Name: s.Name, Role: roleDeadLetter,
			Summary: deadLetterSummary(s),
		}, dl, dmsg)
	}
	if ep == nil {
		return nil
	}
	for _, r := range ep.Related {
		rc := b.channel(backend, r.Name, r.Role)
		if r.AMQP != nil {
			b.bindAMQP(rc, r.AMQP, false)
		}
		if r.About != "" {
			rc.About = appendNew(rc.About, r.About)
		}
		if r.Role == roleDelay {
			b.operation("delay", s.Name, &operation{Action: "send", Name: s.Name, Role: roleDelay,
				Summary: fmt.Sprintf("settle publishes the delayed retries of %s here. %s", s.Queue, r.About)}, rc, msg)
		}
	}
	return nil
}

// deadLetterSummary says when a subscription's messages move to its dead letter.
func deadLetterSummary(s core.SubscriptionDescription) string {
	when := fmt.Sprintf("when its handler still fails at attempt %d", s.Cap)
	var policies []string
	for _, p := range [][2]string{{"on-error", s.OnError}, {"on-panic", s.OnPanic}, {"on-decode-error", s.OnDecodeError}} {
		if p[1] == "dead_letter" {
			policies = append(policies, p[0])
		}
	}
	if len(policies) > 0 {
		when += ", at once under a dead_letter policy (" + strings.Join(policies, ", ") + ")"
	}
	return fmt.Sprintf("settle moves a message of %s here %s, or when it is delivered past the cap without ever settling; the headers settle-retry-count, settle-origin, settle-dead-at and settle-error say why.", s.Queue, when)
}

func (b *builder) publisher(p core.PublisherDescription) error {
	op := fmt.Sprintf("publisher %q", p.Name)
	backend := ""
	if p.Endpoint != nil {
		backend = p.Endpoint.Backend
	}
	ch := b.channel(backend, p.Queue, roleQueue)
	b.bind(ch, p.Endpoint)
	msg, err := b.message(op, p.Payload, p.ContentType, false)
	if err != nil {
		return err
	}
	b.operation("send", p.Name, &operation{Action: "send", Name: p.Name,
		Summary: fmt.Sprintf("settle publisher %q publishes to %s.", p.Name, p.Queue)}, ch, msg)
	return nil
}

// channel returns the channel of address on backend, made on first use with the given role.
func (b *builder) channel(backend, address, role string) *channel {
	k := backend + "\x00" + address
	ch := b.channels[k]
	if ch == nil {
		ch = b.sameAddress(backend, address)
	}
	if ch == nil {
		ch = &channel{Address: address, Backend: backend}
		ch.key = b.unique(sanitize(address), func(s string) bool { return b.doc.Channels[s] != nil })
		b.channels[k] = ch
		b.doc.Channels[ch.key] = ch
	}
	ch.Roles = appendNew(ch.Roles, role)
	return ch
}

// sameAddress returns the channel of address whose backend is unknown on one side (an endpoint
// that does not describe itself): it is the same queue.
func (b *builder) sameAddress(backend, address string) *channel {
	for _, ch := range b.channels {
		if ch.Address != address || (backend != "" && ch.Backend != "") {
			continue
		}
		if ch.Backend == "" {
			ch.Backend = backend
		}
		return ch
	}
	return nil
}

// bind adds an endpoint's binding to its channel, unless it has one.
func (b *builder) bind(ch *channel, ep *core.EndpointDescription) {
	if ep == nil {
		return
	}
	switch {
	case ep.AMQP != nil:
		b.bindAMQP(ch, ep.AMQP, true)
	case ep.NATS != nil && ch.NATS == nil:
		ch.NATS = &natsChannel{Stream: ep.NATS.Stream, Consumer: ep.NATS.Consumer, Subjects: ep.NATS.Subjects}
	case ep.SQL != nil && ch.SQL == nil:
		ch.SQL = &sqlChannel{Table: ep.SQL.Table, Group: ep.SQL.Group, Form: ep.SQL.Form}
	}
}

// bindAMQP sets the channel's AMQP binding: the first one, except that a queue's own endpoint
// (own) says better what it is than another endpoint's view of it as a related queue.
func (b *builder) bindAMQP(ch *channel, q *core.AMQPQueue, own bool) {
	if ch.Bindings != nil && (ch.ownBinding || !own) {
		return
	}
	ch.ownBinding = own
	a := &amqpChannel{Is: "queue", BindingVersion: "0.3.0", QueueType: q.Type, Arguments: q.Arguments,
		Queue: amqpQueue{Name: q.Name, Durable: q.Durable, Exclusive: q.Exclusive, AutoDelete: q.AutoDelete}}
	for _, x := range q.Bindings {
		a.Exchanges = append(a.Exchanges, amqpExchange{Name: x.Exchange, Type: x.Kind, RoutingKey: x.Key})
	}
	ch.Bindings = &bindings{AMQP: a}
}

// operation adds o, on ch with message msg, as kind_name.
func (b *builder) operation(kind, name string, o *operation, ch *channel, msg string) {
	key := b.unique(kind+"_"+sanitize(name), func(s string) bool { return b.doc.Operations[s] != nil })
	o.Channel = ref{"#/channels/" + ch.key}
	o.ch, o.msg = ch, msg
	b.doc.Operations[key] = o
	b.ops = append(b.ops, o)
}

// message returns the component message of payload type t in contentType, made on first use.
func (b *builder) message(op string, t reflect.Type, contentType string, dead bool) (string, error) {
	if t == nil {
		return "", fmt.Errorf("asyncapi: %s: no payload type", op)
	}
	for t.Kind() == reflect.Pointer { // a *T payload decodes the same messages as T
		t = t.Elem()
	}
	k := messageKey{t, contentType, dead}
	if name, ok := b.messages[k]; ok {
		return name, nil
	}
	payload, err := b.payload(op, t, contentType)
	if err != nil {
		return "", err
	}
	base := messageName(t)
	if dead {
		base += "DeadLetter"
	}
	if b.doc.Components.Messages == nil {
		b.doc.Components.Messages = map[string]*message{}
	}
	name := b.unique(base, func(s string) bool { return b.doc.Components.Messages[s] != nil })
	m := &message{Name: name, Title: typeLabel(t), ContentType: contentType, Payload: payload}
	if dead {
		m.Summary = "A dead letter: the message as it failed, with why it died in settle's headers."
		m.Headers = &ref{"#/components/schemas/" + deadHeadersSchema}
	} else {
		m.Headers = &ref{"#/components/schemas/" + headersSchema}
	}
	b.doc.Components.Messages[name] = m
	b.messages[k], b.keys[name] = name, k
	return name, nil
}

// rawPayload is the schema of a payload the Raw codec passes through.
var rawPayload = []byte(`{"type":"string","format":"binary"}`)

func (b *builder) payload(op string, t reflect.Type, contentType string) ([]byte, error) {
	if contentType == core.Raw.ContentType() {
		return rawPayload, nil
	}
	if err := checkType(op, t, b.names); err != nil {
		return nil, err
	}
	return b.schemas.payload(op, t)
}

// finish fills what depends on the whole document: what a subscription of a dead-letter queue
// receives, the channels' messages, the components.
func (b *builder) finish() {
	used := map[string]bool{}
	for _, o := range b.ops {
		if o.Action == "receive" && slices.Contains(o.ch.Roles, roleDeadLetter) {
			// It reads dead letters: the messages carry the dead-letter headers.
			k := b.keys[o.msg]
			k.dead = true
			if dead, ok := b.messages[k]; ok {
				o.msg = dead
			}
		}
		o.Messages = []ref{{"#/channels/" + o.ch.key + "/messages/" + o.msg}}
		if o.ch.Messages == nil {
			o.ch.Messages = map[string]ref{}
		}
		o.ch.Messages[o.msg] = ref{"#/components/messages/" + o.msg}
		used[o.msg] = true
	}
	headers := map[string]bool{}
	for name, m := range b.doc.Components.Messages {
		if !used[name] {
			delete(b.doc.Components.Messages, name)
			continue
		}
		headers[m.Headers.Ref] = true
	}
	b.doc.Components.Schemas = b.schemas.defs
	if headers["#/components/schemas/"+headersSchema] {
		b.doc.Components.Schemas[headersSchema] = headersJSON
	}
	if headers["#/components/schemas/"+deadHeadersSchema] {
		b.doc.Components.Schemas[deadHeadersSchema] = deadHeadersJSON
	}
}

// unique returns base, or base_2, base_3, … when taken says it is taken.
func (b *builder) unique(base string, taken func(string) bool) string {
	name := base
	for i := 2; taken(name); i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	return name
}

// messageName names the messages of payload type t: its name, "bytes" for []byte, otherwise
// its type written as an identifier ("map_string_int").
func messageName(t reflect.Type) string {
	switch {
	case t.Name() != "":
		return sanitize(t.Name())
	case t == reflect.TypeFor[[]byte]():
		return "bytes"
	}
	return sanitize(t.String())
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// sanitize makes an identifier of s for channel, operation and component keys.
func sanitize(s string) string {
	id := strings.Trim(unsafeID.ReplaceAllString(s, "_"), "_")
	if id == "" {
		return "unnamed"
	}
	return id
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
