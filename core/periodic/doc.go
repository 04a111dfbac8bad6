// Package periodic publishes the messages of periodic jobs ("every 5 minutes publish a
// reconcile message"), once per tick across every running process of a service.
//
// A job is a Schedule (Cron, with seconds and a time zone, or Every), a function that builds
// the tick's message, and a core.Publisher it is published through:
//
//	claims, _ := periodic.NewSQLClaims(db.Dialect(), db.Queue(), "settle_ticks", app.Clock())
//	sched, _ := periodic.New(claims, periodic.WithClock(app.Clock()), periodic.WithLogger(log))
//	every5, _ := periodic.Cron("0 */5 * * * *", berlin)
//	_ = periodic.Add(sched, "reconcile", every5, reconciles, func(ctx context.Context, t periodic.Tick) (Reconcile, error) {
//		return Reconcile{Until: t.At}, nil
//	})
//	app.Register(sched) // starts and stops with the App
//
// Every process runs the same jobs and, at each tick, asks the Claimer for it; the backend
// decides which one wins (SQLClaims: the one whose INSERT of the unique (schedule, tick) row
// took effect), never a clock, and that one publishes with core.MessageID(TickID). While one
// process runs, no tick is skipped; when processes stop and start, the others keep claiming.
// SQLClaims holds its claim in a transaction while it publishes, so a process dying between its
// claim and its publish leaves the tick to a process still asking for it; a process dying
// after its publish and before its commit makes another publish it again, with the same
// message id (Dedup adds the tick's dedup key, for targets that drop the second).
//
// After an outage of every process the missed ticks are skipped by default; CatchUpLast
// publishes the latest of them at start. Scheduler.Schedules lists each job's last and next
// tick.
package periodic
