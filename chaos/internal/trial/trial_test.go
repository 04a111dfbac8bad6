package trial

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/chaos"
)

// TestKillLoopOnSQLite runs one small trial end to end: the real worker binary on a SQLite
// file, killed twice mid-drain, the ledger and the table checked afterwards. (Two kills cannot
// push a row past the cap of 3, so the trial must pass outright.)
func TestKillLoopOnSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the worker binary")
	}
	dir := t.TempDir()
	worker := filepath.Join(dir, "chaos-worker")
	if out, err := exec.Command("go", "build", "-o", worker, "../../cmd/chaos-worker").CombinedOutput(); err != nil {
		t.Fatalf("building the worker: %v\n%s", err, out)
	}
	p := Bounded
	p.Messages, p.Drain = 60, 30*time.Second
	var log bytes.Buffer
	env, err := NewEnv(filepath.Join(dir, "run"), worker, "", p, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	tr := sqlTrial("kill", "sqlite", "lease", Scenario{Messages: -1, FaultCount: 2, Faults: []Fault{Kill}, Transactional: true,
		Mix: "ack=4,drop=1,retry=1,retry_after=1,fail=1,side=2,side_drop=1,side_retry=1", Work: 20 * time.Millisecond}, nil)
	rows := Run(context.Background(), env, []*Trial{tr})
	row := rows[0]
	if row.Status != chaos.StatusPass {
		var b bytes.Buffer
		chaos.WriteTable(&b, rows)
		t.Fatalf("status %s: %s\n%s\n%s", row.Status, row.Note, b.String(), log.String())
	}
	if row.Result.Messages != 60 || row.Result.Faults != 2 || row.Result.Runs < 60 {
		t.Fatalf("messages %d, faults %d, runs %d; want 60, 2, at least 60", row.Result.Messages, row.Result.Faults, row.Result.Runs)
	}
}

func TestVerdictFollowsTheMark(t *testing.T) {
	failed := &chaos.Result{}
	failed.Add(chaos.Stall, "", "no settlement for 9s")
	mark := &Mark{Issue: 14, Reason: "stalls", Cats: []chaos.Category{chaos.Stall}}
	for _, c := range []struct {
		res  *chaos.Result
		m    *Mark
		want chaos.Status
	}{
		{&chaos.Result{}, nil, chaos.StatusPass},
		{failed, nil, chaos.StatusFail},
		{failed, mark, chaos.StatusXFail},
		{&chaos.Result{}, mark, chaos.StatusXPass},
		{&chaos.Result{}, &Mark{Issue: 14, Intermittent: true, Cats: mark.Cats}, chaos.StatusPass},
		{failed, &Mark{Issue: 14, Cats: []chaos.Category{chaos.Lost}}, chaos.StatusFail},
	} {
		if got, note := verdict(c.res, c.m); got != c.want {
			t.Errorf("verdict(%v, %+v) = %s (%s), want %s", c.res.Failed(), c.m, got, note, c.want)
		}
	}
}
