// Package opstest is the conformance suite of ops.Queue: every backend runs it from its own
// tests (sqlqueue on each dialect and table shape, RabbitMQ, JetStream, the in-memory
// coretest broker), filling and reading its queues with its own client, so that every backend
// means the same thing by stats, list, show, redrive and purge.
package opstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/ops"
)

// Backend is one fresh, empty target of the suite: the ops.Queue under test, and the backend's
// own client to fill the queue and its dead letter and read them back.
type Backend struct {
	// Queue is the implementation under test, over an empty queue and dead letter.
	Queue ops.Queue
	// Origin is the queue's name as dead letters record it (the settle-origin header).
	Origin string
	// AddDead stores a dead letter the way the backend's dead-lettering does (payload, and
	// headers that include the dead-letter headers), and returns its id.
	AddDead func(t testing.TB, payload []byte, headers map[string]string) string
	// AddReady publishes a message to the queue, ready now.
	AddReady func(t testing.TB, payload []byte)
	// Ready reads the queue's ready messages, oldest first, leaving them in place.
	Ready func(t testing.TB) []Message
	// Dead reads the payloads in the dead letter, oldest first, leaving them in place.
	Dead func(t testing.TB) [][]byte
}

// Message is a message of the queue as the backend's own client reads it.
type Message struct {
	Payload []byte
	// Attempts is the number of deliveries the backend has counted for the message (an SQL
	// attempt column, a settle-retry-count header; 0 for a fresh message).
	Attempts int
}

// Features says what a backend's Stats measures; the suite checks a measured figure's value,
// and that an unmeasured one is listed in Stats.Unmeasured.
type Features struct {
	// Ready, Dead: the counts of ready messages and dead letters.
	Ready, Dead bool
	// OldestReady: the age of the oldest ready message.
	OldestReady bool
	// CannotKeepAttempts: the backend counts deliveries per message on the server, so a
	// redriven copy starts again; Redrive must refuse RedriveOptions.KeepAttempts, changing
	// nothing.
	CannotKeepAttempts bool
}

// Run runs the suite; newBackend gives each subtest a fresh, empty Backend (a table, group or
// queue of its own) and cleans it up with t.Cleanup.
func Run(t *testing.T, f Features, newBackend func(t *testing.T) Backend) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, f, newBackend(t)) })
	t.Run("Stats", func(t *testing.T) { testStats(t, f, newBackend(t)) })
	t.Run("ListPages", func(t *testing.T) { testListPages(t, newBackend(t)) })
	t.Run("ListFilter", func(t *testing.T) { testListFilter(t, newBackend(t)) })
	t.Run("GetDead", func(t *testing.T) { testGetDead(t, newBackend(t)) })
	t.Run("RedriveIDs", func(t *testing.T) { testRedriveIDs(t, newBackend(t), false) })
	t.Run("RedriveKeepAttempts", func(t *testing.T) {
		if f.CannotKeepAttempts {
			testKeepRefused(t, newBackend(t))
		} else {
			testRedriveIDs(t, newBackend(t), true)
		}
	})
	t.Run("RedriveUnknownID", func(t *testing.T) { testRedriveUnknown(t, newBackend(t)) })
	t.Run("RedriveFilter", func(t *testing.T) { testRedriveFilter(t, newBackend(t)) })
	t.Run("RedriveAll", func(t *testing.T) { testRedriveAll(t, newBackend(t)) })
	t.Run("NoSelection", func(t *testing.T) { testNoSelection(t, newBackend(t)) })
	t.Run("PurgeIDs", func(t *testing.T) { testPurgeIDs(t, newBackend(t)) })
	t.Run("PurgeFilter", func(t *testing.T) { testPurgeFilter(t, newBackend(t)) })
	t.Run("PurgeAll", func(t *testing.T) { testPurgeAll(t, newBackend(t)) })
}

// UnknownID is an id the suite expects no backend to have given a dead letter.
const UnknownID = "987654321"

var deadAt = time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)

// deadHeaders are the headers of the i-th dead letter: count 5, the given origin, a minute
// apart, with reason.
func deadHeaders(i int, origin, reason string) map[string]string {
	h := core.DeadLetterInfo{Count: 5, Origin: origin, At: deadAt.Add(time.Duration(i) * time.Minute), Error: reason}.Headers()
	h["trace"] = "t-" + strconv.Itoa(i)
	return h
}

func payload(i int) []byte { return []byte(fmt.Sprintf(`{"refund":%d}`, i)) }

