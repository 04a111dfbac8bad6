package eventplugin

import (
	"context"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// BenchmarkRenderRoundTrip is the bare cost of asking a plugin subprocess for one ack: one
// gRPC call over go-plugin's local socket, with the host's checks of the answer.
func BenchmarkRenderRoundTrip(b *testing.B) {
	p, err := loadHelper(b, "plain", WithLogger(testLogger()))
	if err != nil {
		b.Fatal(err)
	}
	req := ackRequest(1)
	req.wireTable = tableToWire(req.Table) // as Plugin.Events builds it, once per subscription
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Render(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAck drains b.N rows of a lease-form queue through an App whose handler acks, on
// each reachable database, three ways:
//
//   - dialect: the dialect's own ack, settlements grouped (the default);
//   - dialect-per-message: the dialect's own ack, one transaction per message;
//   - plugin: the same fenced DELETE rendered by a plugin subprocess per message.
//
// A custom event runs per delivery, outside grouped settlement, so plugin against
// dialect-per-message is the round trip's own cost, and plugin against dialect is what a
// service pays for moving its ack into a plugin. ns/op is per message.
func BenchmarkAck(b *testing.B) {
	p, err := loadHelper(b, "plain", WithLogger(testLogger()))
	if err != nil {
		b.Fatal(err)
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			for _, mode := range []string{"dialect", "dialect-per-message", "plugin"} {
				b.Run(mode, func(b *testing.B) { benchAck(b, be.open(b), p, mode) })
			}
		})
	}
}

func benchAck(b *testing.B, db *database, p *Plugin, mode string) {
	table := queueTable("jobs")
	db.exec(b, db.ddl(table))
	// Rows go in with one multi-row INSERT per 500, outside the timer.
	for left := b.N; left > 0; {
		n := min(left, 500)
		sql := "INSERT INTO jobs (payload) VALUES "
		args := make([]any, n)
		for i := range n {
			if i > 0 {
				sql += ", "
			}
			sql += "(" + db.dialect.Placeholder(i+1) + ")"
			args[i] = []byte(`{"N":1}`)
		}
		db.exec(b, sql, args...)
		left -= n
	}
	a := newTestApp(b, db, testLogger())
	ep, err := db.endpoint("lease", table)
	if err != nil {
		b.Fatal(err)
	}
	opts := []core.Option{core.Workers(4)}
	switch mode {
	case "dialect-per-message":
		opts = append(opts, sqlqueue.PerMessage())
	case "plugin":
		opts = append(opts, p.Events(db.dialect, table, EventAck))
	}
	if err := core.Subscribe(a.App, ep, func(context.Context, *core.Message[job]) error { return nil }, opts...); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	a.start(b)
	for range b.N {
		if s := a.next(b); s.Err != nil {
			b.Fatal(s.Err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
