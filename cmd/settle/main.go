package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/settlehq/settle/core/ops"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// Exit codes: scripts can tell what went wrong from them (the README lists them too).
const (
	exitOK          = 0 // done
	exitFailed      = 1 // the backend failed the operation (partly done: the output says how much)
	exitUsage       = 2 // bad flags or arguments: nothing was done
	exitUnreachable = 3 // the backend could not be reached or opened (wrong DSN, server down, auth)
	exitNoTarget    = 4 // the table, column or queue does not exist
	exitNotFound    = 5 // a dead-letter id is not in the dead letter: nothing was done
	exitUnhealthy   = 6 // settle health: the target answered but is over a limit
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErr(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case isUsage(err), errors.Is(err, ops.ErrNoSelection), errors.Is(err, ops.ErrNoDeadLetter),
		errors.Is(err, natsjs.ErrKeepAttempts):
		return exitUsage
	case errors.Is(err, errUnreachable):
		return exitUnreachable
	case errors.Is(err, ops.ErrTargetNotFound):
		return exitNoTarget
	case errors.Is(err, ops.ErrNotFound):
		return exitNotFound
	case errors.Is(err, errUnhealthy):
		return exitUnhealthy
	}
	return exitFailed
}

const usage = `settle — look at queues and their dead letters, redrive or purge them.

Usage:
  settle stats                       depth by state of the queue, and its dead letters
  settle queues                      every queue of the target (groups of a table, a stream's consumers)
  settle health [--max-dead N] [--max-ready N] [--max-oldest D]   exit 0 when healthy (probes)
  settle dead ls                     list dead letters with why they died
  settle dead show ID                one dead letter: why, headers, payload
  settle dead redrive ID… | --all | FILTER   send dead letters back to their queue
  settle dead purge ID… | --all | FILTER     delete dead letters for good
  settle stranded [ls]               NATS: messages the stream holds and will never deliver again
  settle stranded repair SEQ… | --all [--to dead|queue]   move them to the dead letter or the queue
  settle console [--listen 127.0.0.1:8080] [--target T]…   the web console
  settle asyncapi [--out FILE] -- COMMAND…   the AsyncAPI document of a program's App

The target (every command):
  --dsn      SETTLE_DSN      sqlite:///path/queue.db, postgres://…, mysql://user:pw@tcp(host:3306)/db,
                             amqp://user:pw@host:5672/, nats://host:4222
  --table    SETTLE_TABLE    the queue table (SQL)
  --queue    SETTLE_QUEUE    the queue: its group in a table with a group column, the RabbitMQ queue,
                             or the NATS subject
  --dead     SETTLE_DEAD     its dead letter: a group, a table, a RabbitMQ queue or a NATS subject
  --waiting  SETTLE_WAITING  RabbitMQ waiting queues counted as delayed (default <queue>.retry)
  --management SETTLE_MANAGEMENT  RabbitMQ's management API, http://user:pw@host:15672: counts
                             messages in flight and those a quorum queue is dead-lettering
  --json                     machine-readable output

Filters (dead ls, redrive, purge): --origin Q, --reason TEXT, --dead-before T, --dead-after T
(T is RFC 3339 or a duration ago, e.g. 2h).

Exit codes: 0 done; 1 the backend failed (partly done); 2 usage error, nothing done;
3 backend unreachable (wrong DSN, server down, auth); 4 no such table, column or queue;
5 unknown dead-letter id, nothing done; 6 settle health: over a limit.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one command line and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stderr = newScrubber(stderr, commandSecrets(args))
	err := dispatch(ctx, args, stdout, stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "settle: %v\n", err)
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitCode(err)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageErr("no command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		fmt.Fprintf(stdout, "\nThis build reads SQLite files through %s.\n", sqliteDialect)
		return nil
	case "stats":
		return cmdStats(ctx, rest, stdout, stderr)
	case "queues":
		return cmdQueues(ctx, rest, stdout, stderr)
	case "health":
		return cmdHealth(ctx, rest, stdout, stderr)
	case "console":
		return cmdConsole(ctx, rest, stdout, stderr)
	case "asyncapi":
		return cmdAsyncAPI(ctx, rest, stdout, stderr)
	case "stranded":
		return cmdStranded(ctx, rest, stdout, stderr)
	case "dead":
		if len(rest) == 0 {
			return usageErr("settle dead: name a subcommand: ls, show, redrive or purge")
		}
		switch rest[0] {
		case "ls", "list":
			return cmdDeadList(ctx, rest[1:], stdout, stderr)
		case "show":
			return cmdDeadShow(ctx, rest[1:], stdout, stderr)
		case "redrive":
			return cmdDeadChange(ctx, "redrive", rest[1:], stdout, stderr)
		case "purge":
			return cmdDeadChange(ctx, "purge", rest[1:], stdout, stderr)
		}
		return usageErr("settle dead: unknown subcommand %q (ls, show, redrive, purge)", rest[0])
	}
	return usageErr("unknown command %q (stats, queues, health, dead, stranded, console, asyncapi; settle help)", cmd)
}

// common are the flags every command takes.
type common struct {
	fs                      *flag.FlagSet
	dsn, table, queue, dead string
	waiting                 stringList
	management              string
	json                    bool
}

type stringList []string

// String is what -h prints as the default (from the environment): DSNs with their passwords
// masked.
func (s *stringList) String() string {
	out := make([]string, len(*s))
	for i, v := range *s {
		out[i] = redact(v)
	}
	return strings.Join(out, ",")
}

func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func newCommon(name string, stderr io.Writer) *common {
	c := &common{fs: flag.NewFlagSet("settle "+name, flag.ContinueOnError)}
	c.fs.SetOutput(stderr)
	c.fs.StringVar(&c.dsn, "dsn", os.Getenv("SETTLE_DSN"), "the backend: sqlite:///path.db, postgres://…, mysql://…, amqp://…, nats://… (SETTLE_DSN)")
	c.fs.StringVar(&c.table, "table", os.Getenv("SETTLE_TABLE"), "the queue table, SQL (SETTLE_TABLE)")
	c.fs.StringVar(&c.queue, "queue", os.Getenv("SETTLE_QUEUE"), "the queue: a group of the table, a RabbitMQ queue or a NATS subject (SETTLE_QUEUE)")
	c.fs.StringVar(&c.dead, "dead", os.Getenv("SETTLE_DEAD"), "the dead letter: a group, a table, a queue or a subject (SETTLE_DEAD)")
	if w := os.Getenv("SETTLE_WAITING"); w != "" {
		c.waiting = strings.Split(w, ",")
	}
	c.fs.Var(&c.waiting, "waiting", "a RabbitMQ waiting queue counted as delayed; repeat for several (SETTLE_WAITING, comma-separated)")
	c.fs.StringVar(&c.management, "management", os.Getenv("SETTLE_MANAGEMENT"), "RabbitMQ's management API, http://user:pw@host:15672: counts in-flight and dead-lettering messages (SETTLE_MANAGEMENT)")
	c.fs.BoolVar(&c.json, "json", false, "print JSON")
	return c
}

// parse parses args, allowing flags after positional arguments (settle dead show 7 --json).
func (c *common) parse(args []string) ([]string, error) {
	hideDefaults(c.fs)
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%v", err)
		}
		args = c.fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (c *common) target() (target, error) {
	kind, dsn, err := splitDSN(c.dsn)
	if err != nil {
		return target{}, err
	}
	return target{kind: kind, raw: c.dsn, dsn: dsn, table: c.table, queue: c.queue, dead: c.dead, wait: c.waiting, management: c.management}, nil
}

// checkIDs refuses dead-letter ids the target's backend cannot have.
func (c *common) checkIDs(ids []string) error {
	t, err := c.target()
	if err != nil {
		return err
	}
	return checkIDs(t.kind, ids)
}

func (c *common) open(ctx context.Context) (ops.Queue, io.Closer, error) {
	t, err := c.target()
	if err != nil {
		return nil, nil, err
	}
	return t.open(ctx)
}

// filterFlags are the dead-letter filters.
type filterFlags struct {
	origin, reason, before, after string
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.origin, "origin", "", "only dead letters from this queue")
	fs.StringVar(&f.reason, "reason", "", "only dead letters whose reason contains this text")
	fs.StringVar(&f.before, "dead-before", "", "only dead letters moved before this time (RFC 3339, or a duration ago: 2h)")
	fs.StringVar(&f.after, "dead-after", "", "only dead letters moved at or after this time (RFC 3339, or a duration ago)")
}

func (f *filterFlags) filter(now time.Time) (ops.Filter, error) {
	out := ops.Filter{Origin: f.origin, Reason: f.reason}
	var err error
	if out.DeadBefore, err = parseWhen(f.before, now); err != nil {
		return out, usageErr("--dead-before: %v", err)
	}
	if out.DeadAfter, err = parseWhen(f.after, now); err != nil {
		return out, usageErr("--dead-after: %v", err)
	}
	return out, nil
}

func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration ago (2h, 30m)", s)
}

func cmdStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("stats", stderr)
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("settle stats takes no arguments (got %q)", pos)
	}
	q, closer, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer closer.Close()
	s, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	if c.json {
		err = writeJSON(stdout, statsJSON(s))
	} else {
		printStats(stdout, []ops.Stats{s})
	}
	statsHints(ctx, q, stderr, s)
	return err
}

func cmdDeadList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("dead ls", stderr)
	var ff filterFlags
	ff.register(c.fs)
	limit := c.fs.Int("limit", ops.DefaultLimit, "the most dead letters to list")
	cursor := c.fs.String("cursor", "", "continue a listing (the next cursor a previous page printed)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("settle dead ls takes no arguments (got %q); filter with --origin, --reason, --dead-before, --dead-after", pos)
	}
	if *limit <= 0 {
		return usageErr("--limit must be positive")
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	q, closer, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer closer.Close()
	page, err := q.ListDead(ctx, f, ops.Page{Limit: *limit, After: *cursor})
	if err != nil {
		return err
	}
	if c.json {
		err = writeJSON(stdout, pageJSON(page))
	} else {
		printDeadList(stdout, page, time.Now())
	}
	if len(page.Items) == 0 && *cursor == "" {
		deadHint(ctx, q, stderr)
	}
	return err
}

func cmdDeadShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("dead show", stderr)
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("settle dead show takes one dead-letter id (got %d)", len(pos))
	}
	if err := c.checkIDs(pos); err != nil {
		return err
	}
	q, closer, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer closer.Close()
	d, err := q.GetDead(ctx, pos[0])
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(stdout, deadJSON(d))
	}
	printDead(stdout, d, time.Now())
	return nil
}

// cmdDeadChange runs redrive or purge.
func cmdDeadChange(ctx context.Context, what string, args []string, stdout, stderr io.Writer) error {
	c := newCommon("dead "+what, stderr)
	var ff filterFlags
	ff.register(c.fs)
	all := c.fs.Bool("all", false, "every dead letter")
	keep := c.fs.Bool("keep-attempts", false, "redrive: keep each message's attempt count (default: start again)")
	verbose := c.fs.Bool("v", false, "redrive: print each dead letter's id on stderr once it is moved")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	sel := ops.Selection{IDs: pos, Filter: f, All: *all}
	if err := sel.Validate(); err != nil {
		return usageErr("settle dead %s: name dead-letter ids, a filter (--origin, --reason, --dead-before, --dead-after) or --all, and only one of them", what)
	}
	if what == "purge" && (*keep || *verbose) {
		return usageErr("--keep-attempts and -v apply to redrive only")
	}
	if err := c.checkIDs(pos); err != nil {
		return err
	}
	q, closer, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer closer.Close()
	var n int
	if what == "redrive" {
		opt := ops.RedriveOptions{KeepAttempts: *keep}
		if *verbose {
			opt.Moved = func(ids []string) {
				for _, id := range ids {
					fmt.Fprintf(stderr, "redriven %s\n", id)
				}
			}
		}
		n, err = q.Redrive(ctx, sel, opt)
	} else {
		n, err = q.Purge(ctx, sel)
	}
	if n == 0 && err == nil && len(pos) == 0 {
		defer deadHint(ctx, q, stderr) // after the count
	}
	if c.json {
		out := map[string]any{"action": what, "done": n, "selection": sel.String()}
		if err != nil {
			out["error"] = err.Error()
		}
		if jerr := writeJSON(stdout, out); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}
	past := map[string]string{"redrive": "redriven", "purge": "purged"}[what]
	fmt.Fprintf(stdout, "%s %d dead letter%s (%s)\n", past, n, plural(n), sel)
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
