package eventplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin/internal/wire"
)

// Events returns the mount option that replaces the dialect's statements for events with the
// plugin's, for a subscription on table in dialect d (the dialect module's DB.Dialect()). Give
// it the same table as the endpoint: an event for another table fails.
//
//	err := core.Subscribe(app, ep, handle,
//		p.Events(db.Dialect(), table, eventplugin.EventAck, eventplugin.EventRetryAfter))
//
// Subscribe fails (the subscription refuses to start) when the plugin is down and cannot be
// started, or does not declare one of events for the dialect. Each event then asks the plugin
// for its statements, which settle runs where the dialect's own would have run; an error of
// the plugin fails the event as a failed statement would, and is logged naming plugin, event,
// queue and row.
func (p *Plugin) Events(d sqlqueue.Dialect, table sqlqueue.Table, events ...Event) core.Option {
	return core.OptionFunc(func(o *core.Options) error {
		if len(events) == 0 {
			return errors.New("eventplugin: Plugin.Events: no event named")
		}
		if d == nil {
			return errors.New("eventplugin: Plugin.Events: no dialect")
		}
		ph, err := placeholdersOf(d)
		if err != nil {
			return err
		}
		s, err := sqlqueue.NewSchema(d, table)
		if err != nil {
			return fmt.Errorf("eventplugin: Plugin.Events: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.startTimeout+p.cfg.callTimeout)
		defer cancel()
		if err := p.Check(ctx, string(sqlqueue.FamilyOf(d)), events...); err != nil {
			return err
		}
		b := &binding{p: p, d: d, o: o, ph: ph, ref: s.Table.Ref(), table: Table{
			Table:      s.Table,
			QuotedName: s.QTable,
			Quoted: sqlqueue.Columns{ID: s.ID, Payload: s.Payload, Group: s.Group, Attempt: s.Attempt,
				RetryAfter: s.RetryAfter, LockedUntil: s.LockedUntil, ProcessedAt: s.ProcessedAt,
				Headers: s.Headers, CreatedAt: s.CreatedAt},
		}}
		b.wireTable = tableToWire(b.table)
		for _, e := range events {
			kind, ok := eventKind(e)
			if !ok {
				return fmt.Errorf("eventplugin: Plugin.Events: unknown event %v", e)
			}
			// Applied inside this option, so the plugin's events are one mount option.
			if err := o.Apply(sqlqueue.OnEvent(kind, b.event(e))); err != nil {
				return err
			}
		}
		return nil
	})
}

// placeholdersOf tells how d spells parameters.
func placeholdersOf(d sqlqueue.Dialect) (Placeholders, error) {
	switch p1, p2 := d.Placeholder(1), d.Placeholder(2); {
	case p1 == "?" && p2 == "?":
		return PlaceholdersQuestion, nil
	case p1 == "$1" && p2 == "$2":
		return PlaceholdersDollar, nil
	default:
		return 0, fmt.Errorf("eventplugin: dialect %s spells parameters %q, %q; plugins know ? and $n", d.Name(), p1, p2)
	}
}

func eventKind(e Event) (sqlqueue.EventKind, bool) {
	switch e {
	case EventClaim:
		return sqlqueue.EventClaim, true
	case EventAck:
		return sqlqueue.EventAck, true
	case EventDrop:
		return sqlqueue.EventDrop, true
	case EventRetry:
		return sqlqueue.EventRetry, true
	case EventRetryAfter:
		return sqlqueue.EventRetryAfter, true
	case EventDeadLetter:
		return sqlqueue.EventDeadLetter, true
	}
	return 0, false
}

// binding is the plugin's events on one subscription.
type binding struct {
	p     *Plugin
	d     sqlqueue.Dialect
	o     *core.Options // read at event time: the subscription's name is final by then
	ph    Placeholders
	ref   sqlqueue.TableRef
	table Table
	// wireTable is table on the wire, marshalled by every call but built once.
	wireTable *wire.Table
}

// event returns the sqlqueue event function of e.
func (b *binding) event(e Event) sqlqueue.Event {
	return func(ctx context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		stmts, err := b.render(ctx, e, in)
		if err != nil {
			b.p.eventFailed(e, in, err)
			return nil, err
		}
		out := make([]sqlqueue.Statement, len(stmts))
		name := b.p.Name()
		wrap := func(err error) error { return &Error{Plugin: name, Event: e, Err: err} }
		for i, s := range stmts {
			out[i] = sqlqueue.Statement{SQL: s.SQL, Args: s.Args, Wrap: wrap}
		}
		return out, nil
	}
}

func (b *binding) render(ctx context.Context, e Event, in sqlqueue.EventInput) ([]Statement, error) {
	if in.Table != b.ref {
		return nil, &Error{Plugin: b.p.Name(), Event: e, Err: fmt.Errorf("the event is for table %s, the plugin's events were mounted for table %s", in.Table, b.ref)}
	}
	sub := b.o.Name
	if sub == "" {
		sub = in.Queue
	}
	r := &Request{
		Event: e, Dialect: in.Dialect, Form: in.Form, Placeholders: b.ph, Table: b.table,
		Subscription: sub, Queue: in.Queue, Now: in.Now, wireTable: b.wireTable,
	}
	switch e {
	case EventClaim:
		r.Claim = Claim{Limit: in.Limit, Group: in.Group, Token: in.Token}
	default:
		r.Row = Row{ID: in.ID, Attempt: in.Attempt, Group: in.Group, Token: in.Token}
	}
	switch e {
	case EventRetryAfter:
		r.RetryAt = in.RetryAfter
		r.Delay = max(in.RetryAfter.Sub(in.Now), 0).Truncate(time.Microsecond)
	case EventDeadLetter:
		r.Dest = Destination{Name: in.Dest, IsGroup: b.table.Columns.Group != ""}
		if !r.Dest.IsGroup {
			ref, err := sqlqueue.ParseTableRef(in.Dest)
			if err != nil {
				return nil, &Error{Plugin: b.p.Name(), Event: e, Err: err}
			}
			r.Dest.QuotedTable = b.d.Quote(ref.Name)
			if ref.Schema != "" {
				r.Dest.QuotedTable = b.d.Quote(ref.Schema) + "." + r.Dest.QuotedTable
			}
		}
	}
	return b.p.Render(ctx, r)
}

// eventFailed logs that event e failed with err, at most once per
// sqlqueue.FailureLogInterval with the number of failures since the last line. A crash or a
// hang is not logged here: the Plugin logged it when it took the process down. The engine
// logs every failed settlement itself; this line says that the plugin is the cause.
func (p *Plugin) eventFailed(e Event, in sqlqueue.EventInput, err error) {
	if errors.Is(err, ErrCrashed) || errors.Is(err, ErrTimeout) {
		return
	}
	n, ok := p.eventLog.Failed(p.cfg.clock.Now())
	if !ok {
		return
	}
	args := []any{"event", e.String(), "failures", n, "queue", in.Queue}
	if e != EventClaim {
		args = append(args, "message_id", in.ID, "attempt", in.Attempt)
	}
	p.logger().Warn("eventplugin: events failing; each failed row returns as the form returns a failed statement", append(args, "err", err)...)
}

// logger returns the logger with the plugin's current name.
func (p *Plugin) logger() *slog.Logger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log
}
