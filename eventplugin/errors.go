package eventplugin

import (
	"errors"
	"strconv"
)

// Sentinels matched with errors.Is. Every error of a call names the plugin and the event
// (Error); every error of a start names the plugin binary (StartError).
var (
	// ErrUndeclared: the plugin was asked for, or answered with, an event it did not declare
	// for the dialect.
	ErrUndeclared = errors.New("eventplugin: event not declared by the plugin")
	// ErrArgCount: a statement's placeholders and arguments do not match in number.
	ErrArgCount = errors.New("eventplugin: wrong number of arguments")
	// ErrBadStatement: the plugin returned an empty statement, or a claim without a query.
	ErrBadStatement = errors.New("eventplugin: malformed statement")
	// ErrTimeout: the plugin did not answer within the call timeout; the host restarts it.
	ErrTimeout = errors.New("eventplugin: plugin did not answer in time")
	// ErrCrashed: the plugin process died or its connection broke during the call; the host
	// restarts it.
	ErrCrashed = errors.New("eventplugin: plugin process crashed")
	// ErrUnavailable: the plugin is down, waiting to be restarted after a crash or a hang.
	ErrUnavailable = errors.New("eventplugin: plugin unavailable")
	// ErrHandler: the plugin's Handler returned an error (HandlerError holds its text).
	ErrHandler = errors.New("eventplugin: plugin returned an error")
	// ErrClosed: the Plugin was closed.
	ErrClosed = errors.New("eventplugin: plugin closed")

	// ErrNotPlugin: the binary did not complete the go-plugin handshake (it is not a plugin,
	// it printed something else, it exited or it stayed silent past the start timeout).
	ErrNotPlugin = errors.New("eventplugin: not an event plugin")
	// ErrMagicCookie: the binary is a go-plugin plugin that expects another magic cookie (a
	// plugin of another host, or of another handshake).
	ErrMagicCookie = errors.New("eventplugin: plugin handshake refused (magic cookie)")
	// ErrProtocol: the plugin speaks another version of the event plugin protocol.
	ErrProtocol = errors.New("eventplugin: protocol version mismatch")
	// ErrChecksum: the binary's checksum is not the one configured (SHA256, SecureConfig).
	ErrChecksum = errors.New("eventplugin: plugin checksum mismatch")
	// ErrManifest: the plugin's Describe failed or declared something malformed.
	ErrManifest = errors.New("eventplugin: bad plugin manifest")
)

// Error is the error of one event rendered by a plugin: it names the plugin and the event, and
// unwraps to the cause (a sentinel above, a HandlerError, an ArgCountError, a context error).
type Error struct {
	// Plugin is the plugin's name.
	Plugin string
	// Event is the event being rendered.
	Event Event
	// Err is the cause.
	Err error
}

func (e *Error) Error() string {
	return "eventplugin: plugin " + strconv.Quote(e.Plugin) + ", event " + e.Event.String() + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// StartError is the error of starting a plugin process: it names the binary and what went
// wrong, with the tail of what the process wrote to its standard error.
type StartError struct {
	// Plugin names the plugin (its manifest name once known, else the binary's file name).
	Plugin string
	// Path is the binary.
	Path string
	// Kind is the sentinel that classifies the failure (ErrNotPlugin, ErrMagicCookie,
	// ErrProtocol, ErrChecksum, ErrManifest), or nil.
	Kind error
	// Err is the underlying error.
	Err error
	// Stderr is the last lines the process wrote to standard error, if any.
	Stderr string
}

func (e *StartError) Error() string {
	s := "eventplugin: plugin " + strconv.Quote(e.Plugin) + " (" + e.Path + ") cannot start: "
	if e.Kind != nil {
		s += e.Kind.Error() + ": "
	}
	s += e.Err.Error()
	if e.Stderr != "" {
		s += "; its stderr: " + strconv.Quote(e.Stderr)
	}
	return s
}

// Unwrap returns the classification and the cause.
func (e *StartError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// ArgCountError is a statement whose placeholders and arguments differ in number; it matches
// ErrArgCount.
type ArgCountError struct {
	// Statement is the statement's number, 1-based.
	Statement int
	// Placeholders and Args are the counts.
	Placeholders, Args int
}

func (e *ArgCountError) Error() string {
	return "statement " + strconv.Itoa(e.Statement) + " has " + strconv.Itoa(e.Placeholders) +
		" placeholders but " + strconv.Itoa(e.Args) + " arguments"
}

// Is makes errors.Is(err, ErrArgCount) hold.
func (e *ArgCountError) Is(target error) bool { return target == ErrArgCount }

// Is makes errors.Is(err, ErrHandler) hold.
func (e *HandlerError) Is(target error) bool { return target == ErrHandler }
