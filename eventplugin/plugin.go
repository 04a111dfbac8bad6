package eventplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Plugin is a running event plugin process, as Load started it. It renders the events the
// plugin declared (Render), restarts the process with backoff after a crash or a hang, and is
// safe for concurrent use. Close ends the process.
type Plugin struct {
	path string
	cfg  config
	log  *slog.Logger

	startMu sync.Mutex // one start at a time

	mu       sync.Mutex
	name     string
	manifest Manifest
	proc     *process
	rpc      *grpcClient
	gen      uint64 // counts starts, so that one failure is acted on once
	down     error  // why the plugin is down; nil while it runs
	backoff  time.Duration
	timer    clock.Timer
	closed   bool
	changed  chan struct{} // closed and replaced on every change of state
	wg       sync.WaitGroup

	// downLog paces the lines about crashes, hangs and failed restarts, eventLog those about
	// events that failed otherwise (bindings): repeated failures are logged as the engine logs
	// its own. downLogged says whether the current outage was logged, and so whether its end is.
	downLog    sqlqueue.FailureLog
	eventLog   sqlqueue.FailureLog
	downLogged bool
}

var _ Handler = (*Plugin)(nil)

// Load starts the plugin binary at path, performs the handshake (magic cookie, protocol
// version), asks the plugin what it handles and returns it running. It fails with a
// StartError (ErrNotPlugin, ErrMagicCookie, ErrProtocol, ErrChecksum, ErrManifest) when the
// binary cannot serve as an event plugin; a subscription configured with a plugin that failed
// to load therefore never starts. The start is bounded by StartTimeout, or by ctx's deadline
// when it is sooner; asking for the manifest honours ctx.
func Load(ctx context.Context, path string, opts ...Option) (*Plugin, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("eventplugin: plugin path %q: %w", path, err)
	}
	p := &Plugin{path: abs, cfg: cfg, name: filepath.Base(abs), backoff: cfg.minBackoff, changed: make(chan struct{})}
	p.log = cfg.logger.With("plugin", p.name)
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Name is the plugin's name, from its manifest.
func (p *Plugin) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.name
}

// Path is the plugin binary's absolute path.
func (p *Plugin) Path() string { return p.path }

// Describe returns the manifest the plugin declared at its last start.
func (p *Plugin) Describe(context.Context) (Manifest, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.manifest, nil
}

// Declares reports whether the plugin declared event e for dialect.
func (p *Plugin) Declares(e Event, dialect string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.manifest.Declares(e, dialect)
}

// Check makes sure the plugin runs and declares every event of events for dialect. A plugin
// that is down is started at once, without waiting for its backoff. It is what a subscription
// calls when it starts: an error means the subscription must not start.
func (p *Plugin) Check(ctx context.Context, dialect string, events ...Event) error {
	p.mu.Lock()
	closed, down := p.closed, p.down
	p.mu.Unlock()
	if closed {
		return &StartError{Plugin: p.Name(), Path: p.path, Err: ErrClosed}
	}
	if down != nil {
		if err := p.start(ctx); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range events {
		if !p.manifest.Declares(e, dialect) {
			if dialect == "" {
				return &Error{Plugin: p.name, Event: e, Err: fmt.Errorf("%w: the plugin declares the dialects it handles %s for, and this dialect declares no family of SQL (sqlqueue.SQLFamily)", ErrUndeclared, e)}
			}
			return &Error{Plugin: p.name, Event: e, Err: fmt.Errorf("%w: the plugin does not handle %s for dialect %q", ErrUndeclared, e, dialect)}
		}
	}
	return nil
}

// Render asks the plugin for the statements of r and checks them: the event must be one the
// plugin declared for r.Dialect, the answer must be for that event, and every statement must
// have as many arguments as placeholders. Every error is an *Error naming the plugin and the
// event. A crash or a call past the timeout takes the plugin down and schedules its restart;
// until then Render fails at once with ErrUnavailable.
func (p *Plugin) Render(ctx context.Context, r *Request) ([]Statement, error) {
	p.mu.Lock()
	name := p.name
	switch {
	case p.closed:
		p.mu.Unlock()
		return nil, &Error{Plugin: name, Event: r.Event, Err: ErrClosed}
	case p.down != nil:
		err := fmt.Errorf("%w: %v; restarting", ErrUnavailable, p.down)
		p.mu.Unlock()
		return nil, &Error{Plugin: name, Event: r.Event, Err: err}
	case !p.manifest.Declares(r.Event, r.Dialect):
		p.mu.Unlock()
		return nil, &Error{Plugin: name, Event: r.Event, Err: fmt.Errorf("%w: the plugin does not handle %s for dialect %q", ErrUndeclared, r.Event, r.Dialect)}
	}
	rpc, gen := p.rpc, p.gen
	p.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, p.cfg.callTimeout)
	ev, stmts, err := rpc.render(cctx, r)
	timedOut := cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	if err != nil {
		var herr *HandlerError
		switch {
		case errors.As(err, &herr):
			err = herr
		case ctx.Err() != nil:
			// The caller gave up; the plugin is not to blame.
			err = ctx.Err()
		case timedOut || status.Code(err) == codes.DeadlineExceeded:
			err = fmt.Errorf("%w (%v)", ErrTimeout, p.cfg.callTimeout)
			p.fail(gen, r, err)
		default:
			err = fmt.Errorf("%w: %v", ErrCrashed, err)
			p.fail(gen, r, err)
		}
		return nil, &Error{Plugin: name, Event: r.Event, Err: err}
	}
	if err := check(r, ev, stmts); err != nil {
		return nil, &Error{Plugin: name, Event: r.Event, Err: err}
	}
	p.mu.Lock()
	if p.gen == gen {
		p.backoff = p.cfg.minBackoff
	}
	p.mu.Unlock()
	return stmts, nil
}

