// Command testreport reads `go test -json` on standard input and prints what ci/test.sh shows of
// one module: each package's result line, every skipped test with its own skip reason, and every
// failure in full. Parallel subtests print interleaved, so lines are paired with their test
// through the JSON events, never by their order in the output.
//
//	go test -json ./... >LOG; testreport -counts FILE -exit $? <LOG
//
// It writes "PASSED FAILED SKIPPED" (tests and subtests) to FILE and exits 1 when a test or a
// package failed, or go test exited with a non-zero -exit (then it also prints every line that
// was not a JSON event: what go test said outside the tests).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Output     string
}

type key struct{ pkg, test string }

// logLine is a t.Log/t.Skip line: indented "file.go:N: text".
var logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: `)

func main() {
	countsFile := flag.String("counts", "", "file to write the counts to")
	exit := flag.Int("exit", 0, "go test's exit status")
	flag.Parse()
	failed, counts := report(os.Stdin, os.Stdout, *exit != 0)
	if *countsFile != "" {
		if err := os.WriteFile(*countsFile, []byte(counts), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
	}
	if failed {
		os.Exit(1)
	}
}

func report(in io.Reader, out io.Writer, exitFailed bool) (failed bool, counts string) {
	output := map[key][]string{} // every line a test (or a package, test "") printed
	var order []key              // tests in the order they ended
	result := map[key]string{}
	var raw []string // lines that are not JSON (a build error printed before any event)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			raw = append(raw, line)
			continue
		}
		if e.Package == "" {
			e.Package = e.ImportPath
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			output[k] = append(output[k], strings.TrimRight(e.Output, "\n"))
		case "pass", "fail", "skip":
			result[k] = e.Action
			order = append(order, k)
		case "build-fail":
			result[k] = "fail"
			order = append(order, k)
		}
	}
	var pass, fail, skip int
	for _, k := range order {
		if k.test == "" {
			continue
		}
		switch result[k] {
		case "pass":
			pass++
		case "fail":
			fail++
		case "skip":
			skip++
		}
	}
	failed = exitFailed
	for _, k := range order {
		if result[k] == "fail" {
			failed = true
		}
	}
	// Package results, in the order packages ended.
	for _, k := range order {
		if k.test != "" {
			continue
		}
		for _, l := range output[k] {
			if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "?") {
				fmt.Fprintln(out, l)
			}
		}
	}
	for _, k := range order {
		if k.test != "" && result[k] == "skip" {
			fmt.Fprintf(out, "  skipped %s: %s\n", k.test, reason(output[k]))
		}
	}
	if failed {
		fmt.Fprintln(out)
		for _, l := range raw {
			fmt.Fprintln(out, l)
		}
		for _, k := range order {
			if result[k] != "fail" {
				continue
			}
			if k.test == "" {
				fmt.Fprintf(out, "--- package %s failed; its own output:\n", k.pkg)
			} else {
				// A parent fails with its failing subtest: its own lines are few, the subtest's
				// are printed under the subtest.
				fmt.Fprintf(out, "--- FAIL: %s (%s)\n", k.test, k.pkg)
			}
			for _, l := range output[k] {
				if !framework(l) {
					fmt.Fprintln(out, l)
				}
			}
		}
	}
	return failed, fmt.Sprintf("%d %d %d\n", pass, fail, skip)
}

// framework reports whether l is a line the test runner itself prints around a test.
func framework(l string) bool {
	t := strings.TrimSpace(l)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP", "--- FAIL", "PASS", "FAIL"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// reason returns the last log message of a skipped test (the t.Skip text, with the lines of a
// message that spans several), or "(no reason given)".
func reason(lines []string) string {
	lines = slices.DeleteFunc(slices.Clone(lines), framework)
	for i := len(lines) - 1; i >= 0; i-- {
		if logLine.MatchString(lines[i]) {
			var msg []string
			for _, l := range lines[i:] {
				msg = append(msg, strings.TrimSpace(l))
			}
			return strings.Join(msg, " ")
		}
	}
	return "(no reason given)"
}
