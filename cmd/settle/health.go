package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/settlehq/settle/core/ops"
)

// errUnhealthy marks a target that answered but is over one of the health limits (exit code 6).
var errUnhealthy = errors.New("unhealthy")

// cmdHealth checks a target for scripts and probes: it must answer, its queue and dead letter
// must exist and be measurable, and its figures must be within the limits given. The exit code
// says which failed (0 healthy, 3 unreachable, 4 missing, 6 over a limit, 1 a failed
// measurement).
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("health", stderr)
	maxDead := c.fs.Int64("max-dead", -1, "unhealthy when the dead letter holds more than this (-1: no limit)")
	maxReady := c.fs.Int64("max-ready", -1, "unhealthy when more than this many messages are ready (-1: no limit)")
	maxOldest := c.fs.Duration("max-oldest", 0, "unhealthy when the oldest ready message has waited longer (0: no limit)")
	timeout := c.fs.Duration("timeout", 10*time.Second, "give up after this long (exit 3)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("settle health takes no arguments (got %q)", pos)
	}
	if *timeout <= 0 || *maxOldest < 0 {
		return usageErr("--timeout must be positive and --max-oldest not negative")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	q, closer, err := c.open(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: no answer within %s: %w", errUnreachable, *timeout, err)
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	s, err := q.Stats(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: no answer within %s: %w", errUnreachable, *timeout, err)
		}
		return err
	}
	problems := healthProblems(s, *maxDead, *maxReady, *maxOldest)
	if c.json {
		out := map[string]any{"healthy": len(problems) == 0, "problems": problems, "stats": statsJSON(s)}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	} else if len(problems) == 0 {
		fmt.Fprintf(stdout, "healthy: %s\n", s.Queue)
	} else {
		fmt.Fprintf(stdout, "unhealthy: %s: %s\n", s.Queue, strings.Join(problems, "; "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errUnhealthy, strings.Join(problems, "; "))
	}
	return nil
}

// healthProblems lists the limits s is over; a limit on a figure the backend cannot measure is
// a problem too (a probe must not pass by not looking).
func healthProblems(s ops.Stats, maxDead, maxReady int64, maxOldest time.Duration) []string {
	problems := []string{}
	check := func(f ops.Figure, n, limit int64, flag string) {
		switch {
		case limit < 0:
		case !s.Measured(f):
			problems = append(problems, fmt.Sprintf("%s is not measured on this backend, so %s cannot be checked", f, flag))
		case n > limit:
			problems = append(problems, fmt.Sprintf("%s %d > %s %d", f, n, flag, limit))
		}
	}
	check(ops.FigureDead, s.Dead, maxDead, "--max-dead")
	check(ops.FigureReady, s.Ready, maxReady, "--max-ready")
	if maxOldest > 0 {
		switch {
		case !s.Measured(ops.FigureOldestReady):
			problems = append(problems, "oldest_ready is not measured on this backend, so --max-oldest cannot be checked")
		case s.OldestReady > maxOldest:
			problems = append(problems, fmt.Sprintf("oldest_ready %s > --max-oldest %s", s.OldestReady.Round(time.Second), maxOldest))
		}
	}
	return problems
}
