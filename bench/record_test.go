package bench

import (
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Record is one measured point, written as one JSON line to the file named by
// SETTLE_BENCH_RECORD (appended; nothing is written when it is unset). ci/bench.sh sets it, and
// ci/benchchart turns the lines into the tables and charts bench/README.md embeds.
//
// record prefixes Chart with the benchmark's name. A chart is drawn per (Chart, Backend): one series per Series, one point per X. Values holds
// one figure per round (a throughput, a latency, bytes...), in Unit; the chart shows their median
// with the range.
type Record struct {
	Date    string    `json:"date"`    // RFC 3339, UTC, when the run started
	Machine string    `json:"machine"` // "2 vCPUs, linux/amd64"
	Load    float64   `json:"load"`    // 1-minute load average when the point was recorded
	Chart   string    `json:"chart"`   // the benchmark's name and what it shows: "PostgresDefaults throughput"
	Backend string    `json:"backend"` // "sqlite", "postgres", "mariadb", "rabbitmq", "nats"
	Series  string    `json:"series"`  // the contender: "settle lease, defaults", "raw lease", "River"
	XName   string    `json:"x_name"`  // what X is: "workers", "rows drained", "percentile", "" (none)
	X       float64   `json:"x"`
	Unit    string    `json:"unit"` // "msgs/s", "ms", "MiB", "allocs/msg"
	Values  []float64 `json:"values"`
}

var (
	recordMu    sync.Mutex
	recordStart = time.Now().UTC().Format(time.RFC3339)
)

// record appends r to SETTLE_BENCH_RECORD, filling Date, Machine and Load. A failure to write
// fails the benchmark: a run asked to record must not silently lose its figures.
func record(tb testing.TB, r Record) {
	tb.Helper()
	path := os.Getenv("SETTLE_BENCH_RECORD")
	if path == "" {
		return
	}
	// One chart per benchmark: two benchmarks may time contenders of the same name (the raw
	// loops), which one chart could not hold.
	r.Chart = benchName(tb) + " " + r.Chart
	r.Date = recordStart
	r.Machine = strconv.Itoa(runtime.NumCPU()) + " vCPUs, " + runtime.GOOS + "/" + runtime.GOARCH
	r.Load = loadAverage()
	line, err := json.Marshal(r)
	if err != nil {
		tb.Fatalf("bench record: %v", err)
	}
	recordMu.Lock()
	defer recordMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Fatalf("bench record: SETTLE_BENCH_RECORD=%s: %v", path, err)
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("bench record: SETTLE_BENCH_RECORD=%s: %v", path, err)
	}
}

// benchName is the top-level benchmark's name without "Benchmark" and the -N suffix
// ("PostgresDefaults").
func benchName(tb testing.TB) string {
	n, _, _ := strings.Cut(tb.Name(), "/")
	n = strings.TrimPrefix(n, "Benchmark")
	if i := strings.LastIndexByte(n, '-'); i > 0 {
		if _, err := strconv.Atoi(n[i+1:]); err == nil {
			n = n[:i]
		}
	}
	return n
}

// loadAverage is the 1-minute load average from /proc/loadavg, or -1 where there is none.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
