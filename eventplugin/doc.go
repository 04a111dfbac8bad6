// Package eventplugin serves settle's custom SQL queue events from out-of-process plugins,
// over hashicorp/go-plugin and gRPC. It lives in its own module (folder eventplugin/) so that
// gRPC stays out of core.
//
// A queue subscription may replace the dialect's statement for an event (claim, ack, drop,
// retry, retry_after, dead_letter) with its own SQL: an ack that also writes an audit row, a
// retry_after that caps the delay, a claim that respects a tenant quota. A plugin ships such a
// rule as a separate binary, possibly maintained by a DBA team, without rebuilding the
// service. The plugin never touches the database: for each event it receives the table
// description, the dialect, the row's id, attempt, group and lease token, the delay of a
// retry_after and the destination of a dead_letter, and returns statement text with bound
// arguments. settle runs them in the delivery's own transaction or on its own connection,
// exactly where the dialect's statement would have run.
//
// # Plugin side
//
// A plugin implements Handler and calls Serve from main:
//
//	type audit struct{}
//
//	func (audit) Describe(ctx context.Context) (eventplugin.Manifest, error) {
//		return eventplugin.Manifest{Name: "audit", Handles: []eventplugin.Handles{{Event: eventplugin.EventAck}}}, nil
//	}
//
//	func (audit) Render(ctx context.Context, r *eventplugin.Request) ([]eventplugin.Statement, error) { … }
//
//	func main() { eventplugin.Serve(audit{}) }
//
// Arguments travel as bound parameters only (Statement.Args); Request.Placeholder spells the
// dialect's parameter markers and Request.Table carries the quoted names to splice. The wire
// contract is internal/wire/eventplugin.proto, so plugins in other languages can serve it too.
//
// # Host side
//
// Load starts the binary (handshake with a magic cookie, protocol version negotiation,
// optional SHA-256 check of the binary), asks it what it handles and returns a Plugin.
// Plugin.Events is the mount option that hands a subscription's events to it:
//
//	p, err := eventplugin.Load(ctx, "bin/audit", eventplugin.Args("-max-delay", "1m"),
//		eventplugin.WithLogger(logger), eventplugin.WithClock(app.Clock()))
//	…
//	defer p.Close()
//	err = core.Subscribe(app, ep, handle, core.DeadLetterAfter(5, "refunds_dead"),
//		p.Events(db.Dialect(), table, eventplugin.EventAck, eventplugin.EventRetryAfter))
//
// The Plugin checks every answer (the event was declared for the dialect, the answer is for
// that event, each statement has as many arguments as placeholders) and fails the event with
// an *Error naming the plugin and the event otherwise. A custom event runs per delivery, in
// its own transaction, outside grouped settlement; BenchmarkAck measures what that and the
// round trip cost.
//
// The module's examples/audit is a complete plugin: its ack records an audit row and its
// retry_after caps the delay.
//
// # Failure semantics
//
// A plugin that returns an error, crashes, or hangs past the call timeout fails the event as a
// failed statement would in the subscription's claim form: the row is not lost and returns as
// the form returns it (rollback, lease, unlock). A crash or a hang also takes the plugin down
// and restarts it after a backoff on the Plugin's clock (doubling while failures repeat);
// meanwhile its events fail at once with ErrUnavailable. The engine logs every failed
// settlement; the Plugin's own lines about failures (crash or hang, failed events) name the
// plugin and the event and are paced as the engine paces its own (sqlqueue.FailureLog): at most
// one of each kind per sqlqueue.FailureLogInterval, with the count of failures it stands for.
// On SQLite the call to the plugin happens while the settlement
// holds the write lock: keep CallTimeout below the busy timeout. A plugin process ends with its
// host (the parent-death signal on Linux, and Serve's watch of its parent everywhere). A binary
// that cannot serve (not a plugin, wrong magic cookie,
// protocol mismatch, checksum mismatch, malformed manifest) is refused at Load with a
// StartError, so the subscription it was meant for never starts.
package eventplugin
