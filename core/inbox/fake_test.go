package inbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
)

// memDB is an in-memory stand-in for the service's database in core's unit tests: it keeps the
// inbox's ids (the first argument of its insert) and the handler's writes ("INSERT INTO ledger"
// with one argument), committed or rolled back together. The examples module runs the same
// behaviour on SQLite, PostgreSQL and MariaDB.
type memDB struct {
	mu         sync.Mutex
	ids        map[string]bool
	ledger     []string
	failCommit bool
	open       int // transactions not finished
}

func newMemDB() *memDB { return &memDB{ids: map[string]bool{}} }

func (m *memDB) Exec(context.Context, string, ...any) (sqlqueue.Result, error) {
	return sqlqueue.Result{}, nil
}
func (m *memDB) Query(context.Context, string, ...any) (sqlqueue.Rows, error) {
	return nil, errors.New("memDB: no queries")
}
func (m *memDB) Conn(context.Context) (sqlqueue.Conn, error) {
	return nil, errors.New("memDB: no conns")
}
func (m *memDB) Begin(context.Context) (sqlqueue.Transaction, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open++
	return &memTx{m: m}, nil
}

func (m *memDB) snapshot() (map[string]bool, []string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make(map[string]bool, len(m.ids))
	for k := range m.ids {
		ids[k] = true
	}
	return ids, append([]string(nil), m.ledger...), m.open
}

type memTx struct {
	m      *memDB
	id     string
	ledger []string
	done   bool
}

func (t *memTx) Exec(_ context.Context, q string, args ...any) (sqlqueue.Result, error) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	switch {
	case strings.Contains(q, `"inbox"`):
		k := args[0].(string)
		if t.m.ids[k] {
			return sqlqueue.Result{}, nil
		}
		t.id = k
		return sqlqueue.Result{RowsAffected: 1}, nil
	case strings.HasPrefix(q, "INSERT INTO ledger"):
		t.ledger = append(t.ledger, args[0].(string))
		return sqlqueue.Result{RowsAffected: 1}, nil
	}
	return sqlqueue.Result{}, errors.New("memDB: unknown statement " + q)
}
func (t *memTx) Query(context.Context, string, ...any) (sqlqueue.Rows, error) {
	return nil, errors.New("memDB: no queries")
}
func (t *memTx) Commit(context.Context) error {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.done {
		return errors.New("memDB: transaction finished")
	}
	t.done = true
	t.m.open--
	if t.m.failCommit {
		return errors.New("memDB: commit failed")
	}
	if t.id != "" {
		t.m.ids[t.id] = true
	}
	t.m.ledger = append(t.m.ledger, t.ledger...)
	return nil
}
func (t *memTx) Rollback(context.Context) error {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if !t.done {
		t.done = true
		t.m.open--
	}
	return nil
}
func (t *memTx) Unwrap() any { return t }

// family is a dialect that declares its SQL family and column types.
type family struct{ f sqlqueue.Family }

func (family) Name() string              { return "test" }
func (family) Quote(s string) string     { return `"` + s + `"` }
func (family) Placeholder(n int) string  { return "$" + string(rune('0'+n)) }
func (family) Time(t time.Time) any      { return t }
func (family) Returning() bool           { return true }
func (family) MaxIdentifier() int        { return 12 }
func (f family) Family() sqlqueue.Family { return f.f }
func (family) DDLTypes() sqlqueue.Types {
	return sqlqueue.Types{Text: "TXT", Time: "TS", TableOptions: " OPTS"}
}
func (family) Columns(context.Context, sqlqueue.Queryer, sqlqueue.TableRef) ([]sqlqueue.ColumnInfo, error) {
	return []sqlqueue.ColumnInfo{{Name: "id"}, {Name: "received_at"}}, nil
}
