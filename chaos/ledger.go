package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/settlehq/settle/core"
)

// Event is the kind of a ledger line.
type Event string

const (
	// EvStart: a handler started on a delivery.
	EvStart Event = "start"
	// EvEnd: a handler returned (Outcome says what it asked for).
	EvEnd Event = "end"
	// EvSettle: a settlement was durable (OK) or failed (Err), as core's observer saw it.
	EvSettle Event = "settle"
	// EvReady: a worker process is up and its subscription is open.
	EvReady Event = "ready"
	// EvExit: a worker process is about to exit on purpose (Outcome says why).
	EvExit Event = "exit"
	// EvFault: the driver began (Phase "begin") or ended ("end") a fault; a fault without
	// a phase is instantaneous (a kill, a connection cut).
	EvFault Event = "fault"
	// EvSeeded: the driver seeded the trial's messages.
	EvSeeded Event = "seeded"
	// EvDrained: the driver saw every message finished.
	EvDrained Event = "drained"
	// EvGaveUp: the driver's bounded drain ended with messages remaining.
	EvGaveUp Event = "gave_up"
)

// Entry is one ledger line. Keys are short: a long profile writes hundreds of thousands.
type Entry struct {
	// At is the wall time of the line in Unix nanoseconds.
	At  int64  `json:"t"`
	Ev  Event  `json:"ev"`
	Who string `json:"who,omitempty"` // worker name, or "driver"
	PID int    `json:"pid,omitempty"`
	// ID and Attempt identify the delivery (message id from the payload, attempt as the
	// backend reported it).
	ID      string `json:"id,omitempty"`
	Attempt int    `json:"att,omitempty"`
	// Row is the SQL row id; Tag, Redelivered and Count are the AMQP delivery tag, redelivered
	// flag and quorum x-delivery-count, where the backend shows them.
	Row         int64  `json:"row,omitempty"`
	Tag         uint64 `json:"tag,omitempty"`
	Redelivered bool   `json:"redel,omitempty"`
	Count       int    `json:"count,omitempty"`
	// Outcome: for EvEnd what the handler returned; for EvSettle the verdict's action
	// (ack, drop, retry, retry_after, dead_letter, abandon); for EvExit the reason.
	Outcome string `json:"out,omitempty"`
	Dest    string `json:"dest,omitempty"`
	OK      bool   `json:"ok,omitempty"`
	Err     string `json:"err,omitempty"`
	// Fault, Phase and Detail describe a driver's fault; Blocks says that no settlement can
	// happen while it lasts (the server is down, the only worker is stopped), so the stall
	// check does not count its time.
	Fault  string `json:"fault,omitempty"`
	Phase  string `json:"phase,omitempty"`
	Detail string `json:"detail,omitempty"`
	Blocks bool   `json:"bl,omitempty"`
}

// Time is At as a time.
func (e Entry) Time() time.Time { return time.Unix(0, e.At) }

// Final reports whether e is a successful settlement that finishes its message: an ack, a drop
// or a dead letter the backend confirmed.
func (e Entry) Final() bool {
	return e.Ev == EvSettle && e.OK && (e.Outcome == "ack" || e.Outcome == "drop" || e.Outcome == "dead_letter")
}

// Ledger appends lines to a ledger file. Every line is one write(2) on a file opened with
// O_APPEND, so lines of several processes interleave whole and a line written before a SIGKILL
// is in the file. It is safe for concurrent use.
type Ledger struct {
	f   *os.File
	who string
	pid int
}

// OpenLedger opens (creating it if needed) the ledger at path for appending; who names the
// writer in every line.
func OpenLedger(path, who string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Ledger{f: f, who: who, pid: os.Getpid()}, nil
}

// Write appends e, stamping its time (when unset), writer and pid.
func (l *Ledger) Write(e Entry) error {
	if e.At == 0 {
		e.At = time.Now().UnixNano()
	}
	e.Who, e.PID = l.who, l.pid
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.f.Name(), err)
	}
	b = append(b, '\n')
	// One write(2): os.File.Write issues a single write for a regular file unless it is
	// interrupted, and a short write to a regular file only happens when the disk is full.
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("ledger %s: %w", l.f.Name(), err)
	}
	return nil
}

// Settled is a core.Observer that writes every settlement as an EvSettle line. describe
// returns what the delivery shows about itself: the message id from its payload, and the
// backend's row id or delivery tag.
func (l *Ledger) Settled(describe func(core.Delivery) Entry) core.Observer {
	return func(s core.Settlement) {
		e := describe(s.Delivery)
		e.Ev, e.Attempt, e.Outcome, e.OK = EvSettle, s.Delivery.Attempt(), s.Verdict.Action.String(), s.Err == nil
		if s.Verdict.Action == core.ActDeadLetter {
			e.Dest = s.Verdict.Dest
		}
		if s.Err != nil {
			e.Err = clip(s.Err.Error(), 300)
		}
		_ = l.Write(e) // a line that could not be written shows up as a check failure
	}
}

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ReadLedger reads every line of a ledger. A last line without its newline (a writer killed
// mid-write) is not an entry: it is counted in torn. A complete line that does not parse is an
// error naming its line number.
func ReadLedger(r io.Reader) (entries []Entry, torn int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(bytes.TrimSpace(line)) > 0 {
				torn++
			}
			return entries, torn, nil
		}
		if err != nil {
			return entries, torn, fmt.Errorf("ledger line %d: %w", n, err)
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return entries, torn, fmt.Errorf("ledger line %d: %w: %q", n, err, clip(string(line), 200))
		}
		entries = append(entries, e)
	}
}

// ReadLedgerFile reads the ledger at path.
func ReadLedgerFile(path string) ([]Entry, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	return ReadLedger(f)
}

// Tail reads a ledger as it grows: each Poll returns the complete lines appended since the
// last one.
type Tail struct {
	path    string
	off     int64
	partial []byte
}

// NewTail tails the ledger at path from its start.
func NewTail(path string) *Tail { return &Tail{path: path} }

// Poll returns the entries completed since the previous call.
func (t *Tail) Poll() ([]Entry, error) {
	f, err := os.Open(t.path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.NewSectionReader(f, t.off, 1<<40))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", t.path, err)
	}
	t.off += int64(len(buf))
	data := append(t.partial, buf...)
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		t.partial = data
		return nil, nil
	}
	t.partial = append([]byte(nil), data[last+1:]...)
	entries, _, err := ReadLedger(bytes.NewReader(data[:last+1]))
	return entries, err
}
