package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// getHost GETs path with the Host header set to host, as a page on another origin rebound to
// 127.0.0.1 would send it.
func getHost(t *testing.T, c *http.Client, base, host, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestConsoleHostAllowList(t *testing.T) {
	srv, _, c := setup(t, console.Options{AllowedHosts: []string{"console.example.com"}})
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	for _, host := range []string{"evil.example", "evil.example" + port, "127.0.0.1.evil.example" + port, "console.example.com.evil"} {
		code, body := getHost(t, c, srv.URL, host, "/q/0/dead/1")
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--allowed-hosts") || strings.Contains(body, "refund") {
			t.Errorf("Host %s: %d %q; want 421 naming --allowed-hosts, and no payload", host, code, body)
		}
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port, "LOCALHOST", "console.example.com" + port, "Console.Example.COM"} {
		if code, body := getHost(t, c, srv.URL, host, "/"); code != 200 {
			t.Errorf("Host %s: %d, want 200\n%s", host, code, body)
		}
	}
	if _, err := console.New([]console.Queue{{Name: "q", Ops: coretest.NewBroker(nil, nil).Ops("q", "")}},
		console.Options{AllowedHosts: []string{"http://x.example/"}}); err == nil || !strings.Contains(err.Error(), "http://x.example/") {
		t.Errorf("an allowed host with a scheme: %v, want an error naming it", err)
	}
	srvAny, _, cAny := setup(t, console.Options{AllowedHosts: []string{"*"}})
	if code, _ := getHost(t, cAny, srvAny.URL, "anything.example", "/"); code != 200 {
		t.Errorf("AllowedHosts *: %d, want 200", code)
	}
}

func TestConsoleRepeatedChange(t *testing.T) {
	srv, b, c := setup(t, console.Options{})
	_, body := get(t, c, srv.URL+"/q/0")
	token := csrfRE.FindStringSubmatch(body)[1]
	if code, _, _ := post(t, c, srv.URL+"/q/0/redrive", url.Values{"id": {"1"}, "csrf": {token}}); code != http.StatusSeeOther {
		t.Fatalf("first redrive: %d", code)
	}
	code, _, body := post(t, c, srv.URL+"/q/0/redrive", url.Values{"id": {"1"}, "csrf": {token}})
	if code != http.StatusConflict || !strings.Contains(body, "already redriven") {
		t.Errorf("repeated redrive: %d, want 409 already redriven\n%s", code, body)
	}
	if got := b.Messages("refunds"); len(got) != 1 {
		t.Errorf("the repeated redrive changed the queue: %d messages", len(got))
	}
	code, _, body = post(t, c, srv.URL+"/q/0/purge", url.Values{"id": {"1"}, "csrf": {token}, "confirm": {"yes"}})
	if code != http.StatusConflict || !strings.Contains(body, "already redriven") {
		t.Errorf("purge of a redriven id: %d, want 409\n%s", code, body)
	}
	code, _, body = post(t, c, srv.URL+"/q/0/redrive", url.Values{"id": {"999"}, "csrf": {token}})
	if code != http.StatusNotFound || !strings.Contains(body, "999") {
		t.Errorf("redrive of an unknown id: %d, want 404 naming it\n%s", code, body)
	}
	code, _, body = post(t, c, srv.URL+"/q/0/purge", url.Values{"id": {"2"}, "csrf": {token}, "confirm": {"yes"}})
	if code != http.StatusSeeOther {
		t.Fatalf("purge: %d\n%s", code, body)
	}
	code, _, body = post(t, c, srv.URL+"/q/0/purge", url.Values{"id": {"2"}, "csrf": {token}, "confirm": {"yes"}})
	if code != http.StatusConflict || !strings.Contains(body, "already purged") {
		t.Errorf("repeated purge: %d, want 409 already purged\n%s", code, body)
	}
	if code, body := get(t, c, srv.URL+"/q/0/dead/2"); code != http.StatusNotFound || !strings.Contains(body, "purged from this console") {
		t.Errorf("page of a purged dead letter: %d\n%s", code, body)
	}
}

func TestConsoleSameNameTargets(t *testing.T) {
	b := coretest.NewBroker(clock.NewVirtual(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), nil)
	b.PublishDead("refunds.dead", []byte(`{}`), core.DeadLetterInfo{Count: 3, Origin: "refunds", Error: "boom"}.Headers())
	h, err := console.New([]console.Queue{
		{Name: "refunds", Ops: b.Ops("refunds", "refunds.dead"), Backend: "postgres", Host: "db1:5432"},
		{Name: "refunds", Ops: b.Ops("refunds", "refunds.dead"), Backend: "amqp", Host: "mq1:5672"},
	}, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, h)
	_, body := get(t, http.DefaultClient, srv+"/")
	if !strings.Contains(body, "postgres db1:5432") || !strings.Contains(body, "amqp mq1:5672") {
		t.Errorf("overview does not tell the two refunds apart:\n%s", body)
	}
	_, body = get(t, http.DefaultClient, srv+"/q/1")
	if !strings.Contains(body, "<title>settle · refunds · amqp mq1:5672</title>") || !strings.Contains(body, `id="where">amqp mq1:5672`) {
		t.Errorf("queue page does not say which refunds:\n%s", body)
	}
	_, body = get(t, http.DefaultClient, srv+"/q/0/dead/1")
	if !strings.Contains(body, "<title>settle · refunds · postgres db1:5432 · 1</title>") {
		t.Errorf("dead letter page does not say which refunds:\n%s", body)
	}
}

func newServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
