package mysql

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// The crash test runs a consumer in a child process (this test binary, TestCrashChild), kills
// it with SIGKILL while deliveries are in flight, and starts another. The handler acknowledges
// in transactional mode, writing a ledger row through the delivery's transaction, so a ledger
// row exists exactly when its message's settlement committed; a journal written outside the
// transaction records every handling. The ledger then proves per form that every message was
// settled, and no message twice (under one lease token or any other).

const (
	crashEnv   = "SETTLE_CRASH_CHILD" // form name; set only in the child
	crashDSN   = "SETTLE_CRASH_DSN"
	crashShift = "SETTLE_CRASH_SHIFT" // how far the child's clock runs ahead (past the dead child's leases)
	crashBlock = "SETTLE_CRASH_BLOCK" // how many deliveries the child keeps in flight until killed
	crashN     = 300
)

func crashEndpoint(form string) func(*DB, sqlqueue.Table, string) (core.Endpoint, error) {
	switch form {
	case "lease":
		return Lease
	case "rowlock":
		return RowLock
	}
	return Advisory
}

func crashTable() sqlqueue.Table {
	tb := sqlqueue.StandardTable("jobs")
	tb.Columns.ProcessedAt = ""
	return tb
}

func TestCrash(t *testing.T) {
	s := mariadbServer(t)
	for _, form := range []string{"rowlock", "lease", "advisory"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn, _ := s.freshDatabase(t)
			db, err := Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			tb := crashTable()
			if err := db.CreateTable(ctx, tb); err != nil {
				t.Fatal(err)
			}
			for _, ddl := range []string{
				"CREATE TABLE ledger (msg_id BIGINT NOT NULL, attempt INT NOT NULL, token DATETIME(6) NULL, pid INT NOT NULL)",
				"CREATE TABLE journal (msg_id BIGINT NOT NULL, attempt INT NOT NULL, pid INT NOT NULL)",
			} {
				if _, err := db.Pool().ExecContext(ctx, ddl); err != nil {
					t.Fatal(err)
				}
			}
			pub, err := NewPublisher(db, tb, "crash")
			if err != nil {
				t.Fatal(err)
			}
			for i := range crashN {
				if _, err := sqlqueue.Publish(ctx, pub, i); err != nil {
					t.Fatal(err)
				}
			}

			// First consumer: killed once three deliveries are stuck in their handlers and a
			// hundred messages have settled.
			first := startChild(t, form, dsn, 0, 3)
			blocked, settled := 0, 0
			for line := range first.lines {
				switch {
				case strings.HasPrefix(line, "blocked "):
					blocked++
				case strings.HasPrefix(line, "settled "):
					settled++
				}
				if blocked >= 3 && settled >= 100 {
					break
				}
			}
			if blocked < 3 || settled < 100 {
				t.Fatalf("the first consumer ended before the kill: %d blocked, %d settled", blocked, settled)
			}
			first.kill(t)

			// Second consumer: its clock runs past the dead consumer's leases; it drains the
			// queue and is stopped when the table is empty.
			second := startChild(t, form, dsn, 2*sqlqueue.DefaultLease, 0)
			for line := range second.lines {
				if !strings.HasPrefix(line, "settled ") {
					continue
				}
				var left int
				if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs").Scan(&left); err != nil {
					t.Fatal(err)
				}
				if left == 0 {
					break
				}
			}
			second.kill(t)

			var left, ledger, distinct, dupTokens, redelivered int
			q := func(sql string, dst *int) {
				t.Helper()
				if err := db.Pool().QueryRowContext(ctx, sql).Scan(dst); err != nil {
					t.Fatal(err)
				}
			}
			q("SELECT COUNT(*) FROM jobs", &left)
			q("SELECT COUNT(*) FROM ledger", &ledger)
			q("SELECT COUNT(DISTINCT msg_id) FROM ledger", &distinct)
			q("SELECT COUNT(*) FROM (SELECT msg_id, token FROM ledger GROUP BY msg_id, token HAVING COUNT(*) > 1) d", &dupTokens)
			q("SELECT COUNT(DISTINCT j.msg_id) FROM journal j JOIN journal k ON j.msg_id = k.msg_id AND j.pid <> k.pid", &redelivered)
			t.Logf("%s: %d settled by the killed consumer before the kill was seen, %d messages handled by both consumers", form, settled, redelivered)
			if left != 0 || ledger != crashN || distinct != crashN || dupTokens != 0 {
				t.Fatalf("after the crash: %d rows left, %d ledger rows for %d distinct messages (want %d each), %d settled twice under one token",
					left, ledger, distinct, crashN, dupTokens)
			}
			if redelivered < 3 {
				t.Fatalf("only %d messages were handled by both consumers; the three in flight at the kill must come back", redelivered)
			}
		})
	}
}

