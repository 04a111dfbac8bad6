package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rabbitmq/amqp091-go"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the settle command once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "settle-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "settle")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("go build: %s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building settle: %v", buildErr)
	}
	return binPath
}

// TestRedriveKilled kills `settle dead redrive --all` with SIGKILL, three times, while it moves
// 1,500 RabbitMQ dead letters, and counts with amqp091-go after each kill: every message is in
// the dead-letter queue or back in its queue (a copy confirmed but not yet acknowledged is in
// both); a last redrive then finishes the job.
func TestRedriveKilled(t *testing.T) {
	f := rabbitFixture(t)
	bin := binary(t)
	const n = 1500
	conn, err := amqp091.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make([]amqp091.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp091.Publishing{MessageId: "k-" + strconv.Itoa(i), Body: []byte(strconv.Itoa(i)), DeliveryMode: amqp091.Persistent,
			Headers: amqpTable(deadHeaders(f.origin, "card processor timeout", 5))}
	}
	publishConfirmed(t, conn, f.args[5], msgs) // --dead's value

	total := func(m map[string]int) (s int) {
		for _, c := range m {
			s += c
		}
		return s
	}
	// Three runs, each killed once it reports its first moved window: the kill lands wherever
	// the next window is (being read, published, confirmed or acknowledged).
	for round := 1; round <= 3; round++ {
		cmd := exec.Command(bin, append([]string{"dead", "redrive", "--all", "-v"}, f.args...)...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		moved := 0
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "redriven ") {
				moved++
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the redrive was not killed mid-way (reported %d moved): %v", round, moved, err)
		}
		back, dead := count(t, conn, f.origin), count(t, conn, f.args[5])
		lost, dups := 0, 0
		for i := range n {
			id := "k-" + strconv.Itoa(i)
			switch {
			case back[id] == 0 && dead[id] == 0:
				lost++
			case back[id]+dead[id] > 1:
				dups++
			}
		}
		t.Logf("round %d, killed mid-redrive: %d back in the queue, %d still dead, %d lost, %d duplicated", round, total(back), total(dead), lost, dups)
		if lost > 0 {
			t.Errorf("round %d: %d messages lost", round, lost)
		}
		if total(dead) == 0 {
			t.Fatalf("round %d: the redrive finished before it was killed", round)
		}
		if dups > 100*round {
			t.Errorf("round %d: %d messages duplicated; at most one window in flight (100) per interruption may be", round, dups)
		}
	}

	// A last run finishes the job.
	out, err := exec.Command(bin, append([]string{"dead", "redrive", "--all"}, f.args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("last redrive: %v\n%s", err, out)
	}
	back, dead := count(t, conn, f.origin), count(t, conn, f.args[5])
	missing := 0
	for i := range n {
		if back["k-"+strconv.Itoa(i)] == 0 {
			missing++
		}
	}
	t.Logf("after a last redrive: %d in the queue (%d distinct), %d dead; %s", total(back), len(back), total(dead), strings.TrimSpace(string(out)))
	if missing > 0 || total(dead) != 0 || total(back) > n+300 {
		t.Errorf("after a last redrive: %d missing from the queue, %d still dead, %d in the queue (n = %d)", missing, total(dead), total(back), n)
	}
}

// count reads every message of queue without taking it and counts them by message id.
func count(t *testing.T, conn *amqp091.Connection, queue string) map[string]int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	out := map[string]int{}
	for {
		m, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out[m.MessageId]++
	}
}
