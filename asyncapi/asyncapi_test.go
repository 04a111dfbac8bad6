package asyncapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/settlehq/settle/asyncapi"
	"github.com/settlehq/settle/core"
	"go.yaml.in/yaml/v3"
)

var (
	specOnce sync.Once
	spec     *jsonschema.Schema
	specErr  error
)

// validate checks a rendered JSON document against the official AsyncAPI 3.0.0 JSON Schema.
func validate(t *testing.T, doc []byte) {
	t.Helper()
	if err := check(t, doc); err != nil {
		t.Fatalf("the document is not valid AsyncAPI 3.0.0: %v\n%s", err, doc)
	}
}

func check(t *testing.T, doc []byte) error {
	t.Helper()
	specOnce.Do(func() {
		f, err := os.Open("testdata/asyncapi-3.0.0.json")
		if err != nil {
			specErr = err
			return
		}
		defer f.Close()
		s, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			specErr = err
			return
		}
		c := jsonschema.NewCompiler()
		if specErr = c.AddResource("asyncapi-3.0.0.json", s); specErr != nil {
			return
		}
		spec, specErr = c.Compile("asyncapi-3.0.0.json")
	})
	if specErr != nil {
		t.Fatalf("the AsyncAPI 3.0.0 schema: %v", specErr)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(doc)))
	if err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return spec.Validate(inst)
}

// TestTheSchemaRefusesBrokenDocuments shows that validate can fail: a document without its info,
// one whose operation's action is neither send nor receive.
func TestTheSchemaRefusesBrokenDocuments(t *testing.T) {
	raw, doc := render(t, newApp(t))
	must(t, check(t, raw))
	delete(doc, "info")
	noInfo, err := json.Marshal(doc)
	must(t, err)
	if check(t, noInfo) == nil {
		t.Error("a document without info passed")
	}
	_, doc = render(t, newApp(t))
	at(t, doc, "operations", "receive_refunds").(map[string]any)["action"] = "consume"
	badAction, err := json.Marshal(doc)
	must(t, err)
	if check(t, badAction) == nil {
		t.Error("an operation with action consume passed")
	}
}

// Refund is a refund request.
type Refund struct {
	// Ref is the merchant's reference.
	Ref   string `json:"ref"`
	Cents int64  `json:"cents"`
	// Note is optional.
	Note   string    `json:"note,omitempty"`
	At     time.Time `json:"at"`
	Lines  []Line    `json:"lines,omitempty"`
	secret string
	Skip   chan int `json:"-"`
}

// Line is one line of a refund.
type Line struct {
	SKU  string `json:"sku"`
	Next *Line  `json:"next,omitempty"` // a cycle: the reflector refers to the definition
}

func ack[T any](context.Context, *core.Message[T]) error { return nil }

type endpoint struct {
	name string
	desc func(core.SubscriptionDescription) core.EndpointDescription
}

func (e endpoint) Queue() string { return e.name }
func (e endpoint) Open(context.Context, core.Subscription) (core.Source, core.Finisher, error) {
	return nil, nil, errors.New("never opened")
}
func (e endpoint) Describe(s core.SubscriptionDescription) core.EndpointDescription { return e.desc(s) }

func amqpQuorum(name string) endpoint {
	return endpoint{name, func(s core.SubscriptionDescription) core.EndpointDescription {
		return core.EndpointDescription{Backend: core.BackendAMQP, Delay: "process",
			AMQP: &core.AMQPQueue{Name: name, Type: "quorum", Durable: true,
				Arguments: map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(s.Cap)},
				Bindings:  []core.AMQPBinding{{Exchange: "payments", Kind: "topic", Key: "refund.*"}}},
			Related: []core.RelatedQueue{
				{Role: core.RoleDelay, Name: name + ".retry", About: "Copies wait here until their TTL runs out.",
					AMQP: &core.AMQPQueue{Name: name + ".retry", Type: "quorum", Durable: true}},
				{Role: core.RoleDeadLetter, Name: s.DeadLetterTo, AMQP: &core.AMQPQueue{Name: s.DeadLetterTo, Type: "classic", Durable: true}},
			},
			Settings: map[string]any{"prefetch": 300, "publish_policy": "confirmed"}}
	}}
}

func natsQueue(subject string) endpoint {
	return endpoint{subject, func(core.SubscriptionDescription) core.EndpointDescription {
		return core.EndpointDescription{Backend: core.BackendNATS, Delay: "server",
			NATS: &core.NATSQueue{Subject: subject, Stream: "REFUNDS", Consumer: "REFUNDS", Subjects: []string{subject}}}
	}}
}

