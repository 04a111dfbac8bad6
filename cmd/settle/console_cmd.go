package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/clock"
)

// cmdConsole serves the web console over every --target (or the one target of --dsn etc.).
func cmdConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("console", stderr)
	listen := c.fs.String("listen", envOr("SETTLE_LISTEN", "127.0.0.1:8080"), "address to serve on; other than loopback needs --token or --basic-auth (SETTLE_LISTEN)")
	var targets stringList
	if t := os.Getenv("SETTLE_TARGETS"); t != "" {
		targets = strings.Fields(t)
	}
	c.fs.Var(&targets, "target", "a queue to show: DSN?table=…&queue=…&dead=…; repeat for several (SETTLE_TARGETS, space-separated)")
	token := c.fs.String("token", os.Getenv("SETTLE_CONSOLE_TOKEN"), "require this bearer token (SETTLE_CONSOLE_TOKEN)")
	basic := c.fs.String("basic-auth", os.Getenv("SETTLE_CONSOLE_BASIC_AUTH"), "require HTTP basic auth user:password (SETTLE_CONSOLE_BASIC_AUTH)")
	refresh := c.fs.Duration("refresh", 5*time.Second, "how often the queues page reloads")
	var allowed stringList
	if h := os.Getenv("SETTLE_ALLOWED_HOSTS"); h != "" {
		allowed = strings.Split(h, ",")
	}
	c.fs.Var(&allowed, "allowed-hosts", "host names the console answers to besides localhost, 127.0.0.1, ::1 and the --listen host; comma-separated or repeated (SETTLE_ALLOWED_HOSTS)")
	asyncAPIFile := c.fs.String("asyncapi", "", "show this AsyncAPI document (settle asyncapi --out FILE) at /asyncapi")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("settle console takes no arguments (got %q); name queues with --target", pos)
	}
	o := console.Options{Token: *token, BasicAuth: *basic, Refresh: *refresh,
		Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if *asyncAPIFile != "" {
		if o.AsyncAPI, err = os.ReadFile(*asyncAPIFile); err != nil {
			return usageErr("settle console --asyncapi: %v", err)
		}
	}
	if err := console.CheckListen(*listen, o); err != nil {
		return usageErr("%v", err)
	}
	o.AllowedHosts = allowedHosts(*listen, allowed)
	if h, _, _ := net.SplitHostPort(*listen); len(allowed) == 0 && (h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified()) {
		o.Logger.Warn("settle console: serving on every interface, but answering only requests to localhost, 127.0.0.1 and ::1; name the host people use with --allowed-hosts", "listen", *listen)
	}
	ts, err := consoleTargets(c, targets)
	if err != nil {
		return err
	}
	ctx, stopRetries := context.WithCancel(ctx) // ends the background reopening of down targets
	defer stopRetries()
	queues, closeAll, err := openConsoleTargets(ctx, ts, o.Logger)
	defer closeAll()
	if err != nil {
		return err
	}
	h, err := console.New(queues, o)
	if err != nil {
		return usageErr("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("settle console: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "settle console: serving %d queue%s on http://%s/\n", len(queues), plural(len(queues)), ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// allowedHosts are the Host names the console answers to: the --listen host when it names one
// (not 0.0.0.0 or ::, which a browser never sends) and each --allowed-hosts entry.
func allowedHosts(listen string, flags []string) []string {
	var out []string
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			out = append(out, h)
		}
	}
	for _, f := range flags {
		for _, h := range strings.Split(f, ",") {
			if h = strings.TrimSpace(h); h != "" {
				out = append(out, h)
			}
		}
	}
	return out
}

// consoleTargets are the --target strings parsed, or the one target of --dsn and friends.
func consoleTargets(c *common, targets []string) ([]target, error) {
	var ts []target
	for _, s := range targets {
		t, err := parseTarget(s)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		t, err := c.target()
		if err != nil {
			return nil, usageErr("settle console: name the queues to show with --target (or --dsn, --table, --queue, --dead): %v", err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// openConsoleTargets opens each target for the console. A target that cannot be reached is
// shown as down with the reason, and opened again in the background until it answers: one
// server's outage must not hide the others. closeAll closes what was opened (also on error).
func openConsoleTargets(ctx context.Context, ts []target, log *slog.Logger) (queues []console.Queue, closeAll func(), err error) {
	var opened []*available
	closeAll = func() {
		for _, a := range opened {
			a.Close()
		}
	}
	for _, t := range ts {
		a := &available{name: t.name(), open: t.open, clk: clock.Real(), log: log}
		if err := a.start(ctx); err != nil {
			return nil, closeAll, fmt.Errorf("target %s: %w", t.name(), err)
		}
		opened = append(opened, a)
		if _, err := a.queue(); err != nil {
			log.Warn("settle console: target is down; shown as down and retried in the background", "target", t.name(), "error", err)
		}
		queues = append(queues, console.Queue{Name: t.name(), Ops: a, Backend: t.kind, Host: t.host()})
	}
	return queues, closeAll, nil
}
