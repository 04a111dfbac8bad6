package periodic_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/periodic"
)

type Reconcile struct {
	Until time.Time `json:"until"`
}

// A job that publishes a reconcile message every five minutes of Berlin's wall clock. The
// in-memory broker deduplicates, so TargetDedup decides the ticks here; a service with several
// processes gives New its database's claims (NewSQLClaims).
func Example() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	v := clock.NewVirtual(time.Date(2026, 12, 4, 18, 3, 0, 0, time.UTC))
	broker := coretest.NewBroker(v, slog.New(slog.DiscardHandler))
	defer broker.Close()
	reconciles, _ := core.NewPublisher[Reconcile](broker.Queue("reconcile"))

	sched, _ := periodic.New(periodic.TargetDedup, periodic.WithClock(v))
	every5, _ := periodic.Cron("0 */5 * * * *", berlin)
	err = periodic.Add(sched, "reconcile", every5, reconciles, func(_ context.Context, t periodic.Tick) (Reconcile, error) {
		return Reconcile{Until: t.At}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = sched.Start(context.Background())
	defer sched.Close()

	ctx := context.Background()
	_ = v.BlockUntil(ctx, 1)
	v.Advance(2 * time.Minute) // 18:05 UTC, 19:05 in Berlin
	_ = v.BlockUntil(ctx, 1)
	for _, m := range broker.Messages("reconcile") {
		fmt.Println(m.ID, string(m.Body))
	}
	for _, s := range sched.Schedules() {
		fmt.Println(s.Name, s.Schedule, "last", s.Last.Format("15:04"), "next", s.Next.Format("15:04 MST"))
	}
	// Output:
	// reconcile@2026-12-04T18:05:00Z {"until":"2026-12-04T19:05:00+01:00"}
	// reconcile cron 0 */5 * * * * Europe/Berlin last 19:05 next 19:10 CET
}
