package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Category names a kind of violation the checker (or the driver) finds.
type Category string

// The checker's categories; the driver adds its own (a plugin process left behind, a second
// process not refused, an error of the harness itself).
const (
	// Lost: a message neither acknowledged, dropped nor dead-lettered, nor waiting anywhere
	// (or a side row missing for an acknowledged message).
	Lost Category = "lost"
	// Double: a message finished twice — two successful final settlements, a final settlement
	// of an attempt older than one already started (a stale lease or claim), two copies held,
	// a side row written twice or kept for a message that was not acknowledged.
	Double Category = "double"
	// Stuck: a message still waiting when the bounded drain ended.
	Stuck Category = "stuck"
	// Wrong: a message that ended otherwise than its kind says (an ack in the dead letter), or a
	// message the trial never seeded.
	Wrong Category = "wrong"
	// NoCount: a dead letter without its count, or with a count below the cap.
	NoCount Category = "nocount"
	// Stall: no settlement for longer than the bound while messages remained.
	Stall Category = "stall"
	// Recover: a fault after which the first settlement came later than the bound.
	Recover Category = "recover"
	// Runs: a message whose handler ran more often than the bound.
	Runs Category = "runs"
)

// Expect is what a trial seeded and what its backend must show.
type Expect struct {
	IDs []string
	Mix Mix
	// Cap is the DeadLetterAfter cap; a dead letter's count must reach it.
	Cap int
	// SideRows checks the side rows of the transactional kinds.
	SideRows bool
	// StrictAttempts says attempts are counted when a delivery is taken (lease, advisory,
	// quorum), so a final settlement of an attempt older than one already started was made
	// under a lease or claim that was no longer current.
	StrictAttempts bool
	// StallBound is the longest stretch without a successful settlement while messages
	// remained, not counting blocking faults (0: unchecked).
	StallBound time.Duration
	// RecoverBound is the longest time from a fault's end to the next successful settlement
	// (0: unchecked).
	RecoverBound time.Duration
	// MaxRuns is the most handler starts one message may have (0: unchecked).
	MaxRuns int
	// InProcessDelay, when set, says that a retry_after copy waits this long in the process
	// that settled its original (RabbitMQ without a delay backend): at-most-once, as
	// documented, so a copy lost because that process died while it waited is allowed.
	InProcessDelay time.Duration
	// CopyOutcomes names the outcomes the backend settles by publishing a copy of the message
	// and then acknowledging the original (RabbitMQ: dead letters, server-held retry_after
	// copies, a classic queue's counted retries; NATS: dead letters). A run that asked for one
	// of them and whose settlement never succeeded (its process died, or the original's
	// acknowledgement failed, after the broker may have confirmed the copy) forks the message:
	// the copy and the redelivered original both live on, at-least-once as documented (see
	// forks).
	CopyOutcomes map[string]bool
	// ChargePerCrash says that a crash or fault may charge a message one attempt that no handler
	// started, each crash at most once, and that several crashes may charge the same message
	// so: the SQL forms take a message a crash charged while it waited in a claim again alone
	// and count it only as its handler starts, so a later attempt with no start line is a crash
	// between that count and the handler's first line, as a SIGKILL in the handler would be; a
	// quorum queue charges every message held in a consumer's window when its process dies,
	// and a message one consumer's crash returned can wait in another consumer's open window
	// when that one dies too (the documented guarantee: each crash charges a message at most
	// once). Each such attempt is accepted with a crash of its own (see attemptsAccounted), and
	// a dead letter the server moved at its delivery limit (Observed.ServerMoved) with its last
	// delivery charged so. Without it at most one attempt may lack a handler.
	ChargePerCrash bool
	// HandledToCap says that the backend counts only attempts a handler ran (a classic RabbitMQ
	// queue): a dead letter of a kind that always fails must follow a handler start of every
	// attempt up to the cap (see unhandledAttempts).
	HandledToCap bool
}

// Where is where a message is at the end of a trial.
type Where uint8

const (
	// Absent: the backend holds nothing of the message.
	Absent Where = iota
	// Pending: still in its queue (ready, delayed or taken).
	Pending
	// Done: marked finished (a processed row).
	Done
	// Dead: in the dead letter.
	Dead
)

