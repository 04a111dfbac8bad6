package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// The crash test runs this test binary again as a consumer process (TestCrashChild, switched
// on by these variables), kills it with SIGKILL while its handlers are in flight, starts it
// again, and proves from the tables that every row ended exactly once in its final state.
const (
	crashChildEnv  = "SETTLE_PG_CRASH_CHILD"
	crashFormEnv   = "SETTLE_PG_CRASH_FORM"
	crashSchemaEnv = "SETTLE_PG_CRASH_SCHEMA"
	crashRows      = 600
	crashKillAfter = 150 // settlements seen before the SIGKILL
)

// crashOutcome is what the consumer does with row n: every tenth is dropped, every tenth plus
// one keeps failing until the cap moves it to the dead-letter table, the rest are acked.
func crashOutcome(n int) string {
	switch n % 10 {
	case 0:
		return "drop"
	case 1:
		return "dead"
	}
	return "ack"
}

// TestCrashChild is the consumer process of TestCrashExactlyOnce; run directly it skips.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashChildEnv) != "1" {
		t.Skip("the consumer process of TestCrashExactlyOnce")
	}
	schema, formName := os.Getenv(crashSchemaEnv), os.Getenv(crashFormEnv)
	pool := newPool(t, schema, 16)
	defer pool.Close()
	db, err := postgres.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var ep core.Endpoint
	for _, f := range forms {
		if f.name == formName {
			ep, err = f.ep(db, plainTable("jobs"), "")
		}
	}
	if ep == nil || err != nil {
		t.Fatalf("form %q: %v", formName, err)
	}
	// Observers must not block: settlements go to a writer goroutine.
	lines := make(chan string, crashRows*4)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for l := range lines {
			fmt.Fprintln(os.Stdout, l)
		}
	}()
	app := core.New(core.WithLogger(testLogger()), core.WithShutdownTimeout(10*time.Second),
		core.WithObserver(func(s core.Settlement) {
			lines <- fmt.Sprintf("settled %s %s %t", s.Delivery.ID(), s.Verdict.Action, s.Err == nil)
		}))
	app.Register(db)
	pid := os.Getpid()
	err = core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[map[string]int]) error {
		id, _ := sqlqueue.RowID(m.Delivery())
		// The work: a few milliseconds on the server, recorded outside the delivery's
		// transaction so that it survives whatever happens to the delivery.
		if _, err := pool.Exec(ctx, `INSERT INTO attempts (id, attempt, pid) SELECT $1, $2, $3 FROM pg_sleep(0.004)`,
			id, m.Attempt(), pid); err != nil {
			return err
		}
		switch crashOutcome(m.Payload["n"]) {
		case "drop":
			return core.Drop()
		case "dead":
			return core.Retry()
		}
		tx, err := postgres.Tx(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO ledger (id, attempt, pid) VALUES ($1, $2, $3)`, id, m.Attempt(), pid)
		return err
	}, append(leaseFor(formName, 2*time.Second), core.Workers(8), core.DeadLetterAfter(2, "jobs_dead"), sqlqueue.Transactional(),
		sqlqueue.BatchSize(16), sqlqueue.PollInterval(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Run(context.Background()); err != nil { // until SIGTERM (or SIGKILL)
		t.Fatal(err)
	}
	close(lines)
	<-written
}

// consumer is one running consumer process.
type consumer struct {
	cmd   *exec.Cmd
	lines chan string
}

func startConsumer(t *testing.T, e *env, form string) *consumer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashFormEnv+"="+form, crashSchemaEnv+"="+e.schema)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &consumer{cmd: cmd, lines: make(chan string, crashRows*4)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "settled ") {
				c.lines <- l
			}
		}
	}()
	return c
}

// next waits for the consumer's next settlement line; ok is false when it exited.
func (c *consumer) next(t *testing.T) (string, bool) {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(waitTimeout):
		t.Fatalf("the consumer settled nothing for %v", waitTimeout)
	}
	return "", false
}

func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts consumer processes")
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.standard("jobs")
			ddl, err := postgres.TableDDL(plainTable("jobs_dead"))
			if err != nil {
				t.Fatal(err)
			}
			e.exec(ddl)
			e.exec(`CREATE TABLE ledger (id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)`)
			e.exec(`CREATE TABLE attempts (id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)`)
			want := map[string][]int64{}
			for n := 1; n <= crashRows; n++ {
				var id int64
				body, _ := json.Marshal(map[string]int{"n": n})
				if err := e.pool.QueryRow(context.Background(), `INSERT INTO jobs (payload) VALUES ($1) RETURNING id`, body).Scan(&id); err != nil {
					t.Fatal(err)
				}
				want[crashOutcome(n)] = append(want[crashOutcome(n)], id)
			}

			// First consumer: killed with SIGKILL mid-flight.
			first := startConsumer(t, e, f.name)
			for seen := 0; seen < crashKillAfter; {
				if _, ok := first.next(t); !ok {
					t.Fatal("the first consumer exited before it was killed")
				}
				seen++
			}
			if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.cmd.Wait()
			for range first.lines {
			}

			// Second consumer: runs until the queue table is empty, then stops gracefully.
			second := startConsumer(t, e, f.name)
			for e.count(`SELECT count(*) FROM jobs`) != 0 {
				if _, ok := second.next(t); !ok {
					t.Fatal("the second consumer exited before the queue was empty")
				}
			}
			if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for range second.lines {
			}
			if err := second.cmd.Wait(); err != nil {
				t.Fatalf("the second consumer did not stop cleanly: %v", err)
			}

			// Every acked row is in the ledger exactly once: the ledger row commits with the
			// settlement, so a second settlement of one row would have written a second one.
			ids := func(sql string) map[int64]int {
				rows, err := e.pool.Query(context.Background(), sql)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				m := map[int64]int{}
				for rows.Next() {
					var id int64
					var n int
					if err := rows.Scan(&id, &n); err != nil {
						t.Fatal(err)
					}
					m[id] = n
				}
				return m
			}
			ledger := ids(`SELECT id, count(*) FROM ledger GROUP BY id`)
			dead := ids(`SELECT id, attempt FROM jobs_dead`)
			exact := func(what string, got map[int64]int, want []int64, ok func(int) bool) {
				if len(got) != len(want) {
					t.Errorf("%s: %d rows; want %d", what, len(got), len(want))
				}
				for _, id := range want {
					if n, in := got[id]; !in || !ok(n) {
						t.Errorf("%s: row %d: %d (present %t)", what, id, n, in)
					}
				}
			}
			exact("ledger (acked once)", ledger, want["ack"], func(n int) bool { return n == 1 })
			exact("dead letter (moved after two attempts or more)", dead, want["dead"], func(att int) bool { return att >= 2 })
			for _, id := range want["drop"] {
				if ledger[id] != 0 {
					t.Errorf("dropped row %d is in the ledger", id)
				}
				if _, in := dead[id]; in {
					t.Errorf("dropped row %d is in the dead letter", id)
				}
			}
			again := e.count(`SELECT count(*) FROM (SELECT id FROM attempts GROUP BY id HAVING count(DISTINCT pid) = 2) x`)
			procs := e.count(`SELECT count(DISTINCT pid) FROM attempts`)
			if procs != 2 {
				t.Errorf("%d consumer processes worked; want 2", procs)
			}
			t.Logf("%s: %d rows, killed after %d settlements; %d rows were worked by both processes, each settled once",
				f.name, crashRows, crashKillAfter, again)
		})
	}
}
