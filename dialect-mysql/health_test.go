package mysql

import (
	"context"
	"log/slog"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// TestHealthFollowsTheServer reaches the server through a proxy of the test's own: the DB
// passes /readyz while it is reachable, fails it ("unreachable", with the error) while the proxy
// is cut, and passes again once it is restored.
func TestHealthFollowsTheServer(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		dsn, name := s.freshDatabase(t)
		cfg, err := driver.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		// MariaDB and MySQL have no port of the observability range; the kernel picks one.
		p := coretest.NewProxy(t, cfg.Addr)
		cfg.Addr = p.Addr()
		cfg.Timeout = 2 * time.Second
		db, err := Open(context.Background(), cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
		app.Register(db)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("App.Run: %v", err)
			}
		})
		<-app.Ready()
		backend := func(h core.Health) core.ComponentHealth { b, _ := coretest.Backend(h, name); return b }
		h := coretest.WaitReadyz(t, app, 200, nil)
		if b := backend(h); b.State != "connected" || b.Status != core.HealthPass {
			t.Fatalf("healthy: %+v", h.Backends)
		}
		p.Cut()
		h = coretest.WaitReadyz(t, app, 503, nil)
		if b := backend(h); b.State != "unreachable" || b.Output == "" || b.ErrorAt.IsZero() {
			t.Fatalf("cut: %+v", b)
		}
		p.Restore()
		coretest.WaitReadyz(t, app, 200, nil)
	})
}