func (w Where) String() string {
	return [...]string{"absent", "pending", "done", "dead_letter"}[w]
}

// Observed is what the backend holds of one message, read with the backend's own client.
type Observed struct {
	Where Where
	// Copies is how many rows or messages of it the backend holds in all places.
	Copies int
	// Count is a dead letter's count (-1: none); CountErr says why a count did not parse.
	Count    int
	CountErr string
	// ServerMoved says that the dead letter was moved by the server itself, at the origin
	// queue's delivery limit (a quorum queue's x-death entry with reason delivery_limit): it
	// carries no count header; the server moves a message there only when a crash charged
	// the delivery settle would have dead-lettered with its count.
	ServerMoved bool
	// SideRows is how many side rows the message left.
	SideRows int
}

// Snapshot is what the backend holds at the end of a trial.
type Snapshot struct {
	Messages map[string]Observed
	// Strangers counts rows or messages whose payload names no message of the trial.
	Strangers int
	// AbsentIsSettled says that a finished message leaves nothing behind (RabbitMQ): an absent
	// message is then lost only if the ledger shows no final settlement of it. Where finished
	// rows are kept (SQL with processed_at), absent means lost.
	AbsentIsSettled bool
	// AcksUnconfirmed says that the backend reports an acknowledgement (or a reject) settled
	// once its frame is written, and cannot confirm it (AMQP 0-9-1): a frame lost with a killed
	// process or a cut connection never reaches the broker, which delivers the message again.
	// A final ack, drop or dead letter followed by another delivery of the same message is then
	// a redelivery (at-least-once: a duplicate handler run, or a dead letter published again —
	// allowed and reported), not a double settlement.
	AcksUnconfirmed bool
}

// Violation is one failed check.
type Violation struct {
	Cat    Category
	ID     string
	Detail string
}

func (v Violation) String() string {
	if v.ID == "" {
		return string(v.Cat) + ": " + v.Detail
	}
	return string(v.Cat) + " " + v.ID + ": " + v.Detail
}

// Result is the checker's account of one trial.
type Result struct {
	Messages int
	Faults   int
	// Counts per category, and the first violations of each in detail.
	Counts     map[Category]int
	Violations []Violation
	// DupRuns counts handler runs that repeated one that never settled, or that came after
	// the message had finished: allowed (at-least-once), reported.
	DupRuns int
	// DupCopies counts extra copies a broker holds of one message (a dead letter published
	// twice because its original's ack was lost with a crash or a cut): allowed, reported.
	DupCopies int
	// Runs is the number of handler starts; Settlements of successful settlements.
	Runs, Settlements int
	// Unlogged counts messages finished in the backend whose settlement line is missing (a
	// worker killed between its commit and its ledger line): allowed, reported.
	Unlogged int
	// Destroyed counts dead letters the broker confirmed into a queue the fault then deleted
	// (their successful dead_letter settled between the delete's start and just after it
	// returned): the fault's loss, not the service's; reported.
	Destroyed int
	// Parked counts retry_after copies held in a process (Expect.InProcessDelay) that died
	// with it before they were due back: the documented at-most-once window; reported.
	Parked int
	// Charged counts messages dead-lettered though they were not meant to fail, with attempts
	// that no handler started charged by crashes or faults (attemptsAccounted; one at most, or
	// one per crash under Expect.ChargePerCrash): counting at claim or delivery, as
	// documented; reported.
	Charged int
	// ServerMoved counts dead letters a quorum queue moved by itself at its delivery limit,
	// their last delivery charged by a crash or fault before settle could dead-letter it with
	// its count (Observed.ServerMoved, Expect.ChargePerCrash): the server's backstop, as
	// documented; reported.
	ServerMoved int
	// Forked counts messages finished once by a copy and once by its redelivered original,
	// after a crash between the copy and the original's ack (Expect.CopyOutcomes):
	// at-least-once, as documented; reported.
	Forked int
	// MaxRecover is the longest time from a fault's end to the next successful settlement.
	MaxRecover time.Duration
	// MaxGap is the longest stretch without a settlement while messages remained, blocking
	// faults excluded.
	MaxGap time.Duration
	// Torn counts ledger lines cut short (a writer killed mid-line).
	Torn int
	// Notes are what the driver found worth reporting beside the checks (a repair it made as an
	// operator would); each is printed under the table.
	Notes []string
}