// check validates a plugin's answer to r.
func check(r *Request, ev Event, stmts []Statement) error {
	if ev != r.Event {
		return fmt.Errorf("%w: asked for %s, the plugin answered with statements for %s", ErrUndeclared, r.Event, ev)
	}
	if r.Event == EventClaim && len(stmts) == 0 {
		return fmt.Errorf("%w: a claim needs a query returning the claimed rows", ErrBadStatement)
	}
	g := grammarOf(r.Dialect, r.Placeholders)
	for i, st := range stmts {
		if strings.TrimSpace(st.SQL) == "" {
			return fmt.Errorf("%w: statement %d is empty", ErrBadStatement, i+1)
		}
		n, err := g.count(st.SQL)
		if err != nil {
			return fmt.Errorf("%w: statement %d, read as %s reads it: %v", ErrBadStatement, i+1, g, err)
		}
		if n != len(st.Args) {
			return &ArgCountError{Statement: i + 1, Placeholders: n, Args: len(st.Args)}
		}
	}
	return nil
}

// fail takes the plugin of start gen down after a crash or hang during r, kills its process
// and schedules the restart.
func (p *Plugin) fail(gen uint64, r *Request, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.gen != gen || p.down != nil {
		return
	}
	p.down = cause
	old := p.proc
	p.proc, p.rpc = nil, nil
	wait := p.backoff
	p.backoff = min(2*p.backoff, p.cfg.maxBackoff)
	p.downLogged = false
	if n, ok := p.downLog.Failed(p.cfg.clock.Now()); ok {
		p.downLogged = true
		args := []any{"event", r.Event.String(), "failures", n, "err", cause, "backoff", wait}
		if r.Event != EventClaim {
			args = append(args, "queue", r.Queue, "message_id", r.Row.ID, "attempt", r.Row.Attempt)
		}
		p.log.Error("eventplugin: plugin failed during an event; restarting it", args...)
	}
	p.timer = p.cfg.clock.AfterFunc(wait, p.restart)
	p.notify()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		old.kill(true) // the failure is logged above, or counted in the next line
	}()
}

// restart runs on the clock when the backoff has passed.
func (p *Plugin) restart() {
	p.mu.Lock()
	if p.closed || p.down == nil {
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	if err := p.start(context.Background()); err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed || p.down == nil {
			return
		}
		wait := p.backoff
		p.backoff = min(2*p.backoff, p.cfg.maxBackoff)
		if n, ok := p.downLog.Failed(p.cfg.clock.Now()); ok {
			p.downLogged = true
			p.log.Error("eventplugin: plugin restart failed; retrying", "failures", n, "err", err, "backoff", wait)
		}
		p.timer = p.cfg.clock.AfterFunc(wait, p.restart)
		p.notify()
		return
	}
}

