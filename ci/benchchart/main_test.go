package main

import (
	"bytes"
	"encoding/json"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const sample = "testdata/records.jsonl"

// rec is one record line for a test's input.
func rec(t *testing.T, chart, backend, series, xName string, x float64, unit string, load float64, values ...float64) string {
	t.Helper()
	b, err := json.Marshal(Record{
		Date: "2026-12-01T09:30:00Z", Machine: "2 vCPUs, linux/amd64", Load: load,
		Chart: chart, Backend: backend, Series: series, XName: xName, X: x, Unit: unit, Values: values,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func charts(t *testing.T, lines ...string) []*chart {
	t.Helper()
	ls, err := readRecords(strings.NewReader(strings.Join(lines, "\n")), "test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := group(ls, "test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		values           []float64
		median, min, max float64
	}{
		{[]float64{5}, 5, 5, 5},
		{[]float64{3, 1, 2}, 2, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{10, 10}, 10, 10, 10},
		{[]float64{9, 100, 1, 7, 8}, 8, 1, 100}, // an outlier moves the range, not the median
		{[]float64{0.25, -1, 0.5}, 0.25, -1, 0.5},
	} {
		in := slices.Clone(tc.values)
		got := summarize(tc.values)
		if got.Median != tc.median || got.Min != tc.min || got.Max != tc.max || got.Rounds != len(tc.values) {
			t.Errorf("summarize(%v) = %+v, want median %v range %v–%v", tc.values, got, tc.median, tc.min, tc.max)
		}
		if !slices.Equal(in, tc.values) {
			t.Errorf("summarize reordered its input: %v", tc.values)
		}
	}
}

func TestRows(t *testing.T) {
	type want struct {
		series string
		x      float64
		median float64
		ratio  float64 // NaN: none
		ref    string
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name  string
		lines []string
		want  []want
	}{{
		name: "one raw loop",
		lines: []string{
			rec(t, "throughput", "sqlite", "settle", "", 0, "msgs/s", 1, 90, 80, 70),
			rec(t, "throughput", "sqlite", "raw lease", "", 0, "msgs/s", 1, 100, 120, 110, 90),
			rec(t, "throughput", "sqlite", "River", "", 0, "msgs/s", 1, 21, 22),
		},
		want: []want{
			{"settle", 0, 80, 80.0 / 105, "raw lease"},
			{"raw lease", 0, 105, nan, ""},
			{"River", 0, 21.5, 21.5 / 105, "raw lease"},
		},
	}, {
		name: "several raw loops: the closest one before",
		lines: []string{
			rec(t, "throughput", "mariadb", "raw rowlock", "", 0, "msgs/s", 1, 100),
			rec(t, "throughput", "mariadb", "settle rowlock", "", 0, "msgs/s", 1, 50),
			rec(t, "throughput", "mariadb", "Raw lease", "", 0, "msgs/s", 1, 200),
			rec(t, "throughput", "mariadb", "settle lease", "", 0, "msgs/s", 1, 150),
		},
		want: []want{
			{"raw rowlock", 0, 100, nan, ""},
			{"settle rowlock", 0, 50, 0.5, "raw rowlock"},
			{"Raw lease", 0, 200, nan, ""},
			{"settle lease", 0, 150, 0.75, "Raw lease"},
		},
	}, {
		name: "no raw loop: no ratio",
		lines: []string{
			rec(t, "latency", "postgres", "settle", "percentile", 99, "ms", 1, 3),
			rec(t, "latency", "postgres", "River", "percentile", 99, "ms", 1, 9),
		},
		want: []want{{"settle", 99, 3, nan, ""}, {"River", 99, 9, nan, ""}},
	}, {
		name: "over x: the raw loop at the same x, none where it has no point",
		lines: []string{
			rec(t, "scaling", "postgres", "settle", "workers", 4, "msgs/s", 1, 80),
			rec(t, "scaling", "postgres", "settle", "workers", 1, "msgs/s", 1, 30),
			rec(t, "scaling", "postgres", "settle", "workers", 16, "msgs/s", 1, 90),
			rec(t, "scaling", "postgres", "raw", "workers", 1, "msgs/s", 1, 40),
			rec(t, "scaling", "postgres", "raw", "workers", 4, "msgs/s", 1, 100),
		},
		want: []want{
			{"settle", 1, 30, 0.75, "raw"},
			{"settle", 4, 80, 0.8, "raw"},
			{"settle", 16, 90, nan, "raw"},
			{"raw", 1, 40, nan, ""},
			{"raw", 4, 100, nan, ""},
		},
	}, {
		name: "a raw median of zero gives no ratio",
		lines: []string{
			rec(t, "memory", "nats", "raw", "", 0, "MiB", 1, 0),
			rec(t, "memory", "nats", "settle", "", 0, "MiB", 1, 3),
		},
		want: []want{{"raw", 0, 0, nan, ""}, {"settle", 0, 3, nan, "raw"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := charts(t, tc.lines...)
			if len(cs) != 1 {
				t.Fatalf("%d charts, want 1", len(cs))
			}
			rows := cs[0].rows()
			if len(rows) != len(tc.want) {
				t.Fatalf("%d rows, want %d: %+v", len(rows), len(tc.want), rows)
			}
			for i, w := range tc.want {
				r := rows[i]
				ratioOK := math.IsNaN(w.ratio) && math.IsNaN(r.Ratio) || math.Abs(w.ratio-r.Ratio) < 1e-12
				if r.Series != w.series || r.X != w.x || r.Median != w.median || !ratioOK || r.Ref != w.ref {
					t.Errorf("row %d = {%s x=%v median=%v ratio=%v ref=%q}, want %+v", i, r.Series, r.X, r.Median, r.Ratio, r.Ref, w)
				}
			}
		})
	}
}

func TestCaption(t *testing.T) {
	later := strings.Replace(rec(t, "throughput", "nats", "b", "", 0, "msgs/s", -1, 1), "09:30", "10:05", 1)
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{{
		"loads min–max",
		[]string{rec(t, "throughput", "nats", "a", "", 0, "msgs/s", 3.24, 1, 2, 3), rec(t, "throughput", "nats", "b", "", 0, "msgs/s", 1.5, 1, 2, 3)},
		"run 2026-12-01 09:30 UTC · 2 vCPUs, linux/amd64 · load average 1.5–3.2 · medians of 3 rounds, error bars min–max",
	}, {
		"unknown loads left out, two runs, rounds vary",
		[]string{rec(t, "throughput", "nats", "a", "", 0, "msgs/s", 2, 1, 2, 3, 4, 5), later},
		"runs 2026-12-01 09:30–10:05 UTC · 2 vCPUs, linux/amd64 · load average 2.0 · medians of 1–5 rounds, error bars min–max",
	}, {
		"no load known",
		[]string{rec(t, "throughput", "nats", "a", "", 0, "msgs/s", -1, 1)},
		"run 2026-12-01 09:30 UTC · 2 vCPUs, linux/amd64 · load average unknown · medians of 1 rounds, error bars min–max",
	}} {
		if got := charts(t, tc.lines...)[0].Caption(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestFileNames(t *testing.T) {
	for _, tc := range []struct{ chart, backend, want string }{
		{"throughput", "sqlite", "throughput-sqlite.svg"},
		{"Latency", "PostgreSQL 16", "latency-postgresql-16.svg"},
		{"rows drained/s", "RabbitMQ (quorum)", "rows-drained-s-rabbitmq-quorum.svg"},
		{"…", "nats", "x-nats.svg"},
	} {
		if got := (&chart{Chart: tc.chart, Backend: tc.backend}).File(); got != tc.want {
			t.Errorf("File(%q, %q) = %q, want %q", tc.chart, tc.backend, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{77027.4, "77027"}, {123.6, "124"}, {13, "13.0"}, {1.9, "1.90"}, {0.55, "0.550"}, {0.0123, "0.0123"}, {0, "0"}} {
		if got := fmtNum(tc.v); got != tc.want {
			t.Errorf("fmtNum(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestSample draws the sample records and checks what each SVG and the page say.
func TestSample(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-in", sample, "-out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	lines, err := readFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := group(lines, sample)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, c := range cs {
		files = append(files, c.File())
	}
	want := []string{"throughput-sqlite.svg", "throughput-mariadb.svg", "throughput-rabbitmq.svg", "scaling-postgres.svg", "backlog-nats.svg", "latency-postgres.svg"}
	if !slices.Equal(files, want) {
		t.Fatalf("charts %v, want %v (throughput, scaling, backlog, latency; backends as recorded)", files, want)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if wantAll := append(slices.Sorted(slices.Values(want)), "README.md"); !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(wantAll))) {
		t.Errorf("%s holds %v, want %v (no temporary file left)", out, names, wantAll)
	}
	for _, c := range cs {
		b, err := os.ReadFile(filepath.Join(out, c.File()))
		if err != nil {
			t.Fatal(err)
		}
		svg := string(b)
		if !strings.Contains(svg, "<svg") || !strings.HasSuffix(strings.TrimSpace(svg), "</svg>") {
			t.Errorf("%s is not an SVG document", c.File())
		}
		texts := []string{c.Title(), c.Caption(), c.Unit}
		for _, s := range c.Series {
			texts = append(texts, s.Name)
		}
		for _, s := range texts {
			if !strings.Contains(svg, ">"+html.EscapeString(s)+"<") {
				t.Errorf("%s has no text %q", c.File(), s)
			}
		}
	}
	if !strings.Contains(string(mustRead(t, filepath.Join(out, "latency-postgres.svg"))), ">p99.9<") {
		t.Errorf("latency-postgres.svg: no p99.9 on the percentile axis")
	}

	page := string(mustRead(t, filepath.Join(out, "README.md")))
	for _, s := range []string{
		"## throughput — sqlite\n\nrun 2026-12-01 09:30 UTC · 2 vCPUs, linux/amd64 · load average 1.2–2.1 · medians of 1–4 rounds, error bars min–max\n\n![throughput — sqlite](throughput-sqlite.svg)\n",
		"| series | msgs/s (median) | range | ÷raw |\n| --- | ---: | ---: | ---: |\n",
		"| raw lease | 77000 | 75000–80000 | — |\n",
		"| settle lease, defaults | 71000 | 69000–74000 | 0.92 |\n",
		"| settle lease, BatchSize(100) | 73000 | 73000–73000 | 0.95 |\n",
		"| series | msgs/s (median) | range | ÷raw | raw loop |\n",
		"| settle lease (4 subs×1 worker) | 52000 | 49000–55000 | 0.93 | raw lease (w=4, B=100) |\n",
		"| series | workers | msgs/s (median) | range | ÷raw |\n",
		"| settle lease | 2 | 64000 | 63000–66000 | 0.91 |\n",
		"| River | 4 | 22000 | 21000–23000 | 0.22 |\n",
		"| settle | 10000 | 0.620 | 0.600–0.700 | 1.13 |\n",
		"| series | percentile | ms (median) | range |\n",
		"| River | 99.9 | 45.0 | 40.0–52.0 |\n",
		"load average unknown",
		"![latency — postgres](latency-postgres.svg)",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("README.md has no %q:\n%s", s, page)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout without -md: %q", stdout.String())
	}

	// Drawn again from the same records, every file is the same.
	again := t.TempDir()
	if err := run([]string{"-in", sample, "-out", again}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(want, "README.md") {
		if !bytes.Equal(mustRead(t, filepath.Join(out, name)), mustRead(t, filepath.Join(again, name))) {
			t.Errorf("%s differs between two drawings of the same records", name)
		}
	}
}

func TestMarkdownToStdout(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "charts")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-in", sample, "-out", out, "-md", "-base", dir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "![scaling — postgres](charts/scaling-postgres.svg)") {
		t.Errorf("-md -base: no link relative to the base:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, "README.md")); !os.IsNotExist(err) {
		t.Errorf("-md wrote README.md (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(out, "scaling-postgres.svg")); err != nil {
		t.Errorf("-md drew no SVG: %v", err)
	}
}

func TestPrune(t *testing.T) {
	for _, prune := range []bool{false, true} {
		out := t.TempDir()
		for _, f := range []string{"old-backend.svg", "notes.txt"} {
			if err := os.WriteFile(filepath.Join(out, f), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"-in", sample, "-out", out}
		if prune {
			args = append(args, "-prune")
		}
		if err := run(args, new(bytes.Buffer), new(bytes.Buffer)); err != nil {
			t.Fatal(err)
		}
		_, err := os.Stat(filepath.Join(out, "old-backend.svg"))
		if gone := os.IsNotExist(err); gone != prune {
			t.Errorf("-prune=%v: stale SVG removed: %v", prune, gone)
		}
		if _, err := os.Stat(filepath.Join(out, "notes.txt")); err != nil {
			t.Errorf("-prune=%v removed a file that is no SVG: %v", prune, err)
		}
		if _, err := os.Stat(filepath.Join(out, "throughput-sqlite.svg")); err != nil {
			t.Errorf("-prune=%v: %v", prune, err)
		}
	}
}

// TestBadInput: each error names the line and the field, and nothing is written, not even over
// the previous run's files.
func TestBadInput(t *testing.T) {
	good := rec(t, "throughput", "sqlite", "raw", "", 0, "msgs/s", 1, 1, 2)
	for _, tc := range []struct {
		name string
		line string // the second line, after good
		want []string
	}{
		{"malformed JSON", `{"date": "2026-12-01T09:30:00Z", "chart": `, []string{"line 2:", "malformed JSON"}},
		{"two objects", good + good, []string{"line 2:", "malformed JSON"}},
		{"not an object", `[1, 2]`, []string{"line 2:", "JSON object"}},
		{"string for a number", strings.Replace(good, `"load":1`, `"load":"high"`, 1), []string{"line 2:", `field "load"`, "a number"}},
		{"string in values", strings.Replace(good, `"values":[1,2]`, `"values":[1,"fast"]`, 1), []string{"line 2:", `field "values"`}},
		{"empty values", strings.Replace(good, `"values":[1,2]`, `"values":[]`, 1), []string{"line 2:", `field "values"`, "empty"}},
		{"no values", strings.Replace(good, `,"values":[1,2]`, ``, 1), []string{"line 2:", `field "values"`}},
		{"null values", strings.Replace(good, `"values":[1,2]`, `"values":null`, 1), []string{"line 2:", `field "values"`}},
		{"no chart", strings.Replace(good, `"chart":"throughput"`, `"chart":""`, 1), []string{"line 2:", `field "chart"`}},
		{"no series", strings.Replace(good, `"series":"raw",`, ``, 1), []string{"line 2:", `field "series"`}},
		{"bad date", strings.Replace(good, `2026-12-01T09:30:00Z`, `yesterday`, 1), []string{"line 2:", `field "date"`}},
		{"units mixed", rec(t, "throughput", "sqlite", "settle", "", 0, "ms", 1, 1), []string{"line 2:", `field "unit"`, `"ms"`, `"msgs/s"`, "line 1"}},
		{"x axes mixed", rec(t, "throughput", "sqlite", "settle", "workers", 4, "msgs/s", 1, 1), []string{"line 2:", `field "x_name"`}},
		{"recorded twice", good, []string{"line 2:", `field "series"`, "line 1"}},
		{"same file name", rec(t, "Throughput", "SQLite", "raw", "", 0, "msgs/s", 1, 1), []string{"line 2:", "throughput-sqlite.svg", "line 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "records.jsonl")
			if err := os.WriteFile(in, []byte(good+"\n"+tc.line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "charts")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "README.md"), []byte("previous"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := run([]string{"-in", in, "-out", out}, new(bytes.Buffer), new(bytes.Buffer))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "records.jsonl line 2: ") {
				t.Errorf("error %q does not start with the file and line", err)
			}
			entries, _ := os.ReadDir(out)
			if len(entries) != 1 || string(mustRead(t, filepath.Join(out, "README.md"))) != "previous" {
				t.Errorf("bad input changed %s: %v", out, entries)
			}
		})
	}
}

func TestNoInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "records.jsonl")
	if err := os.WriteFile(empty, []byte("\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-in", empty, "-out", dir}, "records.jsonl: no records"},
		{[]string{"-in", filepath.Join(dir, "missing.jsonl"), "-out", dir}, "missing.jsonl"},
		{[]string{"-out", dir}, "usage"},
		{[]string{"-in", empty}, "usage"},
	} {
		err := run(tc.args, new(bytes.Buffer), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
