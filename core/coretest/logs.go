package coretest

import (
	"context"
	"log/slog"
	"sync"
)

// Logs is a slog.Handler that keeps every record, so tests can assert the warnings the
// semantics call for.
type Logs struct {
	mu      sync.Mutex
	records []Record
	attrs   []slog.Attr
	parent  *Logs
}

// Record is one kept log record with its attributes flattened by key.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]any
}

func (l *Logs) root() *Logs {
	if l.parent != nil {
		return l.parent
	}
	return l
}

// Enabled keeps every level.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Message: r.Message, Attrs: make(map[string]any)}
	for _, a := range l.attrs {
		rec.Attrs[a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	root := l.root()
	root.mu.Lock()
	root.records = append(root.records, rec)
	root.mu.Unlock()
	return nil
}

// WithAttrs returns a handler that adds attrs to every record.
func (l *Logs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Logs{parent: l.root(), attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...)}
}

// WithGroup is not used by settle; groups are flattened.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far whose level is at least min.
func (l *Logs) Records(min slog.Level) []Record {
	root := l.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	var out []Record
	for _, r := range root.records {
		if r.Level >= min {
			out = append(out, r)
		}
	}
	return out
}

// Find returns the records whose message is msg.
func (l *Logs) Find(msg string) []Record {
	var out []Record
	for _, r := range l.Records(slog.LevelDebug) {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}
