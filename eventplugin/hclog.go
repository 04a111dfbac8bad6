package eventplugin

import (
	"context"
	"io"
	"log"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter carries go-plugin's own logs, and the plugin process's standard error it
// forwards, into the host's slog logger, whose attributes already name the plugin.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
	// quiet is set when the host kills the process on purpose (a failed start, a crash or a
	// hang it has already reported): go-plugin's complaints about that kill are then debug
	// lines, not warnings. Shared by every logger derived from one process's adapter.
	quiet *atomic.Bool
}

// killMessages are go-plugin's lines about a kill.
var killMessages = map[string]bool{
	"plugin failed to exit gracefully": true,
	"error closing client during Kill": true,
}

// renameKeys returns args with go-plugin's "plugin" key (the binary's path, while the host's
// own "plugin" attribute holds the plugin's name) spelled "path", so each line names the
// plugin once.
func renameKeys(args []any) []any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "plugin" {
			args = append([]any(nil), args...)
			args[i] = "path"
		}
	}
	return args
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// exitMessage is go-plugin's line about the process's end, at error level when it exits with
// a status. The host logs every failure it acts on (a crash or a hang as the call fails, at the
// pace of its FailureLog), so this second line per failure, not rate-limited, is a debug line.
const exitMessage = "plugin process exited"

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	if a.quiet != nil && a.quiet.Load() && killMessages[msg] || msg == exitMessage {
		lv = slog.LevelDebug
	}
	if !a.l.Enabled(context.Background(), lv) {
		return
	}
	if a.name != "" {
		msg = a.name + ": " + msg
	}
	a.l.Log(context.Background(), lv, msg, append(a.args[:len(a.args):len(a.args)], renameKeys(args)...)...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l slog.Level) bool { return a.l.Enabled(context.Background(), l) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(slog.LevelError) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: a.l, name: a.name, args: append(a.args[:len(a.args):len(a.args)], renameKeys(args)...), quiet: a.quiet}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return &hclogAdapter{l: a.l, name: name, args: a.args, quiet: a.quiet}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: name, args: a.args, quiet: a.quiet}
}

// SetLevel is ignored: the slog handler decides.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.enabled(slog.LevelDebug):
		return hclog.Debug
	case a.enabled(slog.LevelInfo):
		return hclog.Info
	case a.enabled(slog.LevelWarn):
		return hclog.Warn
	case a.enabled(slog.LevelError):
		return hclog.Error
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slogWriter{a}
}

type slogWriter struct{ a *hclogAdapter }

func (w slogWriter) Write(p []byte) (int, error) {
	w.a.Info(string(p))
	return len(p), nil
}