// fill stores n dead letters from b.Origin with the given reasons (cycled) and returns their ids.
func fill(t *testing.T, b Backend, n int, reasons ...string) []string {
	t.Helper()
	if len(reasons) == 0 {
		reasons = []string{"card processor timeout"}
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = b.AddDead(t, payload(i), deadHeaders(i, b.Origin, reasons[i%len(reasons)]))
	}
	return ids
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func testEmpty(t *testing.T, f Features, b Backend) {
	s, err := b.Queue.Stats(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Queue == "" {
		t.Error("Stats.Queue is empty")
	}
	if s.At.IsZero() {
		t.Error("Stats.At is zero")
	}
	checkFigure(t, s, ops.FigureReady, f.Ready, s.Ready, 0)
	checkFigure(t, s, ops.FigureDead, f.Dead, s.Dead, 0)
	if f.OldestReady && s.Measured(ops.FigureOldestReady) && s.OldestReady != 0 {
		t.Errorf("oldest ready age of an empty queue: %v, want 0", s.OldestReady)
	}
	p, err := b.Queue.ListDead(ctx(t), ops.Filter{}, ops.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 0 || p.Next != "" {
		t.Errorf("empty dead letter listed %d items, next %q", len(p.Items), p.Next)
	}
}

func checkFigure(t *testing.T, s ops.Stats, fig ops.Figure, want bool, got, value int64) {
	t.Helper()
	switch {
	case want && !s.Measured(fig):
		t.Errorf("%s not measured: %+v", fig, s.Unmeasured)
	case !want && s.Measured(fig):
		t.Errorf("%s is measured (%d), but the backend declared it cannot be", fig, got)
	case want && got != value:
		t.Errorf("%s = %d, want %d", fig, got, value)
	}
}

func testStats(t *testing.T, f Features, b Backend) {
	for i := range 3 {
		b.AddReady(t, payload(100+i))
	}
	fill(t, b, 2)
	s, err := b.Queue.Stats(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkFigure(t, s, ops.FigureReady, f.Ready, s.Ready, 3)
	checkFigure(t, s, ops.FigureDead, f.Dead, s.Dead, 2)
	if s.DeadLetter == "" {
		t.Error("Stats.DeadLetter is empty, though the target names one")
	}
	if f.OldestReady {
		if !s.Measured(ops.FigureOldestReady) {
			t.Errorf("oldest ready not measured: %+v", s.Unmeasured)
		} else if s.OldestReady < 0 || s.OldestReady > time.Hour {
			t.Errorf("oldest ready age %v of messages published just now", s.OldestReady)
		}
	} else if s.Measured(ops.FigureOldestReady) {
		t.Error("oldest ready is measured, but the backend declared it cannot be")
	}
}

func listAll(t *testing.T, q ops.Queue, f ops.Filter, limit int) ([]ops.DeadLetter, int) {
	t.Helper()
	var out []ops.DeadLetter
	pages := 0
	p := ops.Page{Limit: limit}
	for {
		page, err := q.ListDead(ctx(t), f, p)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Items) > limit {
			t.Fatalf("page of %d items, limit %d", len(page.Items), limit)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out, pages
		}
		if pages > 100 {
			t.Fatal("listing does not end")
		}
		p.After = page.Next
	}
}

func ids(ds []ops.DeadLetter) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func testListPages(t *testing.T, b Backend) {
	want := fill(t, b, 5, "r0", "r1", "r2", "r3", "r4")
	got, pages := listAll(t, b.Queue, ops.Filter{}, 2)
	if !slices.Equal(ids(got), want) {
		t.Fatalf("listed %v, want %v (oldest first)", ids(got), want)
	}
	if pages < 3 {
		t.Errorf("5 dead letters by 2 came in %d pages", pages)
	}
	for i, d := range got {
		checkDead(t, b, d, i, fmt.Sprintf("r%d", i))
	}
}

// checkDead checks that d is the i-th dead letter the suite stored, with reason.
func checkDead(t *testing.T, b Backend, d ops.DeadLetter, i int, reason string) {
	t.Helper()
	if !bytes.Equal(d.Payload, payload(i)) {
		t.Errorf("dead letter %s: payload %q, want %q", d.ID, d.Payload, payload(i))
	}
	if d.Count != 5 || d.Origin != b.Origin || d.Reason != reason {
		t.Errorf("dead letter %s: count %d, origin %q, reason %q; want 5, %q, %q", d.ID, d.Count, d.Origin, d.Reason, b.Origin, reason)
	}
	if at := deadAt.Add(time.Duration(i) * time.Minute); !d.DeadAt.Equal(at) {
		t.Errorf("dead letter %s: dead at %v, want %v", d.ID, d.DeadAt, at)
	}
	if d.Headers["trace"] != "t-"+strconv.Itoa(i) {
		t.Errorf("dead letter %s: headers %v lack the message's own trace=t-%d", d.ID, d.Headers, i)
	}
}

func testListFilter(t *testing.T, b Backend) {
	all := fill(t, b, 5, "card processor timeout", "card closed")
	got, _ := listAll(t, b.Queue, ops.Filter{Reason: "timeout"}, 2)
	if want := []string{all[0], all[2], all[4]}; !slices.Equal(ids(got), want) {
		t.Errorf("reason~timeout listed %v, want %v", ids(got), want)
	}
	got, _ = listAll(t, b.Queue, ops.Filter{DeadAfter: deadAt.Add(3 * time.Minute)}, 10)
	if want := all[3:]; !slices.Equal(ids(got), want) {
		t.Errorf("dead after the 4th listed %v, want %v", ids(got), want)
	}
	got, _ = listAll(t, b.Queue, ops.Filter{Origin: "elsewhere"}, 10)
	if len(got) != 0 {
		t.Errorf("origin=elsewhere listed %v, want none", ids(got))
	}
}

func testGetDead(t *testing.T, b Backend) {
	all := fill(t, b, 3, "r0", "r1", "r2")
	d, err := b.Queue.GetDead(ctx(t), all[1])
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != all[1] {
		t.Errorf("GetDead(%s) returned %s", all[1], d.ID)
	}
	checkDead(t, b, d, 1, "r1")
	_, err = b.Queue.GetDead(ctx(t), UnknownID)
	var nf *ops.NotFoundError
	if !errors.Is(err, ops.ErrNotFound) || !errors.As(err, &nf) || !slices.Equal(nf.IDs, []string{UnknownID}) {
		t.Errorf("GetDead(unknown) = %v, want a *NotFoundError naming %s", err, UnknownID)
	}
}

func payloads(ms []Message) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m.Payload
	}
	return out
}

func sameSet(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, bytes.Compare)
	slices.SortFunc(y, bytes.Compare)
	return slices.EqualFunc(x, y, bytes.Equal)
}

