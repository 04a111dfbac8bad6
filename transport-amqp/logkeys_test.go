package amqp_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

// onceKeys is a log handler that passes every record on and remembers each record in which a
// key appears twice (the logger's own attributes and the record's together): a line such as
// `queue=a … queue=a` names its queue twice, and some log readers keep only one of them.
type onceKeys struct {
	next  slog.Handler
	keys  []string // of the logger's attributes, with their groups
	group string
	dups  *dupLines
}

// dupLines are the records with a repeated key, shared by a handler and its derivations.
type dupLines struct {
	mu    sync.Mutex
	lines []string
}

func newOnceKeys(next slog.Handler) onceKeys { return onceKeys{next: next, dups: &dupLines{}} }

// check fails t with every record that named a key twice.
func (h onceKeys) check(t testing.TB) {
	t.Helper()
	h.dups.mu.Lock()
	defer h.dups.mu.Unlock()
	for _, l := range h.dups.lines {
		t.Errorf("a log line names a key twice: %s", l)
	}
}

func (h onceKeys) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h onceKeys) Handle(ctx context.Context, r slog.Record) error {
	keys := slices.Clone(h.keys)
	r.Attrs(func(a slog.Attr) bool {
		keys = append(keys, h.group+a.Key)
		return true
	})
	slices.Sort(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] {
			h.dups.mu.Lock()
			h.dups.lines = append(h.dups.lines, r.Message+" (key "+keys[i]+")")
			h.dups.mu.Unlock()
			break
		}
	}
	return h.next.Handle(ctx, r)
}

func (h onceKeys) WithAttrs(as []slog.Attr) slog.Handler {
	keys := slices.Clone(h.keys)
	for _, a := range as {
		keys = append(keys, h.group+a.Key)
	}
	return onceKeys{next: h.next.WithAttrs(as), keys: keys, group: h.group, dups: h.dups}
}

func (h onceKeys) WithGroup(name string) slog.Handler {
	return onceKeys{next: h.next.WithGroup(name), keys: h.keys, group: h.group + name + ".", dups: h.dups}
}
