package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// notifyChannel is the one channel settle notifies and listens on. Its payload is
// "<table oid>:<group>", so every process listens once and wakes only the subscriptions of the
// table (and group) that has new rows, whatever search_path each process resolved the table by.
const notifyChannel = "settle"

// listenerAppName is the application_name of the LISTEN connection (after the pool's own, when
// it has one), so that it can be told apart in pg_stat_activity.
const listenerAppName = "settle listener"

// notifySQL announces new rows of a table and group; inside the publishing transaction the
// notification is delivered at commit, never for a rolled-back publish.
const notifySQL = `SELECT pg_notify('` + notifyChannel + `', to_regclass($1)::oid::text || ':' || $2)`

// notifyDialect is the dialect of a DB built with Notify(true): publishing notifies, and
// subscriptions listen.
type notifyDialect struct {
	*dialect
	db *DB
}

// Notify announces rows for queue on q.
func (*notifyDialect) Notify(ctx context.Context, q sqlqueue.Queryer, queue driver.QueueRef) error {
	_, err := q.Exec(ctx, notifySQL, quoteRef(queue.Table), queue.Group)
	return err
}

// Listen registers wake with the DB's one listening connection, starting it on first use. It
// returns once the connection is listening, so nothing published after Listen returns is
// missed.
func (n *notifyDialect) Listen(ctx context.Context, _ sqlqueue.DB, queue driver.QueueRef, wake func()) (func(), error) {
	var oid uint32
	if err := n.db.pool.QueryRow(ctx, `SELECT COALESCE(to_regclass($1)::oid, 0)`, quoteRef(queue.Table)).Scan(&oid); err != nil {
		return nil, err
	}
	if oid == 0 {
		return nil, fmt.Errorf("postgres: listen for table %s: no such table", queue.Table)
	}
	return n.db.listener().add(ctx, oid, queue.Group, wake)
}

// listener is a DB's one LISTEN connection. It runs while at least one subscription is
// registered, reconnects with backoff when its connection drops, and after every (re)connect
// wakes every registration, since notifications sent while it was away are gone.
type listener struct {
	db  *DB
	log *slog.Logger

	mu     sync.Mutex
	regs   map[regKey][]*registration
	n      int
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{} // closed once the first LISTEN has succeeded
	// firstErr is why the first LISTEN failed; done is closed then.
	firstErr error
	// down is set while the connection is lost, with why and since when (health.go).
	down *listenerDown
}

type regKey struct {
	oid   uint32
	group string
}

type registration struct{ wake func() }

func (l *listener) add(ctx context.Context, oid uint32, group string, wake func()) (func(), error) {
	r := &registration{wake: wake}
	k := regKey{oid, group}
	l.mu.Lock()
	if l.regs == nil {
		l.regs = make(map[regKey][]*registration)
	}
	l.regs[k] = append(l.regs[k], r)
	l.n++
	if l.n == 1 {
		runCtx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done, l.ready, l.firstErr, l.down = cancel, make(chan struct{}), make(chan struct{}), nil, nil
		go l.run(runCtx, l.done, l.ready)
	}
	ready, done := l.ready, l.done
	l.mu.Unlock()

	remove := func() { l.remove(k, r) }
	select {
	case <-ready:
		return remove, nil
	case <-done:
		remove()
		l.mu.Lock()
		err := l.firstErr
		l.mu.Unlock()
		if err == nil {
			err = errors.New("the listener stopped before it was listening")
		}
		return nil, fmt.Errorf("postgres: LISTEN: %w", edgeErr(err, nil))
	case <-ctx.Done():
		remove()
		return nil, ctx.Err()
	}
}

func (l *listener) remove(k regKey, r *registration) {
	l.mu.Lock()
	rs := l.regs[k]
	found := false
	for i, x := range rs {
		if x == r {
			l.regs[k] = append(rs[:i:i], rs[i+1:]...)
			found = true
			break
		}
	}
	if len(l.regs[k]) == 0 {
		delete(l.regs, k)
	}
	if !found {
		l.mu.Unlock()
		return
	}
	l.n--
	var cancel context.CancelFunc
	var done chan struct{}
	if l.n == 0 {
		cancel, done = l.cancel, l.done
		l.cancel = nil
	}
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// stop ends the listener whatever is still registered (the DB is closing).
func (l *listener) stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.regs, l.n = nil, 0
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rs := range l.regs {
		for _, r := range rs {
			r.wake()
		}
	}
}

func (l *listener) dispatch(payload string) {
	oidText, group, ok := strings.Cut(payload, ":")
	if !ok {
		return
	}
	oid, err := strconv.ParseUint(oidText, 10, 32)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.regs[regKey{uint32(oid), group}] {
		r.wake()
	}
}

// run owns the listening connection until ctx ends.
func (l *listener) run(ctx context.Context, done, ready chan struct{}) {
	defer close(done)
	backoff := time.Duration(0)
	first := true
	for ctx.Err() == nil {
		conn, err := l.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if first { // nobody is listening yet: the subscription fails to open instead
				l.mu.Lock()
				l.firstErr = err
				l.mu.Unlock()
				return
			}
			backoff = clock.Backoff(backoff, 50*time.Millisecond, 5*time.Second)
			wait := clock.Jitter(backoff) // replicas that lost the server together do not return in lockstep
			l.log.Warn("postgres: LISTEN connection failed; retrying", "error", err, "backoff", wait)
			l.setDown(err)
			if clock.Sleep(ctx, l.db.clock, wait) != nil {
				return
			}
			continue
		}
		backoff = 0
		l.setDown(nil)
		if first {
			close(ready)
			first = false
		} else {
			l.log.Info("postgres: LISTEN connection restored")
		}
		l.wakeAll()
		err = l.wait(ctx, conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), discardTimeout)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("postgres: LISTEN connection lost; reconnecting", "error", err)
		l.setDown(err)
	}
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.db.pool.Config().ConnConfig.Copy()
	if app := cfg.RuntimeParams["application_name"]; app != "" {
		cfg.RuntimeParams["application_name"] = app + " (" + listenerAppName + ")"
	} else {
		cfg.RuntimeParams["application_name"] = listenerAppName
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), discardTimeout)
		_ = conn.Close(closeCtx)
		cancel()
		return nil, err
	}
	return conn, nil
}

func (l *listener) wait(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.dispatch(n.Payload)
	}
}
