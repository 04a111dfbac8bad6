package trial

import (
	"sync"
	"time"

	"github.com/settlehq/settle/chaos"
)

// state follows a trial's ledger as it grows: which messages have finished, which workers are
// ready, which deliveries are in flight.
type state struct {
	tail *chaos.Tail

	mu       sync.Mutex
	finished map[string]bool
	ready    map[int]bool // worker pids that reported ready
	exits    map[int]string
	inflight map[string]chaos.Entry // message id → its last start not yet settled
	lastEnd  map[string]string      // message id → what its last run asked for
	settled  int
	// settledAway counts messages finished by an ack or a drop (not a dead letter).
	settledAway int
	last        time.Time // when the last line was read
	lastErr     error
}

func newState(path string) *state {
	return &state{tail: chaos.NewTail(path), finished: make(map[string]bool), ready: make(map[int]bool),
		exits: make(map[int]string), inflight: make(map[string]chaos.Entry), lastEnd: make(map[string]string)}
}

// poll reads the lines appended since the last poll.
func (s *state) poll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := s.tail.Poll() // under the lock: the follower and waiters poll at once
	if err != nil {
		s.lastErr = err
	}
	if s.last.IsZero() {
		s.last = time.Now()
	}
	for _, e := range entries {
		if e.Who != "driver" {
			s.last = time.Now() // a worker's line: something happened
		}
		switch e.Ev {
		case chaos.EvReady:
			if e.Detail == "" {
				s.ready[e.PID] = true
			}
		case chaos.EvExit:
			s.exits[e.PID] = e.Outcome
		case chaos.EvStart:
			s.inflight[e.ID] = e
			delete(s.lastEnd, e.ID)
		case chaos.EvEnd:
			s.lastEnd[e.ID] = e.Outcome
		case chaos.EvSettle:
			if e.OK {
				s.settled++
				delete(s.inflight, e.ID)
			}
			if e.Final() {
				if !s.finished[e.ID] && e.Outcome != "dead_letter" {
					s.settledAway++
				}
				s.finished[e.ID] = true
			}
		}
	}
}

// follow polls every interval until stop is closed.
func (s *state) follow(stop <-chan struct{}) {
	t := time.NewTicker(40 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			s.poll()
			return
		case <-t.C:
			s.poll()
		}
	}
}

func (s *state) finishedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.finished)
}

func (s *state) isReady(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready[pid]
}

func (s *state) exitReason(pid int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exits[pid]
}

// inflightRow returns the row id of a delivery in flight (started, not settled) whose row is
// known, started at least minAge ago; false when there is none.
func (s *state) inflightRow(minAge time.Duration) (chaos.Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixNano()
	for _, e := range s.inflight {
		if e.Row != 0 && now-e.At >= int64(minAge) && !s.finished[e.ID] {
			return e, true
		}
	}
	return chaos.Entry{}, false
}

// quietFor is how long no worker has appended a line.
func (s *state) quietFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.last)
}

// onlyUnlogged reports whether every message of ids that has not finished in the ledger
// had its last run end asking for an ack or a drop (its settlement line was lost with its
// process): nothing is left to happen to them.
func (s *state) onlyUnlogged(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.finished[id] {
			continue
		}
		if o := s.lastEnd[id]; o != "ack" && o != "drop" {
			return false
		}
	}
	return true
}

// ackedOrDropped counts messages whose ledger shows a successful ack or drop.
func (s *state) ackedOrDropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settledAway
}
