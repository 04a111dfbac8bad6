package advisory

import (
	"context"
	"sync"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// conn is one dedicated connection; it holds at most one delivery's key.
type conn struct {
	c    driver.Conn
	busy bool // under conns.mu
}

// conns are a subscription's dedicated connections, one per worker, and which of them hold a
// key.
type conns struct {
	mu      sync.Mutex
	all     []*conn
	suspect *conn // holds a suspect delivery: nothing else is taken meanwhile
}

// free returns the connections that hold no key.
func (cs *conns) free() []*conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []*conn
	for _, c := range cs.all {
		if !c.busy {
			out = append(out, c)
		}
	}
	return out
}

// hold marks ac as holding a delivery's key (a suspect one: alone).
func (cs *conns) hold(ac *conn, suspect bool) {
	cs.mu.Lock()
	ac.busy = true
	if suspect {
		cs.suspect = ac
	}
	cs.mu.Unlock()
}

// release marks ac free.
func (cs *conns) release(ac *conn) {
	cs.mu.Lock()
	ac.busy = false
	if cs.suspect == ac {
		cs.suspect = nil
	}
	cs.mu.Unlock()
}

// holdsSuspect reports whether a connection holds a suspect delivery.
func (cs *conns) holdsSuspect() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.suspect != nil
}

// closeAll gives every connection back (discards it, when its session carries settings of the
// subscription's).
func (cs *conns) closeAll(discard bool) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var err error
	for _, ac := range cs.all {
		if ac.c == nil {
			continue
		}
		closeConn := ac.c.Close
		if discard {
			closeConn = ac.c.Discard
		}
		if e := closeConn(); e != nil && err == nil {
			err = e
		}
		ac.c = nil
	}
	return err
}

// dedicate gives ac a connection of its own from db's pool, whose session runs session (the
// subscription's lock timeout; "" for none).
func dedicate(ctx context.Context, db driver.DB, session string, ac *conn) error {
	c, err := db.Conn(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	if session != "" {
		if _, err := c.Exec(ctx, session); err != nil {
			_ = c.Discard()
			return err
		}
	}
	ac.c = c
	return nil
}

// discard closes ac's connection for good, which releases everything it held.
func discard(ac *conn) {
	if ac.c != nil {
		_ = ac.c.Discard()
		ac.c = nil
	}
}
