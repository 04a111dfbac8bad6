package eventplugin

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/settlehq/settle/core/sqlqueue"
)

// echoHandler records the request it got and answers with one statement whose arguments are
// the ones it was built with.
type echoHandler struct {
	got  chan *Request
	args []any
	err  error
}

func (h *echoHandler) Describe(context.Context) (Manifest, error) {
	return Manifest{Name: "echo", Handles: []Handles{{Event: EventClaim, Dialects: []string{"postgres"}}, {Event: EventDeadLetter}}}, nil
}

func (h *echoHandler) Render(_ context.Context, r *Request) ([]Statement, error) {
	h.got <- r
	if h.err != nil {
		return nil, h.err
	}
	return []Statement{{SQL: "SELECT 1", Args: h.args}, {SQL: "SELECT 2"}}, nil
}

// connect connects h in process through go-plugin's gRPC machinery and returns the host-side
// Handler.
func connect(t *testing.T, h Handler) Handler {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, plugin.PluginSet{PluginName: &GRPCPlugin{Impl: h}})
	// Closing the client stops the server through go-plugin's controller; stopping it here
	// too would race with that.
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(Handler)
}

func TestGRPCDescribe(t *testing.T) {
	t.Parallel()
	h := connect(t, &echoHandler{})
	m, err := h.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{Name: "echo", Handles: []Handles{{Event: EventClaim, Dialects: []string{"postgres"}}, {Event: EventDeadLetter}}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("Describe = %+v, want %+v", m, want)
	}
}

// Every field of a request and every kind of argument crosses the wire unchanged.
func TestGRPCRenderRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	impl := &echoHandler{got: make(chan *Request, 2), args: []any{nil, 42, int64(-7), uint32(9), 1.5, "text", []byte{0, 1}, true, at}}
	h := connect(t, impl)
	table := Table{
		Table:      sqlqueue.Table{Schema: "app", Name: "jobs", Columns: sqlqueue.StandardTable("jobs").Columns},
		QuotedName: `"app"."jobs"`,
		Quoted:     sqlqueue.Columns{ID: `"id"`, Payload: `"payload"`, Group: `"grp"`, Attempt: `"attempt"`, RetryAfter: `"retry_after"`, LockedUntil: `"locked_until"`, ProcessedAt: `"processed_at"`, Headers: `"headers"`, CreatedAt: `"created_at"`},
	}
	reqs := []*Request{
		{Event: EventDeadLetter, Dialect: "postgres", Form: sqlqueue.FormAdvisory, Placeholders: PlaceholdersDollar, Table: table,
			Subscription: "refunds", Queue: "refunds", Now: at, Row: Row{ID: 9, Attempt: 5, Group: "refunds", Token: at.Add(time.Minute)},
			Dest: Destination{Name: "refunds.dead", IsGroup: true}},
		{Event: EventClaim, Dialect: "postgres", Form: sqlqueue.FormLease, Placeholders: PlaceholdersDollar, Table: table,
			Now: at, Claim: Claim{Limit: 10, Group: "refunds", Token: at.Add(30 * time.Second)}},
		{Event: EventRetryAfter, Dialect: "mysql", Form: sqlqueue.FormRowLock, Placeholders: PlaceholdersQuestion, Table: table,
			Now: at, Row: Row{ID: 3, Attempt: 2}, Delay: 90 * time.Second, RetryAt: at.Add(90 * time.Second)},
	}
	for _, req := range reqs {
		stmts, err := h.Render(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := <-impl.got; !reflect.DeepEqual(got, req) {
			t.Errorf("the plugin got\n%+v\nwant\n%+v", got, req)
		}
		want := []Statement{{SQL: "SELECT 1", Args: []any{nil, int64(42), int64(-7), int64(9), 1.5, "text", []byte{0, 1}, true, at}}, {SQL: "SELECT 2", Args: []any{}}}
		if !reflect.DeepEqual(stmts, want) {
			t.Errorf("the host got\n%#v\nwant\n%#v", stmts, want)
		}
	}
}

func TestGRPCHandlerError(t *testing.T) {
	t.Parallel()
	h := connect(t, &echoHandler{got: make(chan *Request, 1), err: errors.New("tenant quota table missing")})
	_, err := h.Render(context.Background(), &Request{Event: EventDeadLetter, Dialect: "sqlite"})
	var he *HandlerError
	if !errors.As(err, &he) || he.Message != "tenant quota table missing" || !errors.Is(err, ErrHandler) {
		t.Fatalf("err = %#v, want the handler's HandlerError", err)
	}
}

func TestGRPCUnsupportedArgument(t *testing.T) {
	t.Parallel()
	h := connect(t, &echoHandler{got: make(chan *Request, 1), args: []any{1, struct{}{}}})
	_, err := h.Render(context.Background(), &Request{Event: EventDeadLetter, Dialect: "sqlite"})
	if !errors.Is(err, ErrHandler) || !strings.Contains(err.Error(), "statement 1, argument 2: unsupported type struct {}") {
		t.Fatalf("err = %v, want a HandlerError naming statement and argument", err)
	}
}
