package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// runAdvisory runs an App with one advisory subscription on the file at path until ctx ends,
// and reports on started when the subscription runs (the first delivery has been handled).
func runAdvisory(ctx context.Context, path string, started chan<- struct{}) error {
	db, err := Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	tb := sqlqueue.StandardTable("jobs")
	if err := db.CreateTable(ctx, tb); err != nil {
		return err
	}
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	app.Register(db)
	ep, err := Advisory(db, tb, "q")
	if err != nil {
		return err
	}
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[string]) error {
		if started != nil {
			select {
			case started <- struct{}{}:
			default:
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return app.Run(ctx)
}

// TestSecondProcessAdvisoryRefused: while one process runs the advisory form on a file, a
// second process that starts the advisory form on the same file is refused at start, with an
// error saying why; once the first stops, the second may start.
func TestSecondProcessAdvisoryRefused(t *testing.T) {
	if path := os.Getenv("SETTLE_SQLITE_ADVISORY_CHILD"); path != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := runAdvisory(ctx, path, nil)
		if err != nil {
			os.Stdout.WriteString(err.Error())
			if errors.Is(err, driver.ErrKeysHeldElsewhere) {
				os.Exit(3)
			}
			os.Exit(4)
		}
		os.Exit(0) // ran until its deadline: not refused
	}
	path := filepath.Join(t.TempDir(), "q.db")
	child := func() (int, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSecondProcessAdvisoryRefused$")
		cmd.Env = append(os.Environ(), "SETTLE_SQLITE_ADVISORY_CHILD="+path)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	pub, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.CreateTable(context.Background(), sqlqueue.StandardTable("jobs")); err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(pub, sqlqueue.StandardTable("jobs"), "q")
	if err != nil {
		t.Fatal(err)
	}
	// The running subscription proves it is up by handling this row.
	if _, err := sqlqueue.Publish(context.Background(), p, "hello"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- runAdvisory(ctx, path, started) }()
	select {
	case <-started:
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the first process's subscription did not start")
	}
	code, out := child()
	if code != 3 || !strings.Contains(out, "-settle-keys") || !strings.Contains(out, "lease form") {
		t.Fatalf("a second process on the same file was not refused as it should be: exit %d, %q", code, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the first App: %v", err)
	}
	if code, out := child(); code != 0 {
		t.Fatalf("after the first process stopped, a second was still refused: exit %d, %q", code, out)
	}
}

// TestConcurrentOpensOfAFreshFile: processes that open one new file at the same moment all
// succeed (one of them switches it to WAL while the others wait their turn within the busy
// timeout) and can write to it at once.
func TestConcurrentOpensOfAFreshFile(t *testing.T) {
	if path := os.Getenv("SETTLE_SQLITE_OPEN_CHILD"); path != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := Open(ctx, path)
		if err == nil {
			err = db.CreateTable(ctx, sqlqueue.StandardTable("jobs"))
		}
		if err != nil {
			os.Stdout.WriteString(err.Error())
			os.Exit(3)
		}
		var mode string
		if err := db.Pool().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			os.Stdout.WriteString("journal_mode " + mode)
			os.Exit(4)
		}
		os.Exit(0)
	}
	// Two processes at a time hit the window most often (4 of 30 pairs failed before Open
	// waited); a few rounds of eight crowd it.
	for r := range 33 {
		procs := 2
		if r >= 30 {
			procs = 8
		}
		path := filepath.Join(t.TempDir(), "fresh.db")
		cmds := make([]*exec.Cmd, procs)
		outs := make([]*strings.Builder, procs)
		for i := range cmds {
			cmds[i] = exec.Command(os.Args[0], "-test.run=^TestConcurrentOpensOfAFreshFile$")
			cmds[i].Env = append(os.Environ(), "SETTLE_SQLITE_OPEN_CHILD="+path)
			outs[i] = &strings.Builder{}
			cmds[i].Stdout = outs[i]
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Errorf("round %d, process %d of %d opening one fresh file: %v: %s", r, i, procs, err, outs[i])
			}
		}
	}
}
