package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// NeedsTx reports whether settling v with st takes more than one statement.
func (rt *Runtime) NeedsTx(st *Settlements, v core.Verdict) bool {
	return rt.EventFor(v.Action) != nil || (v.Action == core.ActDeadLetter && (st.DLCopy != "" || st.DLNote != ""))
}

// Settle runs the statement of st that settles v for d on q (a transaction where NeedsTx), fenced
// by token where st is. It reports whether the row was still the delivery's (always true when st
// is not fenced). An abandon writes nothing here: the form releases its hold its own way.
func (rt *Runtime) Settle(ctx context.Context, q driver.Queryer, st *Settlements, d *Delivery, token time.Time, v core.Verdict, now time.Time) (bool, error) {
	if ev := rt.EventFor(v.Action); ev != nil {
		return rt.runEvent(ctx, q, ev, rt.eventInput(d, token, v, now), st.Fenced)
	}
	// The values a statement sets, then the id and (fenced) the token: a small array on the
	// stack holds them all.
	var buf [6]any
	a := buf[:0]
	var sql string
	switch v.Action {
	case core.ActAck, core.ActDrop:
		sql = st.Done
		if st.DoneMark {
			a = append(a, rt.D.Time(now))
		}
	case core.ActAbandon:
		return true, nil
	case core.ActRetry:
		if st.Retry == "" {
			return true, nil
		}
		sql = st.Retry
		a = rt.noteErr(a, v)
	case core.ActRetryAfter:
		sql = st.RetryAfter
		a = append(a, rt.D.Time(now.Add(v.Delay).Truncate(time.Microsecond)))
		a = rt.noteErr(a, v)
	case core.ActDeadLetter:
		return rt.deadLetter(ctx, q, st, d, token, v, now)
	default:
		return false, errUnknownAction(v.Action)
	}
	return rt.exec(ctx, q, sql, rt.row(a, st, d, token))
}

// row appends the arguments that name d's row: its id and, where st is fenced, its token.
func (rt *Runtime) row(a []any, st *Settlements, d *Delivery, token time.Time) []any {
	a = append(a, d.id)
	if st.Fenced {
		a = append(a, rt.D.Time(token))
	}
	return a
}

// exec runs a settling statement; it reports whether it changed a row.
func (rt *Runtime) exec(ctx context.Context, q driver.Queryer, sql string, args []any) (bool, error) {
	r, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return false, err
	}
	return r.RowsAffected > 0, nil
}

// noteErr appends the last error of v, where the table has the column.
func (rt *Runtime) noteErr(a []any, v core.Verdict) []any {
	if rt.S.LastError != "" {
		a = append(a, core.Reason(v))
	}
	return a
}

// deadLetter moves d's row to the dead letter: one UPDATE of its group, or (a table) the note of
// why, then one move or a copy and a delete, all on q.
func (rt *Runtime) deadLetter(ctx context.Context, q driver.Queryer, st *Settlements, d *Delivery, token time.Time, v core.Verdict, now time.Time) (bool, error) {
	if v.Dest != rt.Sub.Options.DeadLetterTo {
		return false, fmt.Errorf("%w: %q", ErrNotOwnDest, v.Dest)
	}
	var buf [6]any
	if st.DLGroup != "" {
		a := rt.noteDead(append(buf[:0], v.Dest), d, v, now)
		return rt.exec(ctx, q, st.DLGroup, rt.row(a, st, d, token))
	}
	if st.DLNote != "" {
		if ok, err := rt.exec(ctx, q, st.DLNote, rt.row(rt.noteDead(buf[:0], d, v, now), st, d, token)); err != nil || !ok {
			return false, err
		}
	}
	if st.DLMove != "" {
		return rt.exec(ctx, q, st.DLMove, rt.row(buf[:0], st, d, token))
	}
	if ok, err := rt.exec(ctx, q, st.DLCopy, rt.row(buf[:0], st, d, token)); err != nil || !ok {
		return false, err
	}
	return rt.exec(ctx, q, st.DLDelete, rt.row(buf[:0], st, d, token))
}

// noteDead appends the values a dead letter records on its row, where the table has the
// columns: its headers with core's dead-letter headers merged in, and the last error.
func (rt *Runtime) noteDead(a []any, d *Delivery, v core.Verdict, now time.Time) []any {
	if rt.S.Headers != "" {
		a = append(a, rt.deadHeaders(d, v, now))
	}
	return rt.noteErr(a, v)
}

// deadHeaders returns the headers column of a dead letter: the row's own headers with the
// dead-letter headers (count, origin, time, reason) set. Headers that are not a JSON object of
// strings are written back as they were rather than replaced: nothing of the row is lost.
func (rt *Runtime) deadHeaders(d *Delivery, v core.Verdict, now time.Time) any {
	h := map[string]string{}
	if len(d.headers) > 0 && string(d.headers) != "null" {
		if err := json.Unmarshal(d.headers, &h); err != nil {
			rt.Log.Warn("sqlqueue: the headers column does not hold a JSON object of strings; the dead letter keeps it as it was, without the dead-letter headers",
				"queue", rt.Q.Name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
			return string(d.headers)
		}
	}
	core.NewDeadLetterInfo(d, v, rt.Q.Name, now).AddTo(h)
	b, err := json.Marshal(h)
	if err != nil { // a map of strings always marshals
		return string(d.headers)
	}
	return string(b)
}
