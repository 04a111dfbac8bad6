package chaos_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/chaos"
)

func TestMixIsDeterministicAndFollowsWeights(t *testing.T) {
	m, err := chaos.ParseMix("ack=3,drop=1", 7)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := chaos.ParseMix("ack=3,drop=1", 7)
	ids := chaos.MessageIDs(4000)
	counts := m.Counts(ids)
	for _, id := range ids {
		if m.Kind(id) != again.Kind(id) {
			t.Fatalf("%s: kind differs between two equal mixes", id)
		}
	}
	if counts[chaos.Ack]+counts[chaos.Drop] != len(ids) {
		t.Fatalf("kinds outside the mix: %v", counts)
	}
	if share := float64(counts[chaos.Drop]) / float64(len(ids)); share < 0.2 || share > 0.3 {
		t.Fatalf("drop share %.2f, want about 0.25", share)
	}
	if got := m.String(); got != "ack=3,drop=1" {
		t.Fatalf("String() = %q", got)
	}
	if w := m.Without(func(k chaos.Kind) bool { return k == chaos.Drop }); w.Has(chaos.Drop) || w.Kind("m-000001") != chaos.Ack {
		t.Fatalf("Without(drop) still has drop: %s", w)
	}
}

func TestParseMixRefusesBadSpecs(t *testing.T) {
	for spec, want := range map[string]string{
		"":           "empty",
		"ack":        "not kind=weight",
		"nope=1":     `unknown message kind "nope"`,
		"ack=-1":     "non-negative integer",
		"ack=0":      "every weight is zero",
		"ack=1,x=ab": "unknown message kind",
	} {
		if _, err := chaos.ParseMix(spec, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMix(%q) = %v, want an error containing %q", spec, err, want)
		}
	}
}

func TestLedgerLinesOfConcurrentWritersStayWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := chaos.OpenLedger(path, "w"+string(rune('a'+w)))
			if err != nil {
				t.Error(err)
				return
			}
			defer l.Close()
			for i := range 200 {
				if err := l.Write(chaos.Entry{Ev: chaos.EvStart, ID: chaos.MessageID(i), Attempt: 1, Err: strings.Repeat("x", 300)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	entries, torn, err := chaos.ReadLedgerFile(path)
	if err != nil || torn != 0 || len(entries) != 800 {
		t.Fatalf("read %d entries, %d torn, err %v; want 800, 0, nil", len(entries), torn, err)
	}
}

func TestReadLedgerCountsATornLastLine(t *testing.T) {
	data := `{"t":1,"ev":"start","id":"m-000001","att":1}` + "\n" + `{"t":2,"ev":"sett`
	entries, torn, err := chaos.ReadLedger(strings.NewReader(data))
	if err != nil || len(entries) != 1 || torn != 1 {
		t.Fatalf("got %d entries, %d torn, %v; want 1, 1, nil", len(entries), torn, err)
	}
	if _, _, err := chaos.ReadLedger(strings.NewReader("garbage\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a bad complete line: err %v, want one naming line 1", err)
	}
}

func TestTailReturnsOnlyCompleteNewLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	tail := chaos.NewTail(path)
	if got, err := tail.Poll(); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	f, _ := os.Create(path)
	defer f.Close()
	f.WriteString(`{"t":1,"ev":"start","id":"a"}` + "\n" + `{"t":2,"ev":"st`)
	if got, _ := tail.Poll(); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("first poll: %+v", got)
	}
	f.WriteString(`art","id":"b"}` + "\n")
	if got, _ := tail.Poll(); len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("second poll: %+v", got)
	}
}

// ledger builds entries for a check: one message's lines at increasing times.
type ledger struct {
	entries []chaos.Entry
	offset  time.Duration
}

func (l *ledger) add(e chaos.Entry) {
	e.At = int64(len(l.entries)+1)*int64(time.Millisecond) + int64(l.offset)
	l.entries = append(l.entries, e)
}

// skip moves the clock of the entries added after it by d.
func (l *ledger) skip(d time.Duration) { l.offset += d }

func (l *ledger) run(who, id string, attempt int, outcome string, ok bool) {
	l.add(chaos.Entry{Ev: chaos.EvStart, Who: who, ID: id, Attempt: attempt})
	l.add(chaos.Entry{Ev: chaos.EvEnd, Who: who, ID: id, Attempt: attempt, Outcome: outcome})
	l.add(chaos.Entry{Ev: chaos.EvSettle, Who: who, ID: id, Attempt: attempt, Outcome: outcome, OK: ok})
}

