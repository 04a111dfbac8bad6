package sqlqueue

import (
	"context"
	"strconv"
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

// holdsSuspect reports whether a connection holds a suspect delivery.
func (a *advisory) holdsSuspect() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.suspect != nil
}

// mayTake reports whether the subscription takes rows now, with free connections free.
func (a *advisory) mayTake(free int) bool {
	if a.holdsSuspect() {
		return false // a suspect runs alone
	}
	if a.rescuing && free < len(a.conns) {
		now := a.rt.clock.Now()
		if now.Before(a.rescueBy) {
			return false // waiting for the handlers, to take a lapsed row alone
		}
		a.rt.log.Warn("sqlqueue: rows whose takers went away wait to be taken one at a time; handlers still running",
			"queue", a.rt.q.name, "waited", rescueWaitFor(a.rt.cfg.lease))
		a.rescuing = false
		a.rescueAt = now.Add(rescueCooldown * rescueWaitFor(a.rt.cfg.lease))
	}
	return true
}

// takesLapsed reports whether a lapsed row whose key this round holds may be taken, allFree
// when no connection held a row: only then, and as the round's only row; otherwise the
// subscription takes no more ordinary rows until its connections are free.
func (a *advisory) takesLapsed(allFree bool) bool {
	if allFree && len(a.buf) == 0 {
		return true
	}
	if now := a.rt.clock.Now(); !a.rescuing && !now.Before(a.rescueAt) {
		a.rescuing = true
		a.rescueBy = now.Add(rescueWaitFor(a.rt.cfg.lease))
	}
	return false
}

// rescueDone ends the rescue when a round saw no lapsed row.
func (a *advisory) rescueDone(sawLapsed bool) {
	if !sawLapsed {
		a.rescuing = false
	}
}

// untake clears the mark of a row taken but never handed out and takes back its attempt: no
// handler saw it.
func (a *advisory) untake(d *delivery) {
	rt := a.rt
	if rt.st.untake == "" || d.ac == nil || d.ac.c == nil {
		return
	}
	ctx, cancel := rt.background(context.Background())
	defer cancel()
	if _, err := d.ac.c.Exec(ctx, rt.st.untake, d.id); err != nil {
		rt.log.Warn("sqlqueue: giving back a row taken but never handed out; its attempt stays counted",
			"queue", rt.q.name, "message_id", strconv.FormatInt(d.id, 10), "attempt", d.attempt, "error", err)
	}
}