func newApp(t *testing.T) *core.App {
	t.Helper()
	app := core.New(core.WithInfo("refunds", "0.1.0"), core.WithDescription("Refunds card payments."))
	must(t, core.Subscribe(app, amqpQuorum("refunds"), ack[Refund], core.DeadLetterAfter(5, "refunds.dead"),
		core.Workers(4), core.Timeout(30*time.Second), core.OnError(core.Backoff(time.Second, time.Minute))))
	must(t, core.Subscribe(app, endpoint{"refunds.dead", nil}.plain(), ack[Refund]))
	must(t, core.Subscribe(app, natsQueue("payouts.new"), ack[*Refund], core.DeadLetterAfter(3, "payouts.dead")))
	must(t, core.Subscribe(app, endpoint{"blobs", nil}.plain(), ack[[]byte], core.WithCodec(core.Raw)))
	return app
}

// plainEndpoint is an endpoint that does not describe itself.
type plainEndpoint struct{ name string }

func (e endpoint) plain() plainEndpoint { return plainEndpoint{e.name} }
func (e plainEndpoint) Queue() string   { return e.name }
func (e plainEndpoint) Open(context.Context, core.Subscription) (core.Source, core.Finisher, error) {
	return nil, nil, errors.New("never opened")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func render(t *testing.T, app *core.App, opts ...asyncapi.Option) (raw []byte, doc map[string]any) {
	t.Helper()
	d, err := asyncapi.New(app, opts...)
	must(t, err)
	raw, err = d.JSON()
	must(t, err)
	must(t, json.Unmarshal(raw, &doc))
	return raw, doc
}

// at reads a path of keys out of a decoded document.
func at(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object at %q", strings.Join(path, "/"), k)
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("%s: no %q (have %v)", strings.Join(path, "/"), k, keys(m))
		}
	}
	return v
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// is reports a value of the document that differs from the one wanted.
func is(t *testing.T, doc any, want any, path ...string) {
	t.Helper()
	if got := at(t, doc, path...); got != want {
		t.Errorf("%s = %v, want %v", strings.Join(path, "/"), got, want)
	}
}

// firstMessage is the reference of an operation's (only) message.
func firstMessage(t *testing.T, doc any, op string) any {
	t.Helper()
	return at(t, doc, "operations", op, "messages").([]any)[0].(map[string]any)["$ref"]
}

func TestDocumentIsValidAsyncAPI3(t *testing.T) {
	raw, doc := render(t, newApp(t))
	validate(t, raw)
	is(t, doc, "3.0.0", "asyncapi")
	is(t, doc, "refunds", "info", "title")
	is(t, doc, "0.1.0", "info", "version")
	chans := at(t, doc, "channels").(map[string]any)
	want := []string{"blobs", "payouts_dead", "payouts_new", "refunds", "refunds_dead", "refunds_retry"}
	if got := slices.Sorted(maps.Keys(chans)); !slices.Equal(got, want) {
		t.Errorf("channels %v, want %v", got, want)
	}
	ops := at(t, doc, "operations").(map[string]any)
	want = []string{"deadLetter_payouts_new", "deadLetter_refunds", "delay_refunds", "receive_blobs", "receive_payouts_new", "receive_refunds", "receive_refunds_dead"}
	if got := slices.Sorted(maps.Keys(ops)); !slices.Equal(got, want) {
		t.Errorf("operations %v, want %v", got, want)
	}
}

func TestReceiveOperationsCarrySettlesPolicies(t *testing.T) {
	_, doc := render(t, newApp(t))
	for k, v := range map[string]any{"action": "receive", "x-settle-cap": 5.0, "x-settle-dead-letter-to": "refunds.dead", "x-settle-workers": 4.0,
		"x-settle-timeout": "30s", "x-settle-on-error": "backoff(1s, 1m0s)", "x-settle-on-decode-error": "dead_letter", "x-settle-delay": "process"} {
		is(t, doc, v, "operations", "receive_refunds", k)
	}
	is(t, doc, "#/channels/refunds", "operations", "receive_refunds", "channel", "$ref")
	is(t, doc, 300.0, "operations", "receive_refunds", "x-settle-settings", "prefetch")
	is(t, doc, "send", "operations", "deadLetter_refunds", "action")
	is(t, doc, "#/channels/refunds_dead", "operations", "deadLetter_refunds", "channel", "$ref")
}

