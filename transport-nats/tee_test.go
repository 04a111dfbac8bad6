package natsjs_test

import (
	"context"
	"log/slog"
)

// teeHandler sends every record to two handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = h.a.Handle(ctx, r.Clone())
	return h.b.Handle(ctx, r)
}

func (h teeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(attrs), h.b.WithAttrs(attrs)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{h.a.WithGroup(name), h.b.WithGroup(name)}
}
