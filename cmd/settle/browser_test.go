package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// The screenshots the browser test takes for the docs. They are rewritten only under
// SETTLE_UPDATE_SCREENSHOTS=1 (ages and ids change every run; a binary file rewritten by every
// CI run would churn the repository); otherwise the test checks that they exist.
var screenshots = map[string]string{
	"queues": "../../docs/img/console-queues.png",
	"dead":   "../../docs/img/console-dead-letter.png",
}

// chromium finds Debian's chromium (ci/services.sh installs it). Missing, the test is skipped
// with the reason, or fails under SETTLE_REQUIRE_SERVERS=1.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if coretest.RequireServers() {
		t.Fatal("chromium is required (SETTLE_REQUIRE_SERVERS=1) but not installed: ci/services.sh installs it (apt-get install chromium)")
	}
	t.Skip("chromium not installed (apt-get install chromium; ci/services.sh does): the browser test needs a real browser")
	return ""
}

// service is a real settle service on a queue: its handler fails (a timeout) until up, with a
// cap of 2, and reports each message it processes.
type service struct {
	up        atomic.Bool
	processed chan string
	dead      chan string
	stop      func() // stops the App (and waits for it); safe to call twice
}

func (s *service) handler(ctx context.Context, m *core.Message[[]byte]) error {
	if !s.up.Load() {
		return core.Retry().Because(errors.New("card processor timeout after 30s"))
	}
	s.processed <- string(m.Payload)
	return nil
}

func runApp(t *testing.T, register func(*core.App, *service)) *service {
	s := &service{processed: make(chan string, 16), dead: make(chan string, 16)}
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithObserver(func(st core.Settlement) {
		if st.Verdict.Action == core.ActDeadLetter && st.Err == nil {
			s.dead <- st.Delivery.ID()
		}
	}))
	register(app, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("App.Run: %v", err)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("waited %v for %s", coretest.WaitTimeout, what)
	}
	var zero T
	return zero
}

