package console_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"go.yaml.in/yaml/v3"
)

func refundsDocument(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "asyncapi", "refunds-rabbitmq.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestConsoleAsyncAPI: the page shows the channels, operations, messages and schemas as tables;
// the document is served as YAML (as given) and as JSON at stable paths.
func TestConsoleAsyncAPI(t *testing.T) {
	doc := refundsDocument(t)
	srv, _, c := setup(t, console.Options{AsyncAPI: doc})
	if _, overview := get(t, c, srv.URL+"/"); !strings.Contains(overview, `<a href="/asyncapi" id="asyncapi-link">`) {
		t.Error("the overview does not link to the document")
	}
	code, page := get(t, c, srv.URL+"/asyncapi")
	if code != http.StatusOK {
		t.Fatalf("/asyncapi: %d\n%s", code, page)
	}
	for _, want := range []string{
		`<h1 id="api-title">refunds <span class="muted">0.1.0</span></h1>`,
		`<tr id="channel-refunds_retry">`, `<code>refunds.retry</code>`, `<th>amqp.x-settle-queue-type</th><td>quorum</td>`,
		`<tr id="operation-receive_refunds">`, `<th>on-error</th><td>backoff(100ms, 6.4s)</td>`, `<th>cap</th><td>5</td>`,
		`<tr id="message-RefundDeadLetter">`, `<a href="#schema-settle-dead-letter-headers">settle-dead-letter-headers</a>`,
		`<h3 id="schema-Refund"><code>Refund</code></h3>`, `<td><code>cents</code></td><td>integer</td><td>yes</td><td>Cents is the amount.</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/asyncapi lacks %s", want)
		}
	}
	if code, y := get(t, c, srv.URL+"/asyncapi.yaml"); code != http.StatusOK || y != string(doc) {
		t.Errorf("/asyncapi.yaml: %d, not the document as given", code)
	}
	code, j := get(t, c, srv.URL+"/asyncapi.json")
	var d map[string]any
	if code != http.StatusOK || json.Unmarshal([]byte(j), &d) != nil || d["asyncapi"] != "3.0.0" || len(d["operations"].(map[string]any)) != 7 {
		t.Errorf("/asyncapi.json: %d\n%.300s", code, j)
	}
}

func TestConsoleAsyncAPIFromJSON(t *testing.T) {
	var d any
	if err := yaml.Unmarshal(refundsDocument(t), &d); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	srv, _, c := setup(t, console.Options{AsyncAPI: j})
	if code, y := get(t, c, srv.URL+"/asyncapi.yaml"); code != http.StatusOK || !strings.Contains(y, "asyncapi: 3.0.0\n") {
		t.Errorf("/asyncapi.yaml from a JSON document: %d\n%.300s", code, y)
	}
	if code, page := get(t, c, srv.URL+"/asyncapi"); code != http.StatusOK || !strings.Contains(page, `<tr id="channel-payouts_dead">`) {
		t.Errorf("/asyncapi from a JSON document: %d", code)
	}
}

func TestConsoleWithoutAsyncAPI(t *testing.T) {
	srv, _, c := setup(t, console.Options{})
	if _, overview := get(t, c, srv.URL+"/"); strings.Contains(overview, "asyncapi-link") {
		t.Error("the overview links to a document it does not have")
	}
	for _, p := range []string{"/asyncapi", "/asyncapi.json", "/asyncapi.yaml"} {
		if code, _ := get(t, c, srv.URL+p); code != http.StatusNotFound {
			t.Errorf("%s without a document: %d, want 404", p, code)
		}
	}
}

func TestConsoleRefusesABadAsyncAPI(t *testing.T) {
	b := coretest.NewBroker(clock.Real(), nil)
	q := []console.Queue{{Name: "refunds", Ops: b.Ops("refunds", "refunds.dead")}}
	for doc, want := range map[string]string{
		"asyncapi: 2.6.0\ninfo: {}\n": `version is "2.6.0"`,
		"{not: [json":                 "neither JSON nor YAML",
	} {
		if _, err := console.New(q, console.Options{AsyncAPI: []byte(doc)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", doc, err, want)
		}
	}
}

func TestConsoleAsyncAPINeedsTheToken(t *testing.T) {
	srv, _, c := setup(t, console.Options{AsyncAPI: refundsDocument(t), Token: "s3cret"})
	if code, _ := get(t, c, srv.URL+"/asyncapi.json"); code != http.StatusUnauthorized {
		t.Errorf("/asyncapi.json without the token: %d, want 401", code)
	}
	get(t, c, srv.URL+"/asyncapi?token=s3cret") // sets the session's cookie
	if code, _ := get(t, c, srv.URL+"/asyncapi.json"); code != http.StatusOK {
		t.Errorf("/asyncapi.json with the token's cookie: %d", code)
	}
}
