package bench

import (
	"sort"
	"sync"
	"time"
)

// tally counts and times what a benchmark's tracer sees, by key (a statement, a protocol
// command); safe for concurrent use.
type tally struct {
	mu sync.Mutex
	m  map[string]*tallyStat
}

type tallyStat struct {
	key  string
	n    int
	took time.Duration
}

// add counts one occurrence of key that took took.
func (t *tally) add(key string, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*tallyStat{}
	}
	st := t.m[key]
	if st == nil {
		st = &tallyStat{key: key}
		t.m[key] = st
	}
	st.n++
	st.took += took
}

// reset forgets everything counted.
func (t *tally) reset() {
	t.mu.Lock()
	t.m = nil
	t.mu.Unlock()
}

// sorted returns a copy of every key's figures, first by first, and their total time.
func (t *tally) sorted(first func(a, b tallyStat) bool) ([]tallyStat, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]tallyStat, 0, len(t.m))
	var total time.Duration
	for _, st := range t.m {
		out = append(out, *st)
		total += st.took
	}
	sort.Slice(out, func(i, j int) bool { return first(out[i], out[j]) })
	return out, total
}