// TestConsoleInBrowser drives the console in headless Chromium over a real SQLite file and a
// real RabbitMQ queue, each with a running service whose failures went to the dead letter: the
// page's depth figures match what each backend's own client counts, a dead letter's page shows
// why it died, and its redrive button sends it back, where the service processes it.
func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
	ctx := context.Background()

	// SQLite: a standard table; two messages die, two wait a day.
	sq := sqliteFixture(t)
	db, err := sqlite.Open(ctx, strings.TrimPrefix(sq.args[1], "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlSvc := runApp(t, func(app *core.App, s *service) {
		ep, err := sqlite.Lease(db, sqlqueue.StandardTable("jobs"), "refunds")
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(app, ep, s.handler, core.WithCodec(core.Raw), core.DeadLetterAfter(2, "refunds.dead")); err != nil {
			t.Fatal(err)
		}
	})
	pub, err := sqlite.NewPublisher(db, sqlqueue.StandardTable("jobs"), "refunds")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := pub.PublishRaw(ctx, fmt.Appendf(nil, `{"refund":"r-%d","amount":%d,"card":"4242"}`, i+1, 1250*(i+1))); err != nil {
			t.Fatal(err)
		}
		wait(t, sqlSvc.dead, "a SQLite dead letter")
	}
	for i := range 2 {
		if _, err := pub.PublishRaw(ctx, fmt.Appendf(nil, `{"refund":"later-%d"}`, i), sqlqueue.Delay(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	// RabbitMQ: a classic queue with its dead-letter queue; three messages die.
	rq := rabbitFixture(t)
	amqpSvc := runApp(t, func(app *core.App, s *service) {
		br, err := amqp.New(amqp.URL(amqpURL))
		if err != nil {
			t.Fatal(err)
		}
		app.Register(br)
		q, err := amqp.Classic(br, rq.origin)
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(app, q, s.handler, core.WithCodec(core.Raw), core.DeadLetterAfter(2, rq.args[5])); err != nil {
			t.Fatal(err)
		}
	})
	b, err := amqp.New(amqp.URL(amqpURL))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 3 {
		if err := amqp.Publish(ctx, b, "", rq.origin, map[string]any{"payout": "p-" + strconv.Itoa(i+1), "amount": 990},
			amqp.WithMessageID("payout-"+strconv.Itoa(i+1)), amqp.WithConfirm()); err != nil {
			t.Fatal(err)
		}
		wait(t, amqpSvc.dead, "a RabbitMQ dead letter")
	}

	// The console, over the targets exactly as `settle console --target …` opens them.
	var queues []console.Queue
	for _, s := range []string{sq.target, rq.target} {
		tg, err := parseTarget(s)
		if err != nil {
			t.Fatal(err)
		}
		q, closer, err := tg.open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		queues = append(queues, console.Queue{Name: tg.name(), Ops: q, Backend: tg.kind, Host: tg.host()})
	}
	h, err := console.New(queues, console.Options{Refresh: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil { // starts the browser on a context without a deadline
		t.Fatalf("starting %s: %v", browser, err)
	}
	tctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	shot := func(name string) {
		t.Helper()
		img, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if _, err := png.Decode(bytes.NewReader(img)); err != nil {
			t.Fatalf("screenshot %s is not a PNG: %v", name, err)
		}
		path := screenshots[name]
		if os.Getenv("SETTLE_UPDATE_SCREENSHOTS") == "1" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, img, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s (%d bytes)", path, len(img))
		} else if _, err := os.Stat(path); err != nil {
			t.Errorf("screenshot %s for the docs is missing (run with SETTLE_UPDATE_SCREENSHOTS=1): %v", path, err)
		}
	}

	// The queues page: every figure the backends can measure, as their own clients count them.
	do("loading the queues page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#queues")))
	cell := func(queue, fig string) string {
		return text(`tr[data-queue="` + queue + `"] td[data-figure="` + fig + `"]`)
	}
	sqName, rqName := queues[0].Name, queues[1].Name
	if got, want := cell(sqName, "dead"), strconv.Itoa(sq.dead(t)); got != want || want != "2" {
		t.Errorf("SQLite dead on the page %s, the table holds %s (want 2)", got, want)
	}
	if got := cell(sqName, "delayed"); got != "2" {
		t.Errorf("SQLite delayed on the page %s, want the 2 rows held for a day", got)
	}
	if got, want := cell(sqName, "ready"), strconv.Itoa(sq.queued(t)-2); got != want {
		t.Errorf("SQLite ready on the page %s, the table holds %s ready", got, want)
	}
	if got, want := cell(rqName, "dead"), strconv.Itoa(rq.dead(t)); got != want || want != "3" {
		t.Errorf("RabbitMQ dead on the page %s, the dead-letter queue holds %s (want 3)", got, want)
	}
	if got, want := cell(rqName, "ready"), strconv.Itoa(rq.queued(t)); got != want {
		t.Errorf("RabbitMQ ready on the page %s, the queue holds %s", got, want)
	}
	if got := cell(rqName, "in_flight"); got != "-" {
		t.Errorf("RabbitMQ in flight on the page %q, want - (not measurable without the management plugin)", got)
	}
	if got, want := cell(rqName, "where"), "amqp "+queues[1].Host; got != want || queues[1].Host == "" {
		t.Errorf("RabbitMQ's backend and host on the page %q, want %q", got, want)
	}
	if got := cell(sqName, "where"); !strings.HasPrefix(got, "sqlite /") || !strings.HasSuffix(got, ".db") {
		t.Errorf("SQLite's backend and file on the page %q, want sqlite and the file's path", got)
	}
	shot("queues")

	// Each queue: open its first dead letter, read why, redrive it, see it processed.
	for i, c := range []struct {
		name      string
		svc       *service
		dead      func(testing.TB) int
		processed string
	}{
		{sqName, sqlSvc, sq.dead, `"refund":"r-1"`},
		{rqName, amqpSvc, rq.dead, `"payout":"p-1"`},
	} {
		before := c.dead(t)
		do("opening "+c.name, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#queues")),
			chromedp.Click(chromedp.CSS(`tr[data-queue="`+c.name+`"] td a`)), chromedp.WaitVisible(chromedp.CSS("#dead")))
		if n := strings.Count(text("#dead tbody"), "card processor timeout"); n != before {
			t.Errorf("%s: the list shows %d dead letters with the reason, the backend holds %d", c.name, n, before)
		}
		do("opening a dead letter of "+c.name, chromedp.Click(chromedp.CSS("#dead tbody tr:first-child a.id")), chromedp.WaitVisible(chromedp.CSS("#payload")))
		if r := text("#reason"); r != "retry at attempt 2 of 2: card processor timeout after 30s" {
			t.Errorf("%s: the dead letter's reason reads %q", c.name, r)
		}
		if p := text("#payload"); !strings.Contains(strings.ReplaceAll(p, " ", ""), strings.ReplaceAll(c.processed, " ", "")) || !strings.Contains(p, "\n") {
			t.Errorf("%s: payload not pretty-printed JSON: %q", c.name, p)
		}
		if i == 0 {
			shot("dead")
		}
		c.svc.up.Store(true)
		do("redriving from "+c.name, chromedp.Click(chromedp.CSS("#redrive")), chromedp.WaitVisible(chromedp.CSS("#flash")))
		if f := text("#flash"); f != "redriven 1 dead letter" {
			t.Errorf("%s: after redrive the page says %q", c.name, f)
		}
		if got := wait(t, c.svc.processed, "the redriven message to be processed"); !strings.Contains(got, c.processed) {
			t.Errorf("%s: processed %s, want the redriven %s", c.name, got, c.processed)
		}
		if after := c.dead(t); after != before-1 {
			t.Errorf("%s: the dead letter holds %d after the redrive, want %d", c.name, after, before-1)
		}
		c.svc.up.Store(false)
	}
	// Processed, read with each backend's own client once the services stopped (RabbitMQ
	// acknowledgements are coalesced; stopping flushes them): the SQLite row is marked
	// processed, and nothing came back to the RabbitMQ queue.
	sqlSvc.stop()
	amqpSvc.stop()
	if q, d := rq.queued(t), rq.dead(t); q != 0 || d != 2 {
		t.Errorf("RabbitMQ after the services stopped: %d in the queue, %d dead; want 0 (the redriven one acknowledged) and 2", q, d)
	}
	var processedAt *string
	if err := db.Pool().QueryRow(`SELECT processed_at FROM jobs WHERE grp = 'refunds' AND payload LIKE '%r-1%'`).Scan(&processedAt); err != nil || processedAt == nil {
		t.Errorf("the redriven SQLite row: processed_at %v, %v; want set", processedAt, err)
	}
}