type child struct {
	cmd      *exec.Cmd
	lines    chan string
	watchdog *time.Timer
}

func startChild(t *testing.T, form, dsn string, shift time.Duration, block int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+form, crashDSN+"="+dsn, crashShift+"="+shift.String(), crashBlock+"="+strconv.Itoa(block))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A consumer that stops making progress is killed after a while, so that the test fails
	// with what it saw instead of hanging.
	c := &child{cmd: cmd, lines: make(chan string), watchdog: time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() })}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return c
}

// kill sends SIGKILL and reaps the child; the rest of its output is drained.
func (c *child) kill(t *testing.T) {
	t.Helper()
	c.watchdog.Stop()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	for range c.lines {
	}
	_ = c.cmd.Wait()
}

// shifted is the real clock moved ahead by off.
type shifted struct {
	clock.Clock
	off time.Duration
}

func (s shifted) Now() time.Time { return s.Clock.Now().Add(s.off) }

// TestCrashChild is the consumer TestCrash starts; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	form := os.Getenv(crashEnv)
	if form == "" {
		t.Skip("the crash test's consumer process: runs only when TestCrash starts it")
	}
	ctx := context.Background()
	db, err := Open(ctx, os.Getenv(crashDSN))
	if err != nil {
		t.Fatal(err)
	}
	shift, _ := time.ParseDuration(os.Getenv(crashShift))
	block, _ := strconv.Atoi(os.Getenv(crashBlock))
	var blocked atomic.Int32
	out := make(chan string, 1024)
	go func() {
		for l := range out {
			fmt.Println(l)
		}
	}()
	app := core.New(core.WithoutSignals(), core.WithClock(shifted{clock.Real(), shift}),
		core.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		core.WithObserver(func(s core.Settlement) {
			if s.Err == nil && s.Verdict.Action == core.ActAck {
				out <- "settled " + s.Delivery.ID()
			}
		}))
	ep, err := crashEndpoint(form)(db, crashTable(), "crash")
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	h := func(ctx context.Context, m *core.Message[int]) error {
		id, _ := sqlqueue.RowID(m.Delivery())
		if _, err := db.Pool().ExecContext(ctx, "INSERT INTO journal VALUES (?, ?, ?)", id, m.Attempt(), pid); err != nil {
			return err
		}
		if m.Payload%40 == 7 && int(blocked.Add(1)) <= block {
			out <- fmt.Sprint("blocked ", id)
			<-ctx.Done() // in flight until the process is killed
			return ctx.Err()
		}
		if m.Payload%9 == 0 && m.Attempt() == 1 {
			return core.Retry()
		}
		tx, err := Tx(ctx)
		if err != nil {
			return err
		}
		var token any
		if form == "lease" {
			if err := tx.QueryRowContext(ctx, "SELECT locked_until FROM jobs WHERE id = ?", id).Scan(&token); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO ledger VALUES (?, ?, ?, ?)", id, m.Attempt(), token, pid)
		return err
	}
	if err := core.Subscribe(app, ep, h, sqlqueue.Transactional(), core.Workers(6), sqlqueue.BatchSize(10),
		sqlqueue.PollInterval(10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := app.Run(ctx); err != nil { // until killed
		t.Fatal(err)
	}
}
