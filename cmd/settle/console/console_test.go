package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// setup serves the console over the in-memory broker's queue "refunds" with two dead letters.
func setup(t *testing.T, o console.Options) (*httptest.Server, *coretest.Broker, *http.Client) {
	b := coretest.NewBroker(clock.NewVirtual(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), nil)
	for i, r := range []string{"card processor timeout", "card closed"} {
		b.PublishDead("refunds.dead", []byte(`{"refund":`+string(rune('1'+i))+`}`),
			core.DeadLetterInfo{Count: 3, Origin: "refunds", At: time.Now().Add(-time.Hour), Error: r}.Headers())
	}
	h, err := console.New([]console.Queue{{Name: "refunds", Ops: b.Ops("refunds", "refunds.dead")}}, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return srv, b, &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestConsolePages(t *testing.T) {
	srv, b, c := setup(t, console.Options{})
	code, body := get(t, c, srv.URL+"/")
	if code != 200 || !strings.Contains(body, `data-figure="dead"><a href="/q/0">2</a>`) || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("overview: %d\n%s", code, body)
	}
	code, body = get(t, c, srv.URL+"/q/0")
	if code != 200 || !strings.Contains(body, "card processor timeout") || !strings.Contains(body, "card closed") {
		t.Fatalf("queue page: %d\n%s", code, body)
	}
	code, body = get(t, c, srv.URL+"/q/0/dead/1")
	if code != 200 || !strings.Contains(body, "  &#34;refund&#34;") && !strings.Contains(body, `"refund": 1`) {
		t.Errorf("dead letter page: %d\n%s", code, body)
	}
	if code, _ = get(t, c, srv.URL+"/q/0/dead/999"); code != 404 {
		t.Errorf("unknown dead letter: %d, want 404", code)
	}
	if code, _ = get(t, c, srv.URL+"/q/7"); code != 404 {
		t.Errorf("unknown queue: %d, want 404", code)
	}
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	token := m[1]

	// Without the token, or with another one: refused, nothing changes.
	if code, _, _ := post(t, c, srv.URL+"/q/0/redrive", url.Values{"id": {"1"}}); code != http.StatusForbidden {
		t.Errorf("redrive without a CSRF token: %d, want 403", code)
	}
	if code, _, _ := post(t, c, srv.URL+"/q/0/redrive", url.Values{"id": {"1"}, "csrf": {"forged"}}); code != http.StatusForbidden {
		t.Errorf("redrive with a forged CSRF token: %d, want 403", code)
	}
	if n := len(b.Messages("refunds.dead")); n != 2 {
		t.Fatalf("refused requests changed the dead letter: %d left", n)
	}

	code, loc, _ := post(t, c, srv.URL+"/q/0/redrive", url.Values{"id": {"1"}, "csrf": {token}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "redriven+1") {
		t.Errorf("redrive: %d, Location %q", code, loc)
	}
	if got := b.Messages("refunds"); len(got) != 1 || got[0].Attempt != 1 {
		t.Errorf("after the redrive the queue holds %+v", got)
	}

	// Purge asks first, then deletes on the confirmation's POST.
	code, _, body = post(t, c, srv.URL+"/q/0/purge", url.Values{"all": {"1"}, "csrf": {token}})
	if code != 200 || !strings.Contains(body, "yes, purge") || len(b.Messages("refunds.dead")) != 1 {
		t.Fatalf("purge without confirmation: %d, %d dead letters left\n%s", code, len(b.Messages("refunds.dead")), body)
	}
	code, loc, _ = post(t, c, srv.URL+"/q/0/purge", url.Values{"all": {"1"}, "csrf": {token}, "confirm": {"yes"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "purged+1") || len(b.Messages("refunds.dead")) != 0 {
		t.Errorf("confirmed purge: %d %q, %d left", code, loc, len(b.Messages("refunds.dead")))
	}
}

func TestConsoleCrossOrigin(t *testing.T) {
	srv, b, c := setup(t, console.Options{})
	_, body := get(t, c, srv.URL+"/q/0")
	token := csrfRE.FindStringSubmatch(body)[1]
	req, _ := http.NewRequest("POST", srv.URL+"/q/0/redrive", strings.NewReader(url.Values{"id": {"1"}, "csrf": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(b.Messages("refunds.dead")) != 2 {
		t.Errorf("cross-origin redrive: %d, %d dead letters left; want 403 and 2", resp.StatusCode, len(b.Messages("refunds.dead")))
	}
}

func TestConsoleAuth(t *testing.T) {
	srv, _, c := setup(t, console.Options{Token: "s3cret"})
	if code, _ := get(t, c, srv.URL+"/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	resp, err := c.Get(srv.URL + "/?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _ := get(t, c, srv.URL+"/"); code != 200 {
		t.Errorf("after ?token=: %d, want 200 (the cookie carries it)", code)
	}
	srv2, _, c2 := setup(t, console.Options{BasicAuth: "ops:pw"})
	if code, _ := get(t, c2, srv2.URL+"/"); code != http.StatusUnauthorized {
		t.Errorf("no basic auth: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", srv2.URL+"/", nil)
	req.SetBasicAuth("ops", "pw")
	resp, err = c2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with basic auth: %d", resp.StatusCode)
	}
}

func TestCheckListen(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.1.2.3:8080": false} {
		err := console.CheckListen(addr, console.Options{})
		if (err == nil) != ok {
			t.Errorf("CheckListen(%q) without auth = %v; want allowed %v", addr, err, ok)
		}
		if err := console.CheckListen(addr, console.Options{Token: "t"}); err != nil {
			t.Errorf("CheckListen(%q) with a token = %v", addr, err)
		}
	}
}