func testRedriveIDs(t *testing.T, b Backend, keep bool) {
	all := fill(t, b, 3)
	n, err := b.Queue.Redrive(ctx(t), ops.IDs(all[0], all[2]), ops.RedriveOptions{KeepAttempts: keep})
	if err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v; want 2", n, err)
	}
	back := b.Ready(t)
	if !sameSet(payloads(back), [][]byte{payload(0), payload(2)}) {
		t.Fatalf("the queue holds %q after redriving dead letters 0 and 2", payloads(back))
	}
	want := 0
	if keep {
		want = 5
	}
	for _, m := range back {
		if m.Attempts != want {
			t.Errorf("redriven %s has %d attempts, want %d (KeepAttempts %v)", m.Payload, m.Attempts, want, keep)
		}
	}
	if left := b.Dead(t); !sameSet(left, [][]byte{payload(1)}) {
		t.Errorf("the dead letter holds %q, want only dead letter 1", left)
	}
	if _, err := b.Queue.GetDead(ctx(t), all[0]); !errors.Is(err, ops.ErrNotFound) {
		t.Errorf("GetDead of a redriven dead letter: %v, want ErrNotFound", err)
	}
}

func testKeepRefused(t *testing.T, b Backend) {
	all := fill(t, b, 2)
	n, err := b.Queue.Redrive(ctx(t), ops.IDs(all[0]), ops.RedriveOptions{KeepAttempts: true})
	if err == nil || n != 0 {
		t.Fatalf("Redrive keeping attempts on a backend that cannot = %d, %v; want an error", n, err)
	}
	if got := b.Ready(t); len(got) != 0 || len(b.Dead(t)) != 2 {
		t.Errorf("a refused redrive changed things: %d in the queue, %d dead", len(got), len(b.Dead(t)))
	}
}

