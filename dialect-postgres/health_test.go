package postgres_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// TestHealthFollowsTheServerAndTheListener reaches the server through a proxy of the test's own
// (PostgreSQL ports 55450-55459): the DB passes /readyz while it is reachable, warns when its
// LISTEN connection is down (new connections refused, the listener's backend terminated),
// fails when everything is cut, and passes again once the proxy is restored.
func TestHealthFollowsTheServerAndTheListener(t *testing.T) {
	e := setup(t) // the schema, on the server directly
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	p := coretest.NewProxy(t, target, 55450, 55451, 55452, 55453, 55454, 55455, 55456, 55457, 55458, 55459)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(p.Port())
	cfg.ConnConfig.RuntimeParams["search_path"] = e.schema
	name := e.schema + "_proxied"
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	cfg.MaxConns = 4
	cfg.MinConns = 2 // idle connections stay open while new ones are refused
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(context.Background(), pool, postgres.Notify(true))
	if err != nil {
		t.Fatal(err)
	}
	e.standard("jobs")
	app := core.New(core.WithoutSignals(), core.WithLogger(testLogger()), core.WithShutdownTimeout(10*time.Second))
	app.Register(db)
	ep, err := postgres.Lease(db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(app, ep, func(context.Context, *core.Message[string]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		p.Restore()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("App.Run: %v", err)
		}
	})
	<-app.Ready()
	backend := func(h core.Health) core.ComponentHealth { b, _ := coretest.Backend(h, "postgres"); return b }

	h := coretest.WaitReadyz(t, app, 200, func(h core.Health) bool { return backend(h).Status == core.HealthPass })
	if b := backend(h); b.State != "connected" || !strings.Contains(b.Name, p.Addr()) {
		t.Fatalf("healthy: %+v", b)
	}

	p.Refuse()
	if n := terminate(t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, name+" (settle listener)"); n != 1 {
		t.Fatalf("terminated %d listener backends; want 1", n)
	}
	h = coretest.WaitReadyz(t, app, 200, func(h core.Health) bool { return backend(h).Status == core.HealthWarn })
	if b := backend(h); b.State != "connected, listener down" || !strings.HasPrefix(b.Output, "LISTEN connection: ") || b.ErrorAt.IsZero() {
		t.Fatalf("listener down: %+v", b)
	}

	p.Cut()
	h = coretest.WaitReadyz(t, app, 503, nil)
	if b := backend(h); b.Status != core.HealthFail || b.State != "unreachable, listener down" || b.Output == "" {
		t.Fatalf("cut: %+v", b)
	}

	p.Restore()
	h = coretest.WaitReadyz(t, app, 200, func(h core.Health) bool { return backend(h).Status == core.HealthPass })
	if b := backend(h); b.State != "connected" {
		t.Fatalf("restored: %+v", b)
	}
}
