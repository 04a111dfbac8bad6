package advisory

import (
	"context"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// This file is the advisory form's rescue of lapsed takes. Taking a row marks it in
// locked_until (the time it was taken), where the table has the column, and every settlement
// clears the mark. A row whose key is free but whose mark is set was taken by a process that
// died or lost its connection before settling it: it may be the row that killed that process,
// or one handled beside it. So that a poison row cannot take its neighbours down with it, such
// a row is taken only when every connection of this subscription is free, alone, and nothing
// else is taken while it is held; it is handed out as suspect (core runs it with no other
// handler of the subscription). A crash in its handler then charges an attempt to it alone.
// While lapsed rows wait for the connections to come free, no ordinary row is taken, for at
// most a second; then ordinary rows are taken for five times that before the next try: a
// handler that runs long does not stop the subscription.
// Without a locked_until column there is no mark, and a crash charges every row its process
// held.

// rescuer is the advisory form's rescue of lapsed takes; the takes are Next's, never
// concurrent, so it needs no lock.
type rescuer struct {
	src      *Source
	rescuing bool
	by       time.Time // until when to wait for the connections to come free
	at       time.Time // no new wait before then (after one that gave up)
}

// rescueWait is how long the subscription waits for its connections to come free before it
// takes a lapsed row, alone.
var rescueWait = engine.RescueWaitFor(engine.DefaultLease)

// mayTake reports whether the subscription takes rows now, with free connections free.
func (r *rescuer) mayTake(free int) bool {
	a := r.src
	if a.conns.holdsSuspect() {
		return false // a suspect runs alone
	}
	if r.rescuing && free < len(a.conns.all) {
		now := a.rt.Clock.Now()
		if now.Before(r.by) {
			return false // waiting for the handlers, to take a lapsed row alone
		}
		a.rt.Log.Warn("sqlqueue: rows whose takers went away wait to be taken one at a time; handlers still running",
			"queue", a.rt.Q.Name, "waited", rescueWait)
		r.rescuing = false
		r.at = now.Add(engine.RescueCooldown * rescueWait)
	}
	return true
}

// takesLapsed reports whether a lapsed row whose key this round holds may be taken, allFree
// when no connection held a row and taken the rows this round took so far: only when none was
// and none is, as the round's only row; otherwise the subscription takes no more ordinary rows
// until its connections are free.
func (r *rescuer) takesLapsed(allFree bool, taken int) bool {
	if allFree && taken == 0 {
		return true
	}
	if now := r.src.rt.Clock.Now(); !r.rescuing && !now.Before(r.at) {
		r.rescuing = true
		r.by = now.Add(rescueWait)
	}
	return false
}

// done ends the rescue when a round saw no lapsed row.
func (r *rescuer) done(sawLapsed bool) {
	if !sawLapsed {
		r.rescuing = false
	}
}

// untake clears the mark of a row taken but never handed out and takes back its attempt: no
// handler saw it.
func (a *Source) untake(d *delivery) {
	rt := a.rt
	if a.st.untake == "" || d.ac == nil || d.ac.c == nil {
		return
	}
	ctx, cancel := rt.Background(context.Background())
	defer cancel()
	if _, err := d.ac.c.Exec(ctx, a.st.untake, d.RowID()); err != nil {
		rt.Log.Warn("sqlqueue: giving back a row taken but never handed out; its attempt stays counted",
			"queue", rt.Q.Name, "message_id", d.ID(), "attempt", d.Attempt(), "error", err)
	}
}
