package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// EventKind names a statement a subscription may replace with its own (sqlqueue.EventKind is
// this type).
type EventKind uint8

// The statements a custom event may replace (see sqlqueue.EventClaim and the others).
const (
	EventClaim EventKind = iota
	EventAck
	EventDrop
	EventRetry
	EventRetryAfter
	EventDeadLetter
	NumEvents
)

func (k EventKind) String() string {
	switch k {
	case EventClaim:
		return "claim"
	case EventAck:
		return "ack"
	case EventDrop:
		return "drop"
	case EventRetry:
		return "retry"
	case EventRetryAfter:
		return "retry_after"
	case EventDeadLetter:
		return "dead_letter"
	}
	return "event(?)"
}

// EventInput is what a custom event is told; sqlqueue.EventInput has the same fields, and
// converts to and from it.
type EventInput struct {
	Kind       EventKind
	Form       driver.Form
	Dialect    string
	Queue      string
	Table      driver.TableRef
	Group      string
	Now        time.Time
	ID         int64
	Attempt    int
	Token      time.Time
	RetryAfter time.Time
	Dest       string
	Limit      int
	Reason     string
}

// Statement is one statement of a custom event (sqlqueue.Statement has the same fields).
type Statement struct {
	SQL  string
	Args []any
	Wrap func(error) error
}

// wrap applies s.Wrap to err.
func (s Statement) wrap(err error) error {
	if s.Wrap != nil {
		return s.Wrap(err)
	}
	return err
}

// Event returns the statements that replace one of the engine's (sqlqueue.OnEvent adapts the
// service's function to it).
type Event func(ctx context.Context, in EventInput) ([]Statement, error)

// EventFor returns the custom event that replaces the statement of a, if any.
func (rt *Runtime) EventFor(a core.Action) Event {
	switch a {
	case core.ActAck:
		return rt.Cfg.Events[EventAck]
	case core.ActDrop:
		return rt.Cfg.Events[EventDrop]
	case core.ActRetry:
		return rt.Cfg.Events[EventRetry]
	case core.ActRetryAfter:
		return rt.Cfg.Events[EventRetryAfter]
	case core.ActDeadLetter:
		return rt.Cfg.Events[EventDeadLetter]
	}
	return nil
}

// eventInput is what the custom event of v for d, fenced by token, is told.
func (rt *Runtime) eventInput(d *Delivery, token time.Time, v core.Verdict, now time.Time) EventInput {
	in := EventInput{Form: rt.Form, Dialect: string(driver.FamilyOf(rt.D)), Queue: rt.Q.Name, Table: rt.S.Table.Ref(),
		Group: rt.Q.Group, Now: now, ID: d.id, Attempt: d.attempt, Token: token, Dest: v.Dest}
	switch v.Action {
	case core.ActAck:
		in.Kind = EventAck
	case core.ActDrop:
		in.Kind = EventDrop
	case core.ActRetry:
		in.Kind = EventRetry
	case core.ActRetryAfter:
		in.Kind = EventRetryAfter
		in.RetryAfter = now.Add(v.Delay).Truncate(time.Microsecond)
	case core.ActDeadLetter:
		in.Kind = EventDeadLetter
	}
	if in.Kind != EventAck && in.Kind != EventDrop {
		in.Reason = core.Reason(v)
	}
	return in
}

// runEvent runs a custom event's statements on q; it reports whether they changed any row (a
// settlement that is not fenced by a token always counts as having changed its row).
func (rt *Runtime) runEvent(ctx context.Context, q driver.Queryer, ev Event, in EventInput, fenced bool) (bool, error) {
	stmts, err := ev(ctx, in)
	if err != nil {
		return false, fmt.Errorf("sqlqueue: custom %v event: %w", in.Kind, err)
	}
	var changed int64
	for _, s := range stmts {
		r, err := q.Exec(ctx, s.SQL, rt.args(s.Args)...)
		if err != nil {
			return false, fmt.Errorf("sqlqueue: custom %v event: %w", in.Kind, s.wrap(err))
		}
		changed += r.RowsAffected
	}
	return changed > 0 || !fenced, nil
}

// args converts time.Time arguments with the dialect.
func (rt *Runtime) args(a []any) []any {
	out := a
	for i, x := range a {
		if t, ok := x.(time.Time); ok {
			if &out[0] == &a[0] {
				out = append([]any(nil), a...)
			}
			out[i] = rt.D.Time(t.UTC().Truncate(time.Microsecond))
		}
	}
	return out
}

// Claim runs the subscription's claim in tx: its custom claim event, or c (the dialect's).
func (rt *Runtime) Claim(ctx context.Context, c driver.Claim, tx driver.Queryer, p driver.ClaimParams, dst []driver.Claimed) ([]driver.Claimed, error) {
	if rt.Cfg.Events[EventClaim] != nil {
		return rt.customClaim(ctx, tx, p, dst)
	}
	return c.Claim(ctx, tx, p, dst)
}

// customClaim runs the EventClaim statements in tx; the last returns the rows.
func (rt *Runtime) customClaim(ctx context.Context, tx driver.Queryer, p driver.ClaimParams, dst []driver.Claimed) ([]driver.Claimed, error) {
	in := EventInput{Kind: EventClaim, Form: rt.Form, Dialect: string(driver.FamilyOf(rt.D)), Queue: rt.Q.Name, Table: rt.S.Table.Ref(),
		Group: rt.Q.Group, Now: p.Now, Token: p.Token, Limit: p.Limit}
	stmts, err := rt.Cfg.Events[EventClaim](ctx, in)
	if err != nil {
		return dst, fmt.Errorf("sqlqueue: custom claim event: %w", err)
	}
	if len(stmts) == 0 {
		return dst, fmt.Errorf("sqlqueue: custom claim event returned no statement")
	}
	for _, s := range stmts[:len(stmts)-1] {
		if _, err := tx.Exec(ctx, s.SQL, rt.args(s.Args)...); err != nil {
			return dst, fmt.Errorf("sqlqueue: custom claim event: %w", s.wrap(err))
		}
	}
	last := stmts[len(stmts)-1]
	rows, err := tx.Query(ctx, last.SQL, rt.args(last.Args)...)
	if err != nil {
		return dst, fmt.Errorf("sqlqueue: custom claim event: %w", last.wrap(err))
	}
	dst, err = driver.ScanClaimed(rt.D, rows, dst, false) // a custom claim returns no created_at
	if err != nil {
		err = last.wrap(err)
	}
	return dst, err
}