// start starts a new process and installs it; on failure the Plugin's state is unchanged.
func (p *Plugin) start(ctx context.Context) error {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.mu.Lock()
	if p.proc != nil || p.closed {
		// Another start got there first (or Close did).
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return &StartError{Plugin: p.Name(), Path: p.path, Err: ErrClosed}
		}
		return nil
	}
	name := p.name
	p.mu.Unlock()

	proc, rpc, m, err := p.launch(ctx, name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			proc.kill(true)
		}()
		return &StartError{Plugin: name, Path: p.path, Err: ErrClosed}
	}
	if p.name != m.Name {
		p.name = m.Name
		p.log = p.cfg.logger.With("plugin", m.Name)
	}
	p.manifest = m
	p.proc, p.rpc = proc, rpc
	p.gen++
	switch {
	case p.down != nil && p.downLogged:
		p.log.Info("eventplugin: plugin restarted")
	case p.down != nil:
		p.log.Debug("eventplugin: plugin restarted")
	}
	p.down = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.notify()
	return nil
}

// launch runs the binary, completes the handshake and reads the manifest.
func (p *Plugin) launch(ctx context.Context, name string) (*process, *grpcClient, Manifest, error) {
	startTimeout := p.cfg.startTimeout
	if dl, ok := ctx.Deadline(); ok {
		startTimeout = min(startTimeout, time.Until(dl))
	}
	if startTimeout <= 0 {
		return nil, nil, Manifest{}, &StartError{Plugin: name, Path: p.path, Err: context.DeadlineExceeded}
	}
	cmd := exec.Command(p.path, p.cfg.args...)
	cmd.Env = append(cmd.Env, p.cfg.env...)
	if !p.cfg.noDeathSignal {
		// The process dies with the host, however the host ends (kill -9, os.Exit after a
		// failed start): no plugin outlives its host where the system can say so.
		setDeathSignal(cmd)
	}
	var secure *plugin.SecureConfig
	if p.cfg.secure != nil {
		p.cfg.secure.Hash.Reset() // go-plugin does not reset it, and restarts check again
		secure = p.cfg.secure
	}
	stderr := &tail{max: 2048}
	quiet := new(atomic.Bool)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(nil),
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     startTimeout,
		Logger:           &hclogAdapter{l: p.cfg.logger.With("plugin", name), quiet: quiet},
		Stderr:           stderr,
	})
	proc, proto, err := startProcess(client, quiet)
	fail := func(kind, err error) (*process, *grpcClient, Manifest, error) {
		// The StartError says what went wrong; the kill is no news. Kill waits for the process
		// and its output, so the stderr tail is whole.
		proc.kill(true)
		if kind == nil {
			kind = classifyStart(err, stderr.String())
		}
		return nil, nil, Manifest{}, &StartError{Plugin: name, Path: p.path, Kind: kind, Err: err, Stderr: stderr.String()}
	}
	if err != nil {
		return fail(nil, err)
	}
	raw, err := proto.Dispense(PluginName)
	if err != nil {
		return fail(ErrNotPlugin, err)
	}
	rpc := raw.(*grpcClient)
	dctx, cancel := context.WithTimeout(ctx, p.cfg.callTimeout)
	m, err := rpc.Describe(dctx)
	cancel()
	if err != nil {
		return fail(ErrManifest, fmt.Errorf("describe: %w", err))
	}
	if err := m.validate(); err != nil {
		return fail(ErrManifest, err)
	}
	return proc, rpc, m, nil
}

// classifyStart tells why go-plugin could not start a binary, from its error and stderr.
func classifyStart(err error, stderr string) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return ErrChecksum
	case strings.Contains(msg, "incompatible API version"), strings.Contains(msg, "incompatible core API version"):
		return ErrProtocol
	case strings.Contains(stderr, "This binary is a plugin"):
		return ErrMagicCookie
	case strings.Contains(msg, "Unrecognized remote plugin message"),
		strings.Contains(msg, "plugin exited before we could connect"),
		strings.Contains(msg, "timeout while waiting for plugin to start"),
		strings.Contains(msg, "unsupported plugin protocol"):
		return ErrNotPlugin
	}
	return nil
}

// Close ends the plugin process and stops restarting it. Calls after Close fail with
// ErrClosed.
func (p *Plugin) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	proc := p.proc
	p.proc, p.rpc = nil, nil
	p.notify()
	p.mu.Unlock()
	if proc != nil {
		proc.kill(false)
	}
	p.wg.Wait()
	return nil
}

// notify wakes whoever waits for a change of state; p.mu is held.
func (p *Plugin) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// state reports whether the plugin runs, and a channel closed at its next change of state.
func (p *Plugin) state() (up bool, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down == nil && !p.closed, p.changed
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