func testRedriveUnknown(t *testing.T, b Backend) {
	all := fill(t, b, 2)
	n, err := b.Queue.Redrive(ctx(t), ops.IDs(all[0], UnknownID), ops.RedriveOptions{})
	if !errors.Is(err, ops.ErrNotFound) || n != 0 {
		t.Fatalf("Redrive with an unknown id = %d, %v; want 0 and ErrNotFound", n, err)
	}
	if got := b.Ready(t); len(got) != 0 {
		t.Errorf("a refused redrive moved %q", payloads(got))
	}
	if left := b.Dead(t); len(left) != 2 {
		t.Errorf("the dead letter holds %d after a refused redrive, want 2", len(left))
	}
	n, err = b.Queue.Purge(ctx(t), ops.IDs(UnknownID))
	if !errors.Is(err, ops.ErrNotFound) || n != 0 {
		t.Errorf("Purge of an unknown id = %d, %v; want 0 and ErrNotFound", n, err)
	}
}

func testRedriveFilter(t *testing.T, b Backend) {
	fill(t, b, 4, "card processor timeout", "card closed")
	n, err := b.Queue.Redrive(ctx(t), ops.Matching(ops.Filter{Reason: "timeout"}), ops.RedriveOptions{})
	if err != nil || n != 2 {
		t.Fatalf("Redrive(reason~timeout) = %d, %v; want 2", n, err)
	}
	if got := payloads(b.Ready(t)); !sameSet(got, [][]byte{payload(0), payload(2)}) {
		t.Errorf("the queue holds %q, want dead letters 0 and 2", got)
	}
	if left := b.Dead(t); !sameSet(left, [][]byte{payload(1), payload(3)}) {
		t.Errorf("the dead letter holds %q, want 1 and 3", left)
	}
}

func testRedriveAll(t *testing.T, b Backend) {
	fill(t, b, 3)
	n, err := b.Queue.Redrive(ctx(t), ops.All(), ops.RedriveOptions{})
	if err != nil || n != 3 {
		t.Fatalf("Redrive(all) = %d, %v; want 3", n, err)
	}
	if got := payloads(b.Ready(t)); !sameSet(got, [][]byte{payload(0), payload(1), payload(2)}) {
		t.Errorf("the queue holds %q after redriving all", got)
	}
	if left := b.Dead(t); len(left) != 0 {
		t.Errorf("the dead letter still holds %q", left)
	}
}

func testNoSelection(t *testing.T, b Backend) {
	fill(t, b, 1)
	for name, s := range map[string]ops.Selection{
		"zero":  {},
		"mixed": {IDs: []string{"1"}, All: true},
	} {
		if _, err := b.Queue.Purge(ctx(t), s); !errors.Is(err, ops.ErrNoSelection) {
			t.Errorf("Purge(%s selection) = %v, want ErrNoSelection", name, err)
		}
		if _, err := b.Queue.Redrive(ctx(t), s, ops.RedriveOptions{}); !errors.Is(err, ops.ErrNoSelection) {
			t.Errorf("Redrive(%s selection) = %v, want ErrNoSelection", name, err)
		}
	}
	if left := b.Dead(t); len(left) != 1 {
		t.Errorf("refused selections changed the dead letter: %d left", len(left))
	}
}

func testPurgeIDs(t *testing.T, b Backend) {
	all := fill(t, b, 3)
	n, err := b.Queue.Purge(ctx(t), ops.IDs(all[1]))
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	if left := b.Dead(t); !sameSet(left, [][]byte{payload(0), payload(2)}) {
		t.Errorf("the dead letter holds %q, want 0 and 2", left)
	}
	if got := b.Ready(t); len(got) != 0 {
		t.Errorf("purge moved %q to the queue", payloads(got))
	}
}

func testPurgeFilter(t *testing.T, b Backend) {
	fill(t, b, 4, "card processor timeout", "card closed")
	n, err := b.Queue.Purge(ctx(t), ops.Matching(ops.Filter{Reason: "closed"}))
	if err != nil || n != 2 {
		t.Fatalf("Purge(reason~closed) = %d, %v; want 2", n, err)
	}
	if left := b.Dead(t); !sameSet(left, [][]byte{payload(0), payload(2)}) {
		t.Errorf("the dead letter holds %q, want 0 and 2", left)
	}
}

func testPurgeAll(t *testing.T, b Backend) {
	fill(t, b, 3)
	b.AddReady(t, payload(100))
	n, err := b.Queue.Purge(ctx(t), ops.All())
	if err != nil || n != 3 {
		t.Fatalf("Purge(all) = %d, %v; want 3", n, err)
	}
	if left := b.Dead(t); len(left) != 0 {
		t.Errorf("the dead letter still holds %q", left)
	}
	if got := payloads(b.Ready(t)); !sameSet(got, [][]byte{payload(100)}) {
		t.Errorf("purging the dead letter changed the queue: %q", got)
	}
}