// parked logs a retry_after of attempt 1 by w1's process 7, whose copy then waits in it.
func parked(l *ledger, id string) {
	l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", PID: 7, ID: id, Attempt: 1})
	l.add(chaos.Entry{Ev: chaos.EvEnd, Who: "w1", PID: 7, ID: id, Attempt: 1, Outcome: "retry_after"})
	l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", PID: 7, ID: id, Attempt: 1, Outcome: "retry_after", OK: true})
}

// forkedCopy logs a run of attempt 1 by w1's process 7 that asked for outcome (settled by a
// copy), then the kill of that process before its settlement's line.
func forkedCopy(l *ledger, id, outcome string) {
	l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", PID: 7, ID: id, Attempt: 1})
	l.add(chaos.Entry{Ev: chaos.EvEnd, Who: "w1", PID: 7, ID: id, Attempt: 1, Outcome: outcome})
	l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
	l.add(chaos.Entry{Ev: chaos.EvReady, Who: "w1", PID: 8})
}

func oneKind(t *testing.T, k chaos.Kind) chaos.Mix {
	m, err := chaos.ParseMix(k.String()+"=1", 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheckFindsEachViolation(t *testing.T) {
	id := "m-000001"
	done := chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Done, Copies: 1, Count: -1}}}
	cases := []struct {
		name  string
		kind  chaos.Kind
		build func(l *ledger)
		snap  chaos.Snapshot
		exp   func(e *chaos.Expect)
		want  []chaos.Category
		// charged: the dead letters accepted with one attempt a crash charged
		charged int
		// forked: the messages accepted as finished by a copy and by its original
		forked int
		// serverMoved: the dead letters accepted as moved by the server at its delivery limit
		serverMoved int
	}{
		{name: "clean ack", kind: chaos.Ack, build: func(l *ledger) { l.run("w1", id, 1, "ack", true) }, snap: done},
		{name: "row gone", kind: chaos.Ack, build: func(l *ledger) { l.run("w1", id, 1, "ack", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}}, want: []chaos.Category{chaos.Lost}},
		{name: "two successful acks", kind: chaos.Ack, build: func(l *ledger) {
			l.run("w1", id, 1, "ack", true)
			l.run("w2", id, 2, "ack", true)
		}, snap: done, want: []chaos.Category{chaos.Double}},
		{name: "ack under a stale lease", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w2", ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 1, Outcome: "ack", OK: true})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w2", ID: id, Attempt: 2, Outcome: "ack"})
		}, snap: done, exp: func(e *chaos.Expect) { e.StrictAttempts = true }, want: []chaos.Category{chaos.Double}},
		{name: "side row twice", kind: chaos.Side, build: func(l *ledger) { l.run("w1", id, 1, "ack", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Done, Copies: 1, SideRows: 2}}},
			exp:  func(e *chaos.Expect) { e.SideRows = true }, want: []chaos.Category{chaos.Double}},
		{name: "side row kept after a drop", kind: chaos.SideDrop, build: func(l *ledger) { l.run("w1", id, 1, "drop", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Done, Copies: 1, SideRows: 1}}},
			exp:  func(e *chaos.Expect) { e.SideRows = true }, want: []chaos.Category{chaos.Double}},
		{name: "dead letter without a count", kind: chaos.Fail, build: func(l *ledger) { l.run("w1", id, 3, "dead_letter", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: -1}}},
			want: []chaos.Category{chaos.NoCount}},
		{name: "dead letter below the cap", kind: chaos.Fail, build: func(l *ledger) { l.run("w1", id, 2, "dead_letter", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 2}}},
			want: []chaos.Category{chaos.NoCount}},
		{name: "ack dead-lettered", kind: chaos.Ack, build: func(l *ledger) { l.run("w1", id, 4, "dead_letter", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			want: []chaos.Category{chaos.Wrong}},
		// killed in its handler at each of the cap's attempts: a crash like a poison pill's,
		// the dead letter is the contract
		{name: "ack killed in its handler three times", kind: chaos.Ack, build: func(l *ledger) {
			for a := 1; a <= 3; a++ {
				l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: a})
			}
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}}},
		// charged an attempt it never reached a handler in, with no crash to charge it: wrong
		{name: "ack charged without a handler", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			want: []chaos.Category{chaos.Wrong}},
		// taken beside a crash (a SIGKILL of its process) and never handed out, then killed in
		// its handler twice: charged once by the crash, as counting at claim does
		{name: "ack charged once beside a crash", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvExit, Who: "w1", Outcome: "self_kill"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}}, charged: 1},
		// the crash came after the attempt it would have to explain: wrong
		{name: "ack charged, the crash later", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			want: []chaos.Category{chaos.Wrong}},
		// charged twice without a handler, crashes or not: wrong
		{name: "ack charged twice beside crashes", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			want: []chaos.Category{chaos.Wrong}},
		// the same ledger on a backend that takes a charged message alone and counts it as its
		// handler starts (SQL): the second kill cut attempt 2 between its count and its
		// handler's first line; one crash each is accepted
		{name: "ack charged twice, counted at start, a kill each", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			exp: func(e *chaos.Expect) { e.ChargePerCrash = true }, charged: 1},
		// counted at start, but one crash for two attempts without a handler: wrong
		{name: "ack charged twice, counted at start, one kill", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 1, Outcome: "retry", OK: true})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			exp: func(e *chaos.Expect) { e.ChargePerCrash = true }, want: []chaos.Category{chaos.Wrong}},
		// a quorum queue (a charge per crash): the handler crashed its process on attempts 1
		// and 3; attempts 2 and 4 waited in windows that died, so the server moved the message
		// at its delivery limit (cap 3: four deliveries), with no count header: accepted
		{name: "ack moved by the server, each delivery accounted", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w2"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w2", ID: id, Attempt: 3})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w2"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: -1, ServerMoved: true}}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.ChargePerCrash = true }, serverMoved: 1},
		// the same where one crash may charge a message only once in all (a classic queue or
		// JetStream): wrong, and the move lacks its count
		{name: "ack moved by the server, one charge allowed", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w2"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w2", ID: id, Attempt: 3})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w2"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: -1, ServerMoved: true}}, AbsentIsSettled: true},
			want: []chaos.Category{chaos.NoCount, chaos.Wrong}},
		// a failing message the server moved though every delivery up to the cap settled and
		// no crash charged one past it: the move lacks its count
		{name: "fail moved by the server without a crash", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 1, "retry", true)
			l.run("w1", id, 2, "retry", true)
			l.run("w1", id, 3, "retry", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: -1, ServerMoved: true}}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.ChargePerCrash = true }, want: []chaos.Category{chaos.NoCount}},
		// a failing message the server moved after a crash charged its delivery past the cap
		{name: "fail moved by the server after a crash", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 1, "retry", true)
			l.run("w1", id, 2, "retry", true)
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w2"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: -1, ServerMoved: true}}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.ChargePerCrash = true }, serverMoved: 1},
		// a dead letter without its count that the server did not move stays wrong
		{name: "fail dead-lettered without its count", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 1, "retry", true)
			l.run("w1", id, 2, "retry", true)
			l.run("w1", id, 3, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: -1}}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.ChargePerCrash = true }, want: []chaos.Category{chaos.NoCount}},
		// a row held by another session is no crash: wrong
		{name: "ack charged beside a locked row", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "lock-row", Phase: "begin"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 3})
			l.run("w1", id, 4, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 4}}},
			want: []chaos.Category{chaos.Wrong}},
		{name: "still queued", kind: chaos.Poison, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Pending, Copies: 1}}}, want: []chaos.Category{chaos.Stuck}},
		{name: "handler runs past the bound", kind: chaos.FailAck, build: func(l *ledger) {
			for a := 1; a <= 6; a++ {
				l.run("w1", id, a, "ack", false)
			}
			l.run("w1", id, 7, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 7}}},
			exp: func(e *chaos.Expect) { e.MaxRuns = 4 }, want: []chaos.Category{chaos.Runs}},
		{name: "broker: acked and gone", kind: chaos.Ack, build: func(l *ledger) { l.run("w1", id, 1, "ack", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}},
		{name: "broker: retry copy lost", kind: chaos.RetryAfter, build: func(l *ledger) { l.run("w1", id, 1, "retry_after", true) },
			snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}, want: []chaos.Category{chaos.Lost}},
		// an in-process delayed copy dies with the process that held it before it was due
		// (at-most-once, documented); one still held long after it was due is lost
		{name: "broker: in-process copy dies with its process", kind: chaos.RetryAfter, build: func(l *ledger) {
			parked(l, id)
			l.add(chaos.Entry{Ev: chaos.EvExit, Who: "w1", PID: 7, Outcome: "self_kill"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.InProcessDelay = 300 * time.Millisecond }},
		{name: "broker: in-process copy's worker restarted before it was due", kind: chaos.RetryAfter, build: func(l *ledger) {
			parked(l, id)
			l.add(chaos.Entry{Ev: chaos.EvReady, Who: "w1", PID: 8})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.InProcessDelay = 300 * time.Millisecond }},
		{name: "broker: in-process copy lost while its process ran on", kind: chaos.RetryAfter, build: func(l *ledger) {
			parked(l, id)
			l.skip(5 * time.Second)
			l.add(chaos.Entry{Ev: chaos.EvExit, Who: "w1", PID: 7, Outcome: "self_kill"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.InProcessDelay = 300 * time.Millisecond }, want: []chaos.Category{chaos.Lost}},
		{name: "broker: another process's exit does not excuse a copy", kind: chaos.RetryAfter, build: func(l *ledger) {
			parked(l, id)
			l.add(chaos.Entry{Ev: chaos.EvExit, Who: "w2", PID: 9, Outcome: "self_kill"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true},
			exp: func(e *chaos.Expect) { e.InProcessDelay = 300 * time.Millisecond }, want: []chaos.Category{chaos.Lost}},
		{name: "broker: a server-held copy is not excused by the exit", kind: chaos.RetryAfter, build: func(l *ledger) {
			parked(l, id)
			l.add(chaos.Entry{Ev: chaos.EvExit, Who: "w1", PID: 7, Outcome: "self_kill"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}, want: []chaos.Category{chaos.Lost}},
		{name: "broker: dead letter published twice after a lost ack", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 3, "dead_letter", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 2, Count: 3}}, AbsentIsSettled: true}},
		{name: "broker: an unconfirmed ack lost, the message delivered again", kind: chaos.Ack, build: func(l *ledger) {
			l.run("w1", id, 2, "ack", true)
			l.run("w1", id, 2, "ack", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true, AcksUnconfirmed: true}},
		{name: "broker: a dead letter's original ack lost, moved again at claim", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 3, "dead_letter", true)
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 4, Outcome: "dead_letter", OK: true})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 2, Count: 4}}, AbsentIsSettled: true, AcksUnconfirmed: true}},
		{name: "broker: a dead letter's original ack lost, moved again at the same attempt", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 3, "dead_letter", true)
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 3, Outcome: "dead_letter", OK: true})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 2, Count: 3}}, AbsentIsSettled: true, AcksUnconfirmed: true}},
		{name: "broker: confirmed acks, a dead letter moved twice at the same attempt", kind: chaos.Fail, build: func(l *ledger) {
			l.run("w1", id, 3, "dead_letter", true)
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 3, Outcome: "dead_letter", OK: true})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 2, Count: 3}}, AbsentIsSettled: true}, want: []chaos.Category{chaos.Double}},
		{name: "broker: confirmed acks, the message settled twice", kind: chaos.Ack, build: func(l *ledger) {
			l.run("w1", id, 2, "ack", true)
			l.run("w1", id, 2, "ack", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}, want: []chaos.Category{chaos.Double}},
		{name: "broker: unconfirmed acks, two settlements with no delivery between", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 1, Outcome: "ack", OK: true})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", ID: id, Attempt: 1, Outcome: "ack", OK: true})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true, AcksUnconfirmed: true}, want: []chaos.Category{chaos.Double}},
		// a retry_after copy confirmed, the process killed before the original's ack: the
		// original comes back (charged by the kill, attempt 3) and the copy too (attempt 2);
		// both finish, each under its own count
		{name: "broker: a copy and its redelivered original both finish", kind: chaos.RetryAfter, build: func(l *ledger) {
			forkedCopy(l, id, "retry_after")
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", PID: 8, ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvReady, Who: "w1", PID: 9})
			l.run("w1", id, 3, "ack", true)
			l.run("w1", id, 2, "ack", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true, AcksUnconfirmed: true},
			exp: func(e *chaos.Expect) { e.StrictAttempts = true; e.CopyOutcomes = map[string]bool{"retry_after": true} }, forked: 1},
		{name: "broker: no copy outcome, no fork", kind: chaos.RetryAfter, build: func(l *ledger) {
			forkedCopy(l, id, "retry_after")
			l.run("w1", id, 3, "ack", true)
			l.run("w1", id, 2, "ack", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true, AcksUnconfirmed: true},
			exp: func(e *chaos.Expect) { e.StrictAttempts = true }, want: []chaos.Category{chaos.Double}},
		{name: "broker: a copy settled before the kill forks nothing", kind: chaos.RetryAfter, build: func(l *ledger) {
			parked(l, id)
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.run("w1", id, 3, "ack", true)
			l.run("w1", id, 2, "ack", true)
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true, AcksUnconfirmed: true},
			exp:  func(e *chaos.Expect) { e.StrictAttempts = true; e.CopyOutcomes = map[string]bool{"retry_after": true} },
			want: []chaos.Category{chaos.Double}},
		{name: "broker: one fork, three finals", kind: chaos.RetryAfter, build: func(l *ledger) {
			forkedCopy(l, id, "retry_after")
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", PID: 9, ID: id, Attempt: 3})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", PID: 9, ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", PID: 9, ID: id, Attempt: 3, Outcome: "ack", OK: true})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", PID: 9, ID: id, Attempt: 2, Outcome: "ack", OK: true})
			l.add(chaos.Entry{Ev: chaos.EvSettle, Who: "w1", PID: 9, ID: id, Attempt: 2, Outcome: "ack", OK: true})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true, AcksUnconfirmed: true},
			exp:  func(e *chaos.Expect) { e.StrictAttempts = true; e.CopyOutcomes = map[string]bool{"retry_after": true} },
			want: []chaos.Category{chaos.Double}},
		{name: "broker: a dead letter confirmed into the queue a fault deleted", kind: chaos.Fail, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "begin"})
			l.run("w1", id, 3, "dead_letter", true)
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "deleted"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "end"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}},
		{name: "broker: a dead letter lost well after a fault deleted its queue", kind: chaos.Fail, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "begin"})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "deleted"})
			l.skip(time.Second)
			l.run("w1", id, 3, "dead_letter", true)
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "end"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}, want: []chaos.Category{chaos.Lost}},
		{name: "broker: an ack missing during a delete-dead fault is still lost", kind: chaos.Ack, build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "begin"})
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 1})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "delete-dead", Phase: "deleted"})
		}, snap: chaos.Snapshot{Messages: map[string]chaos.Observed{}, AbsentIsSettled: true}, want: []chaos.Category{chaos.Lost}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l ledger
			l.add(chaos.Entry{Ev: chaos.EvSeeded})
			c.build(&l)
			l.add(chaos.Entry{Ev: chaos.EvDrained})
			exp := chaos.Expect{IDs: []string{id}, Mix: oneKind(t, c.kind), Cap: 3}
			if c.exp != nil {
				c.exp(&exp)
			}
			res := chaos.Check(l.entries, c.snap, exp)
			if got := res.Failed(); !slices.Equal(got, c.want) {
				t.Fatalf("failed categories %v, want %v; violations %v", got, c.want, res.Violations)
			}
			if res.Charged != c.charged {
				t.Fatalf("Charged = %d, want %d", res.Charged, c.charged)
			}
			if res.Forked != c.forked {
				t.Fatalf("Forked = %d, want %d", res.Forked, c.forked)
			}
			if res.ServerMoved != c.serverMoved {
				t.Fatalf("ServerMoved = %d, want %d", res.ServerMoved, c.serverMoved)
			}
		})
	}
}