// maxDetails bounds the violations kept in detail per category.
const maxDetails = 5

// Add records a violation.
func (r *Result) Add(c Category, id, format string, args ...any) {
	if r.Counts == nil {
		r.Counts = make(map[Category]int)
	}
	r.Counts[c]++
	if r.Counts[c] <= maxDetails {
		r.Violations = append(r.Violations, Violation{Cat: c, ID: id, Detail: fmt.Sprintf(format, args...)})
	}
}

// Failed returns the categories with violations, sorted.
func (r *Result) Failed() []Category {
	var out []Category
	for c, n := range r.Counts {
		if n > 0 {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Check reads a trial's ledger and the backend's snapshot against what was seeded.
func Check(entries []Entry, snap Snapshot, exp Expect) *Result {
	r := &Result{Messages: len(exp.IDs), Counts: make(map[Category]int)}
	byID := make(map[string][]int) // ledger indexes per message id
	seeded := make(map[string]bool, len(exp.IDs))
	for _, id := range exp.IDs {
		seeded[id] = true
	}
	for i, e := range entries {
		switch e.Ev {
		case EvStart, EvEnd, EvSettle:
			byID[e.ID] = append(byID[e.ID], i)
		case EvFault:
			if e.Phase != "begin" && e.Phase != "deleted" { // deleted: a mark within delete-dead
				r.Faults++
			}
		}
		if e.Ev == EvStart {
			r.Runs++
		}
		if e.Ev == EvSettle && e.OK {
			r.Settlements++
		}
	}
	for id := range byID {
		if !seeded[id] {
			r.Add(Wrong, id, "handled, but the trial never seeded it")
		}
	}
	if snap.Strangers > 0 {
		r.Add(Wrong, "", "the backend holds %d messages whose payload names no seeded message", snap.Strangers)
	}
	for _, id := range exp.IDs {
		checkMessage(r, id, entries, byID[id], snap, exp)
	}
	checkProgress(r, entries, exp)
	return r
}

// deleteSlack is how long after a delete-dead fault's queue.delete returned a dead letter's
// settlement line may still show a copy the broker had confirmed into the queue before the
// delete took it: the worker writes the line after the confirm and the original's ack.
const deleteSlack = 500 * time.Millisecond

// deletedWith reports whether the successful dead letter f was settled while a delete-dead
// fault was deleting its queue (from the fault's begin to deleteSlack after its "deleted" mark).
// RabbitMQ routes and confirms a publish to a queue that a concurrent queue.delete then drops
// with everything in it: the copy was taken, and the fault destroyed it.
func deletedWith(entries []Entry, f Entry) bool {
	if f.Outcome != "dead_letter" {
		return false
	}
	var begin int64
	for _, e := range entries {
		if e.Ev != EvFault || e.Fault != "delete-dead" {
			continue
		}
		switch e.Phase {
		case "begin":
			begin = e.At
		case "deleted":
			if begin != 0 && f.At >= begin && f.At <= e.At+int64(deleteSlack) {
				return true
			}
			begin = 0
		}
	}
	return false
}

func checkMessage(r *Result, id string, entries []Entry, idx []int, snap Snapshot, exp Expect) {
	kind := exp.Mix.Kind(id)
	want := kind.Final()
	obs, held := snap.Messages[id]
	if !held {
		obs = Observed{Where: Absent, Count: -1}
	}

	// A forked message has a copy and a redelivered original alive at once: each may finish,
	// and each counts its own attempts, so one may settle an attempt below another's start.
	forked := forks(entries, idx, exp.CopyOutcomes)
	var finals []Entry
	starts, open, finished := 0, false, false
	lastEnd := ""   // what the last run asked for, when no run started after it
	maxStarted := 0 // highest attempt started so far, in ledger order
	for _, i := range idx {
		e := entries[i]
		switch e.Ev {
		case EvStart:
			starts++
			if open || finished {
				r.DupRuns++
			}
			open = true
			lastEnd = ""
			maxStarted = max(maxStarted, e.Attempt)
		case EvEnd:
			lastEnd = e.Outcome
		case EvSettle:
			if !e.OK {
				continue
			}
			open = false
			if !e.Final() {
				continue
			}
			finished = true
			finals = append(finals, e)
			if exp.StrictAttempts && e.Attempt < maxStarted && forked == 0 {
				r.Add(Double, id, "%s of attempt %d by %s succeeded after attempt %d had started: settled under a lease or claim that was no longer current",
					e.Outcome, e.Attempt, e.Who, maxStarted)
			}
		}
	}
	if snap.AcksUnconfirmed && len(finals) > 1 {
		finals = redelivered(finals, entries, idx)
	}
	if forked > 0 && len(finals) > 1 && len(finals) <= 1+forked {
		// One final per lineage; their runs were counted as duplicate runs above.
		r.Forked++
		finals = finals[len(finals)-1:]
	}
	if len(finals) > 1 {
		var s []string
		for _, f := range finals {
			s = append(s, fmt.Sprintf("%s(attempt %d, %s)", f.Outcome, f.Attempt, f.Who))
		}
		r.Add(Double, id, "%d successful final settlements: %s", len(finals), strings.Join(s, ", "))
	}
	if exp.MaxRuns > 0 && starts > exp.MaxRuns {
		r.Add(Runs, id, "%s: the handler ran %d times (bound %d)", kind, starts, exp.MaxRuns)
	}
	switch {
	case obs.Copies > 1 && snap.AbsentIsSettled && len(finals) <= 1:
		// A broker copy published before its original's ack was lost (a crash or a cut between
		// the two): at-least-once, as documented; reported, not a violation.
		r.DupCopies += obs.Copies - 1
	case obs.Copies > 1:
		r.Add(Double, id, "the backend holds %d copies (%s)", obs.Copies, obs.Where)
	}

	switch obs.Where {
	case Pending:
		r.Add(Stuck, id, "%s: still in its queue when the drain ended (handler ran %d times)", kind, starts)
	case Done:
		switch {
		case want == FinalDead:
			r.Add(Wrong, id, "%s: finished instead of dead-lettered", kind)
		case len(finals) > 0 && finals[len(finals)-1].Outcome != want.String():
			r.Add(Wrong, id, "%s: settled as %s, want %s", kind, finals[len(finals)-1].Outcome, want)
		case len(finals) == 0:
			r.Unlogged++
		}
	case Dead:
		// A dead letter the server moved at its delivery limit spent one delivery past the
		// cap, which no handler may have started (settle dead-letters it with its count).
		spent := exp.Cap
		if obs.ServerMoved && obs.Count < 0 && exp.Cap > 0 {
			spent = exp.Cap + 1
		}
		if want != FinalDead || spent > exp.Cap {
			switch handled, ok := attemptsAccounted(entries, idx, spent, exp.ChargePerCrash); {
			case !ok:
				if want != FinalDead {
					r.Add(Wrong, id, "%s: dead-lettered, want %s (ledger: %s)", kind, want, history(entries, idx))
				}
				if spent > exp.Cap {
					r.Add(NoCount, id, "%s: moved by the server at its delivery limit, without its count, with deliveries no handler started and no crash of their own charged (ledger: %s)", kind, history(entries, idx))
				}
			case spent > exp.Cap:
				r.ServerMoved++
			case !handled:
				r.Charged++
			}
		}
		if exp.HandledToCap && want == FinalDead {
			checkHandledToCap(r, id, kind, entries, idx, exp.Cap)
		}
		switch {
		case obs.CountErr != "":
			r.Add(NoCount, id, "dead letter's count does not parse: %s", obs.CountErr)
		case obs.Count < 0 && spent > exp.Cap:
			// accounted above
		case obs.Count < 0:
			r.Add(NoCount, id, "dead letter without its count")
		case exp.Cap > 0 && want == FinalDead && obs.Count < exp.Cap:
			r.Add(NoCount, id, "dead letter's count %d is below the cap %d", obs.Count, exp.Cap)
		}
	case Absent:
		switch {
		case !snap.AbsentIsSettled:
			r.Add(Lost, id, "%s: the backend holds no row of it (ledger: %s)", kind, history(entries, idx))
		case want == FinalDead && len(finals) > 0 && deletedWith(entries, finals[len(finals)-1]):
			r.Destroyed++
		case want == FinalDead:
			r.Add(Lost, id, "%s: not in the dead letter, nor anywhere else (ledger: %s)", kind, history(entries, idx))
		case len(finals) == 0 && lastEnd == want.String():
			// The last run asked for it and its process died before the settlement's line:
			// the frame may well have reached the broker.
			r.Unlogged++
		case len(finals) == 0 && diedParked(entries, idx, exp.InProcessDelay):
			r.Parked++
		case len(finals) == 0:
			r.Add(Lost, id, "%s: gone from the broker without a successful ack or drop (ledger: %s)", kind, history(entries, idx))
		case finals[len(finals)-1].Outcome != want.String():
			r.Add(Wrong, id, "%s: settled as %s, want %s", kind, finals[len(finals)-1].Outcome, want)
		}
	}

	if exp.SideRows {
		wantSide := 0
		if obs.Where == Done || (obs.Where == Absent && snap.AbsentIsSettled) {
			if want == FinalAck {
				wantSide = kind.SideRows()
			}
		}
		switch {
		case obs.SideRows > wantSide && wantSide == 0:
			r.Add(Double, id, "%s (%s): %d side rows kept for a message that was not acknowledged", kind, obs.Where, obs.SideRows)
		case obs.SideRows > wantSide:
			r.Add(Double, id, "%s: side row written %d times", kind, obs.SideRows)
		case obs.SideRows < wantSide:
			r.Add(Lost, id, "%s: acknowledged, but its side row is missing", kind)
		}
	}
}

// parkSlack is how long after its due time an in-process delayed copy may still be in the
// process that holds it: publishing it back takes a moment, more while the connection is
// being re-established.
const parkSlack = 2 * time.Second

// diedParked reports whether the message's last event is a successful retry_after whose copy
// waited in the settling process (delay > 0), and that process ended before the copy was due
// back (plus parkSlack): the copy died with it, as in-process delays document. A process ends
// with its own exit line, or at the latest when its worker's next process is ready.
func diedParked(entries []Entry, idx []int, delay time.Duration) bool {
	if delay <= 0 || len(idx) == 0 {
		return false
	}
	last := entries[idx[len(idx)-1]]
	if last.Ev != EvSettle || !last.OK || last.Outcome != "retry_after" || last.PID == 0 {
		return false
	}
	due := last.At + int64(delay+parkSlack)
	for _, e := range entries {
		if e.At < last.At || e.At > due {
			continue
		}
		switch {
		case e.Ev == EvExit && e.PID == last.PID:
			return true
		case e.Ev == EvReady && e.Who == last.Who && e.PID != last.PID:
			return true
		}
	}
	return false
}

// forks counts the runs of a message that asked for an outcome settled by a copy (copies)
// whose settlement never succeeded: no successful settlement line of that attempt from the
// same process follows the run's end. The broker may have confirmed the copy before the
// process died or the original's acknowledgement failed; then the copy and the redelivered
// original are two messages, each delivered, counted and finished on its own (the documented
// duplicate of a crash between a copy and its original's ack).
func forks(entries []Entry, idx []int, copies map[string]bool) int {
	n := 0
	for k, i := range idx {
		e := entries[i]
		if e.Ev != EvEnd || !copies[e.Outcome] {
			continue
		}
		settled := false
		for _, j := range idx[k+1:] {
			s := entries[j]
			if s.Ev == EvSettle && s.OK && s.PID == e.PID && s.Attempt == e.Attempt {
				settled = true
				break
			}
		}
		if !settled {
			n++
		}
	}
	return n
}

// redelivered drops from finals those whose acknowledgement the broker never received: an ack,
// a drop or a dead letter (a confirmed copy, then the original's ack) followed by another
// delivery of the message: a handler start of the same attempt or a later one, a settlement of
// a later attempt (a dead letter at claim has no start), or a dead letter of the same attempt
// after a dead letter (the redelivered original, already at its cap, moved again without its
// handler).
func redelivered(finals []Entry, entries []Entry, idx []int) []Entry {
	var keep []Entry
	for _, f := range finals {
		again := false
		for _, i := range idx {
			e := entries[i]
			moved := e.Ev == EvSettle && e.Attempt == f.Attempt && e.Outcome == "dead_letter" && f.Outcome == "dead_letter"
			if e.At > f.At && ((e.Ev == EvStart && e.Attempt >= f.Attempt) || (e.Ev == EvSettle && e.Attempt > f.Attempt) || moved) {
				again = true
				break
			}
		}
		if !again {
			keep = append(keep, f)
		}
	}
	return keep
}

// history summarises a message's ledger lines for a violation's detail.
func history(entries []Entry, idx []int) string {
	if len(idx) == 0 {
		return "never handled"
	}
	var s []string
	for _, i := range idx {
		e := entries[i]
		switch e.Ev {
		case EvStart:
			s = append(s, fmt.Sprintf("start#%d@%s", e.Attempt, e.Who))
		case EvSettle:
			ok := "ok"
			if !e.OK {
				ok = "failed"
			}
			s = append(s, fmt.Sprintf("%s#%d %s", e.Outcome, e.Attempt, ok))
		}
	}
	if len(s) > 12 {
		s = append(s[:4], append([]string{"…"}, s[len(s)-7:]...)...)
	}
	return strings.Join(s, " ")
}

// allHeldFrom returns the time from which, within the gap [a, b] without a successful
// settlement, every message not yet finished at a had a failed settlement (it is held back);
// b when some message that remained had none.
func allHeldFrom(ids []string, a, b int64, failedAt, finishedAt map[string]int64) int64 {
	from := a
	remained := false
	for _, id := range ids {
		if f, ok := finishedAt[id]; ok && f <= a {
			continue
		}
		remained = true
		t, ok := failedAt[id]
		if !ok || t >= b {
			return b
		}
		from = max(from, t)
	}
	if !remained {
		return b
	}
	return from
}

// attemptsAccounted reports whether each of the cap's attempts of a message is accounted for,
// so that the dead letter past the cap is the contract: every attempt reached a handler (its
// process died in or after the handler every time it did not retry: a SIGKILL that lands in a
// handler is a crash like a poison pill's), or all but one did and that one was charged by a
// crash. Attempts are counted when a message is taken (SQL lease and advisory, quorum queues,
// JetStream), so a message taken beside a crash and never handed to a handler is charged the
// attempt its claim counted; it is then taken alone, so that happens to it once (the
// documented price of never letting a message run past the cap: the backend cannot tell it
// from a poison message's first crash without a write per hand-out). The crash must be in the
// ledger: a process exit or a fault that ends processes or connections between the message's
// last line of an earlier attempt and its first line of a later one. Two attempts without a
// handler, or one without a crash to charge it, make the dead letter wrong — unless
// perCrash (Expect.ChargePerCrash): then each attempt without a start line is accepted when a
// crash of its own (not one that charged another of its attempts) lies in its stretch.
//
// handled reports that every attempt reached a handler.
func attemptsAccounted(entries []Entry, idx []int, cap int, perCrash bool) (handled, ok bool) {
	if cap <= 0 {
		return false, false
	}
	started := make(map[int]bool)
	for _, i := range idx {
		if e := entries[i]; e.Ev == EvStart {
			started[e.Attempt] = true
		}
	}
	missing := 0
	used := make(map[int]bool) // crashes already charged with an attempt
	for a := 1; a <= cap; a++ {
		if started[a] {
			continue
		}
		if missing++; missing > 1 && !perCrash {
			return false, false
		}
		c := crashCharged(entries, idx, a, used)
		if c < 0 {
			return false, false
		}
		used[c] = true
	}
	return missing == 0, true
}

// crashCharged returns the index of the first crash, not in used, that lies where attempt a of
// a message, which no handler started, was taken: after the message's last line of an earlier
// attempt (or the trial's start) and before its first line of a later attempt; -1 when there
// is none.
func crashCharged(entries []Entry, idx []int, a int, used map[int]bool) int {
	var from int64
	to := int64(math.MaxInt64)
	for _, i := range idx {
		switch e := entries[i]; {
		case e.Attempt < a:
			from = max(from, e.At)
		case e.Attempt > a:
			to = min(to, e.At)
		}
	}
	for i, e := range entries {
		if e.At <= from || e.At >= to || used[i] {
			continue
		}
		switch {
		case e.Ev == EvExit:
			return i
		case e.Ev == EvFault && e.Fault != "lock-row" && e.Fault != "delete-dead" && e.Phase != "end":
			return i
		}
	}
	return -1
}

// window is a stretch of a blocking fault.
type window struct{ from, to int64 }

// checkProgress measures the gaps between successful settlements while messages remained and
// the time from each fault's end to the next settlement.
func checkProgress(r *Result, entries []Entry, exp Expect) {
	var progress []int64
	var start, end int64
	drained := false
	var blocking []window
	openBlock := make(map[string]int64)
	var faultEnds []Entry
	// A message whose settlement failed is held back for a backoff (SQL: doubling, per row):
	// while every message that remained had a failed settlement, nothing could settle, and the
	// time is not a stall. A row held up by another's failing settlement still counts.
	failedAt := map[string]int64{}
	finishedAt := map[string]int64{}
	for _, e := range entries {
		switch e.Ev {
		case EvSeeded:
			if start == 0 {
				start = e.At
			}
		case EvDrained, EvGaveUp:
			end, drained = e.At, e.Ev == EvDrained
		case EvSettle:
			if !e.OK {
				if _, ok := failedAt[e.ID]; !ok && e.ID != "" {
					failedAt[e.ID] = e.At
				}
				continue
			}
			if _, ok := finishedAt[e.ID]; !ok && e.ID != "" && e.Final() {
				finishedAt[e.ID] = e.At
			}
			if end == 0 || e.At <= end {
				progress = append(progress, e.At)
			}
		case EvFault:
			key := e.Fault + "/" + e.Detail
			switch e.Phase {
			case "begin":
				if e.Blocks {
					openBlock[key] = e.At
				}
			case "end":
				if from, ok := openBlock[key]; ok {
					blocking = append(blocking, window{from, e.At})
					delete(openBlock, key)
				}
				faultEnds = append(faultEnds, e)
			case "deleted": // a mark within delete-dead, not its end
			default:
				faultEnds = append(faultEnds, e)
			}
		}
	}
	if start == 0 && len(entries) > 0 {
		start = entries[0].At
	}
	if end == 0 && len(entries) > 0 {
		end = entries[len(entries)-1].At
	}
	for _, from := range openBlock {
		blocking = append(blocking, window{from, end})
	}
	sort.Slice(progress, func(i, j int) bool { return progress[i] < progress[j] })

	// Gaps: between the seeding, each settlement, and — when the drain never ended — the last
	// line, minus blocking faults. After a drain, the stretch from the last settlement to the
	// drain's end had nothing left to settle.
	points := append([]int64{start}, progress...)
	if !drained {
		points = append(points, end)
	}
	var worstFrom int64
	for i := 1; i < len(points); i++ {
		a, b := points[i-1], points[i]
		if b <= a {
			continue
		}
		gap := b - a
		for _, w := range blocking {
			lo, hi := max(a, w.from), min(b, w.to)
			if hi > lo {
				gap -= hi - lo
			}
		}
		if held := allHeldFrom(exp.IDs, a, b, failedAt, finishedAt); held < b {
			gap -= b - max(a, held)
		}
		if time.Duration(gap) > r.MaxGap {
			r.MaxGap, worstFrom = time.Duration(gap), a
		}
	}
	if exp.StallBound > 0 && r.MaxGap > exp.StallBound {
		r.Add(Stall, "", "no settlement for %v (bound %v) from %s after the seeding, while messages remained",
			r.MaxGap.Round(time.Millisecond), exp.StallBound, time.Duration(worstFrom-start).Round(time.Millisecond))
	}

	// Recovery: from each fault's end to the next successful settlement, for faults that came
	// before the drain ended.
	for _, f := range faultEnds {
		if f.At > end {
			continue
		}
		i := sort.Search(len(progress), func(i int) bool { return progress[i] > f.At })
		if i == len(progress) {
			continue // nothing settled after it: the drain had finished, or Stall/Stuck say so
		}
		d := time.Duration(progress[i] - f.At)
		if d > r.MaxRecover {
			r.MaxRecover = d
		}
		if exp.RecoverBound > 0 && d > exp.RecoverBound {
			r.Add(Recover, "", "first settlement %v after %s %s (bound %v)", d.Round(time.Millisecond), f.Fault, f.Detail, exp.RecoverBound)
		}
	}
}