func TestChannelsCarryTheBackendsBindings(t *testing.T) {
	_, doc := render(t, newApp(t))
	amqp := at(t, doc, "channels", "refunds", "bindings", "amqp")
	is(t, amqp, "queue", "is")
	is(t, amqp, "refunds", "queue", "name")
	is(t, amqp, "quorum", "x-settle-queue-type")
	is(t, amqp, 5.0, "x-settle-arguments", "x-delivery-limit")
	if x := at(t, amqp, "x-settle-exchanges").([]any); len(x) != 1 || x[0].(map[string]any)["name"] != "payments" {
		t.Errorf("exchanges = %v", x)
	}
	// The dead letter's binding comes from the endpoint's related queue, the waiting queue's too.
	is(t, doc, "classic", "channels", "refunds_dead", "bindings", "amqp", "x-settle-queue-type")
	is(t, doc, "quorum", "channels", "refunds_retry", "bindings", "amqp", "x-settle-queue-type")
	is(t, doc, "REFUNDS", "channels", "payouts_new", "x-settle-nats", "stream")
	is(t, doc, "nats", "channels", "payouts_dead", "x-settle-backend")
}

func TestMessagesCarryPayloadSchemasAndHeaders(t *testing.T) {
	_, doc := render(t, newApp(t), asyncapi.GoComments("github.com/settlehq/settle/asyncapi_test", "."))
	// json tags, omitempty, json:"-", doc comments, the cycle through Line.Next.
	refund := at(t, doc, "components", "schemas", "Refund")
	is(t, refund, "Refund is a refund request.", "description")
	is(t, refund, "Ref is the merchant's reference.", "properties", "ref", "description")
	if props := at(t, refund, "properties").(map[string]any); len(props) != 5 {
		t.Errorf("Refund properties = %v, want ref, cents, note, at, lines", keys(props))
	}
	if req := at(t, refund, "required").([]any); len(req) != 3 {
		t.Errorf("Refund required = %v, want ref, cents, at", req)
	}
	is(t, doc, "#/components/schemas/Line", "components", "schemas", "Line", "properties", "next", "$ref")
	is(t, doc, "#/components/schemas/Refund", "components", "messages", "Refund", "payload", "$ref")
	is(t, doc, "#/components/schemas/settle-headers", "components", "messages", "Refund", "headers", "$ref")
	is(t, doc, "#/components/schemas/settle-dead-letter-headers", "components", "messages", "RefundDeadLetter", "headers", "$ref")
	for _, h := range []string{core.HeaderRetryCount, core.HeaderOrigin, core.HeaderDeadAt, core.HeaderError} {
		at(t, doc, "components", "schemas", "settle-dead-letter-headers", "properties", h)
	}
	// The subscription of a dead-letter queue receives dead letters: the message with their headers.
	if got := firstMessage(t, doc, "receive_refunds_dead"); got != "#/channels/refunds_dead/messages/RefundDeadLetter" {
		t.Errorf("receive_refunds_dead message = %v", got)
	}
	if got := at(t, doc, "channels", "refunds_dead", "messages").(map[string]any); len(got) != 1 {
		t.Errorf("refunds_dead messages = %v, want the dead letter alone", keys(got))
	}
	// A *Refund payload is the Refund message; a Raw payload is a binary string.
	if got := firstMessage(t, doc, "receive_payouts_new"); got != "#/channels/payouts_new/messages/Refund" {
		t.Errorf("receive_payouts_new message = %v", got)
	}
	is(t, doc, "binary", "components", "messages", "bytes", "payload", "format")
}

func TestYAMLSaysWhatJSONSays(t *testing.T) {
	d, err := asyncapi.New(newApp(t))
	must(t, err)
	j, err := d.JSON()
	must(t, err)
	y, err := d.YAML()
	must(t, err)
	var fromJSON, fromYAML any
	must(t, json.Unmarshal(j, &fromJSON))
	must(t, yaml.Unmarshal(y, &fromYAML))
	// YAML decodes numbers as ints: compare through JSON.
	back, err := json.Marshal(fromYAML)
	must(t, err)
	var again any
	must(t, json.Unmarshal(back, &again))
	if !reflect.DeepEqual(fromJSON, again) {
		t.Errorf("YAML and JSON differ:\n%s", y)
	}
	if !strings.HasPrefix(string(y), "asyncapi: 3.0.0\n") || !strings.Contains(string(y), "version: 0.1.0\n") {
		t.Errorf("YAML does not start as a document should:\n%.300s", y)
	}
}

func TestDocumentIsStable(t *testing.T) {
	a, _ := render(t, newApp(t))
	b, _ := render(t, newApp(t))
	if string(a) != string(b) {
		t.Error("two documents of the same App differ")
	}
}