func TestCheckMeasuresStallsAndRecoveryOutsideBlockingFaults(t *testing.T) {
	ms := int64(time.Millisecond)
	ids := chaos.MessageIDs(3)
	entries := []chaos.Entry{
		{At: 0, Ev: chaos.EvSeeded},
		{At: 100 * ms, Ev: chaos.EvSettle, ID: ids[0], Outcome: "ack", OK: true},
		// the server is down for 5 s: not a stall
		{At: 200 * ms, Ev: chaos.EvFault, Fault: "restart", Phase: "begin", Detail: "crash", Blocks: true},
		{At: 5200 * ms, Ev: chaos.EvFault, Fault: "restart", Phase: "end", Detail: "crash", Blocks: true},
		{At: 5500 * ms, Ev: chaos.EvSettle, ID: ids[1], Outcome: "ack", OK: true},
		// a locked row holds everything up for 4 s: a stall
		{At: 6000 * ms, Ev: chaos.EvFault, Fault: "lock-row", Phase: "begin", Detail: "row 3"},
		{At: 9500 * ms, Ev: chaos.EvSettle, ID: ids[2], Outcome: "ack", OK: true},
		{At: 9600 * ms, Ev: chaos.EvDrained},
	}
	done := chaos.Snapshot{Messages: map[string]chaos.Observed{}}
	for _, id := range ids {
		done.Messages[id] = chaos.Observed{Where: chaos.Done, Copies: 1}
	}
	res := chaos.Check(entries, done, chaos.Expect{IDs: ids, Mix: oneKind(t, chaos.Ack), StallBound: 3 * time.Second, RecoverBound: 200 * time.Millisecond})
	if res.MaxGap != 4*time.Second {
		t.Errorf("MaxGap %v, want 4s (5.5 s → 9.5 s; the restart's 5 s do not count)", res.MaxGap)
	}
	if res.MaxRecover != 300*time.Millisecond {
		t.Errorf("MaxRecover %v, want 300ms (restart end 5.2 s → settlement 5.5 s)", res.MaxRecover)
	}
	if got := res.Failed(); !slices.Equal(got, []chaos.Category{chaos.Recover, chaos.Stall}) {
		t.Errorf("failed %v, want recover and stall", got)
	}
}

