package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Record is one measured point as bench/record_test.go writes it: one JSON object per line of
// $SETTLE_BENCH_RECORD. This is a copy of that type (the bench module is a test-only package
// inside the workspace, this tool is outside it); the JSON names are the contract. Fields the
// tool does not know are ignored, so bench can add one without breaking the charts.
type Record struct {
	Date    string    `json:"date"`    // RFC 3339, UTC, when the run started
	Machine string    `json:"machine"` // "2 vCPUs, linux/amd64"
	Load    float64   `json:"load"`    // 1-minute load average when the point was recorded, -1 unknown
	Chart   string    `json:"chart"`   // "throughput", "scaling", "backlog", "latency", "memory"
	Backend string    `json:"backend"` // "sqlite", "postgres", "mariadb", "rabbitmq", "nats"
	Series  string    `json:"series"`  // the contender
	XName   string    `json:"x_name"`  // what X is: "workers", "rows drained", "percentile", "" (none)
	X       float64   `json:"x"`
	Unit    string    `json:"unit"` // "msgs/s", "ms", "MiB", "allocs/msg"
	Values  []float64 `json:"values"`
}

// line is a record with where it came from, for errors and for the run's date.
type line struct {
	Record
	n    int       // line number, from 1
	date time.Time // Record.Date parsed
}

// inputError is bad input: the file, the line and what is wrong with it.
type inputError struct {
	file string
	line int
	msg  string
}

func (e *inputError) Error() string {
	if e.line == 0 {
		return fmt.Sprintf("%s: %s", e.file, e.msg)
	}
	return fmt.Sprintf("%s line %d: %s", e.file, e.line, e.msg)
}

// readFile reads the records of the file at path.
func readFile(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRecords(f, filepath.Base(path))
}

// readRecords reads one record per non-blank line of r and checks each: every field the charts
// need is present and well formed. name names r in errors.
func readRecords(r io.Reader, name string) ([]line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var out []line
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		l, msg := parseLine(b)
		if msg != "" {
			return nil, &inputError{name, n, msg}
		}
		l.n = n
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, &inputError{name, n + 1, err.Error()}
	}
	if len(out) == 0 {
		return nil, &inputError{file: name, msg: "no records (was SETTLE_BENCH_RECORD set for the benchmarks?)"}
	}
	return out, nil
}

// parseLine decodes and checks one line; msg says what is wrong, "" when nothing is.
func parseLine(b []byte) (l line, msg string) {
	if err := json.Unmarshal(b, &l.Record); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return l, fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ) && typ.Field != "":
			return l, fmt.Sprintf("field %q: got a JSON %s, want %s", jsonField(typ.Field), typ.Value, kind(typ.Type.String()))
		case errors.As(err, &typ):
			return l, fmt.Sprintf("malformed record: got a JSON %s, want a JSON object", typ.Value)
		default:
			return l, fmt.Sprintf("malformed JSON: %v", err)
		}
	}
	for _, f := range []struct{ name, v string }{
		{"date", l.Date}, {"machine", l.Machine}, {"chart", l.Chart},
		{"backend", l.Backend}, {"series", l.Series}, {"unit", l.Unit},
	} {
		if strings.TrimSpace(f.v) == "" {
			return l, fmt.Sprintf("field %q: missing or empty", f.name)
		}
	}
	d, err := time.Parse(time.RFC3339, l.Date)
	if err != nil {
		return l, fmt.Sprintf("field \"date\": %q is not an RFC 3339 time", l.Date)
	}
	l.date = d.UTC()
	if len(l.Values) == 0 {
		return l, `field "values": missing or empty (one value per round)`
	}
	return l, ""
}

// jsonField turns a decoder's field path ("values" or "values.2" in some versions) into the
// record's field name.
func jsonField(path string) string {
	name, _, _ := strings.Cut(path, ".")
	return name
}

// kind names a Go type the way a record's author thinks of it.
func kind(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "float64":
		return "a number"
	case "[]float64":
		return "an array of numbers"
	}
	return goType
}