type withChan struct {
	Ref  string        `json:"ref"`
	Done chan struct{} `json:"done"`
}

type withFunc struct {
	Inner struct{ Call func() }
}

func TestUndescribableTypesAreRefusedNamingSubscriptionAndType(t *testing.T) {
	cases := []struct {
		mount func(*core.App) error
		want  []string
	}{
		{func(a *core.App) error { return core.Subscribe(a, endpoint{"q", nil}.plain(), ack[withChan]) },
			[]string{`subscription "q"`, "asyncapi_test.withChan", "withChan.Done", "chan struct {}"}},
		{func(a *core.App) error {
			return core.Subscribe(a, endpoint{"q", nil}.plain(), ack[[]withFunc], core.Name("funcs"))
		}, []string{`subscription "funcs"`, "[]asyncapi_test.withFunc", ".Inner.Call", "func()"}},
		{func(a *core.App) error {
			return core.Subscribe(a, endpoint{"q", nil}.plain(), ack[map[string]complex128])
		}, []string{`subscription "q"`, "complex128"}},
	}
	for _, c := range cases {
		app := core.New(core.WithInfo("x", "1"))
		must(t, c.mount(app))
		_, err := asyncapi.New(app)
		var te *asyncapi.TypeError
		if !errors.As(err, &te) {
			t.Errorf("err = %v, want a *TypeError", err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("err = %q, want it to name %q", err, w)
			}
		}
	}
}

func TestTwoPayloadTypesOfOneNameAreRefused(t *testing.T) {
	type Receipt struct {
		ID int `json:"id"`
	}
	app := core.New(core.WithInfo("x", "1"))
	must(t, core.Subscribe(app, endpoint{"a", nil}.plain(), ack[Receipt]))
	must(t, core.Subscribe(app, endpoint{"b", nil}.plain(), ack[Line])) // no clash
	must(t, core.Subscribe(app, endpoint{"c", nil}.plain(), ack[*Receipt]))
	if _, err := asyncapi.New(app); err != nil {
		t.Fatalf("one type under two subscriptions: %v", err)
	}
	must(t, core.Subscribe(app, endpoint{"d", nil}.plain(), ack[struct {
		A Receipt      `json:"a"`
		B outerReceipt `json:"b"`
	}]))
	_, err := asyncapi.New(app)
	if err == nil || !strings.Contains(err.Error(), "both named Receipt") || !strings.Contains(err.Error(), `subscription "d"`) {
		t.Errorf("err = %v, want the clash of the two Receipt types named", err)
	}
}

// Receipt clashes by name with the Receipt of TestTwoPayloadTypesOfOneNameAreRefused.
type Receipt struct {
	Ref string `json:"ref"`
}

type outerReceipt = Receipt

func TestAppWithoutInfoIsRefused(t *testing.T) {
	app := core.New()
	must(t, core.Subscribe(app, endpoint{"q", nil}.plain(), ack[Refund]))
	if _, err := asyncapi.New(app); !errors.Is(err, core.ErrNoInfo) {
		t.Errorf("err = %v, want core.ErrNoInfo", err)
	}
}

func TestPublishersAreSendOperations(t *testing.T) {
	d := newApp(t).Describe()
	d.Publishers = []core.PublisherDescription{{Name: "refund-requests", Queue: "refunds", Payload: reflect.TypeFor[Refund](),
		ContentType: "application/json", Endpoint: &core.EndpointDescription{Backend: core.BackendAMQP}}}
	doc, err := asyncapi.FromDescription(d)
	must(t, err)
	raw, err := doc.JSON()
	must(t, err)
	validate(t, raw)
	var m map[string]any
	must(t, json.Unmarshal(raw, &m))
	op := at(t, m, "operations", "send_refund-requests")
	if at(t, op, "action") != "send" || at(t, op, "channel", "$ref") != "#/channels/refunds" {
		t.Errorf("send operation = %v", op)
	}
	if got := at(t, op, "messages").([]any)[0].(map[string]any)["$ref"]; got != "#/channels/refunds/messages/Refund" {
		t.Errorf("send message = %v", got)
	}
}

// TestCommittedDocumentsAreValid validates the documents the repository commits (docs/asyncapi/,
// made from the example services) against the AsyncAPI 3.0.0 schema. The module on its own (a
// module zip) has none.
func TestCommittedDocumentsAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "asyncapi", "*.yaml"))
	must(t, err)
	if len(files) == 0 {
		if _, err := os.Stat(filepath.Join("..", "go.work")); err == nil {
			t.Fatal("no documents in docs/asyncapi/: examples/refunds makes them (go test ./refunds -run AsyncAPI -update)")
		}
		t.Skip("not in the settle repository: no committed documents to validate")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, err)
		var doc any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		j, err := json.Marshal(doc)
		must(t, err)
		if err := check(t, j); err != nil {
			t.Errorf("%s is not valid AsyncAPI 3.0.0: %v", f, err)
		}
	}
}