// A message whose settlement failed is held back for a backoff: while every message that
// remained had a failed settlement there was nothing to settle, which is not a stall; while a
// message without one waited, it is.
func TestCheckExcusesOnlyHeldBackMessages(t *testing.T) {
	ms := int64(time.Millisecond)
	ids := chaos.MessageIDs(3)
	entries := []chaos.Entry{
		{At: 0, Ev: chaos.EvSeeded},
		{At: 100 * ms, Ev: chaos.EvSettle, ID: ids[0], Outcome: "ack", OK: true},
		{At: 200 * ms, Ev: chaos.EvSettle, ID: ids[1], Outcome: "ack", OK: false, Err: "refused"},
		// ids[2] has no failed settlement: 200 ms → 4.2 s is held up, a stall of 4 s
		{At: 4200 * ms, Ev: chaos.EvSettle, ID: ids[2], Outcome: "ack", OK: true},
		// only ids[1] remains, held back: 4.2 s → 11 s is its backoff
		{At: 11000 * ms, Ev: chaos.EvSettle, ID: ids[1], Outcome: "dead_letter", OK: true},
		{At: 11100 * ms, Ev: chaos.EvDrained},
	}
	done := chaos.Snapshot{Messages: map[string]chaos.Observed{}}
	for _, id := range ids {
		done.Messages[id] = chaos.Observed{Where: chaos.Done, Copies: 1}
	}
	res := chaos.Check(entries, done, chaos.Expect{IDs: ids, Mix: oneKind(t, chaos.Ack), StallBound: 3 * time.Second})
	if res.MaxGap != 4100*time.Millisecond {
		t.Errorf("MaxGap %v, want 4.1s (100 ms → 4.2 s, while a message without a failed settlement waited)", res.MaxGap)
	}
}

func TestWriteTableShowsEveryTrialAndWhyOneFailed(t *testing.T) {
	res := &chaos.Result{Messages: 10, Faults: 3, DupRuns: 2}
	res.Add(chaos.Lost, "m-000004", "gone")
	var b bytes.Buffer
	chaos.WriteTable(&b, []chaos.Row{
		{Trial: "kill", Backend: "postgres", Form: "lease", Result: &chaos.Result{Messages: 10}, Status: chaos.StatusPass},
		{Trial: "poison", Backend: "sqlite", Form: "lease", Result: res, Status: chaos.StatusFail, Note: "failed: lost×1"},
	})
	out := b.String()
	for _, want := range []string{"kill", "postgres", "PASS", "poison", "FAIL", "lost m-000004: gone"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