// TestYAMLKeepsStringsStrings: a name or version YAML would read as a boolean, a number or null
// stays a string; an App with nothing mounted is still a valid document.
func TestYAMLKeepsStringsStrings(t *testing.T) {
	d, err := asyncapi.FromDescription(core.Description{Info: core.AppInfo{Name: "true", Version: "1.0", Description: "null"}})
	must(t, err)
	y, err := d.YAML()
	must(t, err)
	var back map[string]any
	must(t, yaml.Unmarshal(y, &back))
	info := back["info"].(map[string]any)
	if info["title"] != "true" || info["version"] != "1.0" || info["description"] != "null" {
		t.Errorf("info read back as %#v from\n%s", info, y)
	}
	j, err := d.JSON()
	must(t, err)
	validate(t, j)
}

// TestReceiveOperationsSayOrderAndBatches: an ordered subscription, a batch subscription and one
// with limits say so in x-settle-ordered, -batch-size / -wait, -limits and -pausable; a plain one
// carries none of them.
func TestReceiveOperationsSayOrderAndBatches(t *testing.T) {
	d := newApp(t).Describe()
	d.Subscriptions[0].Ordered = true
	d.Subscriptions[0].BatchSize, d.Subscriptions[0].BatchWait = 50, 200*time.Millisecond
	d.Subscriptions[0].Limits, d.Subscriptions[0].Pausable = []string{"Concurrency(5) shared", "Rate(50, 1s, 10) per key"}, true
	doc, err := asyncapi.FromDescription(d)
	must(t, err)
	raw, err := doc.JSON()
	must(t, err)
	validate(t, raw)
	var m map[string]any
	must(t, json.Unmarshal(raw, &m))
	name := "receive_" + strings.NewReplacer(".", "_", "-", "_").Replace(d.Subscriptions[0].Name)
	is(t, m, true, "operations", name, "x-settle-ordered")
	is(t, m, 50.0, "operations", name, "x-settle-batch-size")
	is(t, m, "200ms", "operations", name, "x-settle-batch-wait")
	if got := at(t, m, "operations", name, "x-settle-limits").([]any); len(got) != 2 || got[0] != "Concurrency(5) shared" || got[1] != "Rate(50, 1s, 10) per key" {
		t.Errorf("x-settle-limits = %v", got)
	}
	is(t, m, true, "operations", name, "x-settle-pausable")
	for k, op := range at(t, m, "operations").(map[string]any) {
		if k == name {
			continue
		}
		for _, f := range []string{"x-settle-ordered", "x-settle-batch-size", "x-settle-batch-wait", "x-settle-limits", "x-settle-pausable"} {
			if v, ok := op.(map[string]any)[f]; ok {
				t.Errorf("operation %s carries %s = %v", k, f, v)
			}
		}
	}
}

// TestRedisQueueIsAValidChannel: a queue of a backend without an AsyncAPI binding (a Redis
// stream) is a channel that names its backend and carries its settings; the document is valid.
func TestRedisQueueIsAValidChannel(t *testing.T) {
	d := newApp(t).Describe()
	sub := &d.Subscriptions[0]
	sub.Endpoint = &core.EndpointDescription{Backend: core.BackendRedis,
		Settings: map[string]any{"stream": sub.Queue, "group": "settle", "lease": "30s"},
		Delay:    "in Redis: the sorted set", Related: []core.RelatedQueue{{Role: core.RoleDeadLetter, Name: sub.DeadLetterTo}}}
	doc, err := asyncapi.FromDescription(d)
	must(t, err)
	raw, err := doc.JSON()
	must(t, err)
	validate(t, raw)
	var m map[string]any
	must(t, json.Unmarshal(raw, &m))
	found := false
	for _, ch := range at(t, m, "channels").(map[string]any) {
		c := ch.(map[string]any)
		if c["address"] == sub.Queue {
			found = true
			if c["x-settle-backend"] != core.BackendRedis {
				t.Errorf("channel %v: want x-settle-backend redis", c)
			}
		}
	}
	if !found {
		t.Fatalf("no channel for %q", sub.Queue)
	}
	name := "receive_" + strings.NewReplacer(".", "_", "-", "_").Replace(sub.Name)
	is(t, m, "30s", "operations", name, "x-settle-settings", "lease")
}
