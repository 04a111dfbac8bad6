package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// demoBlock returns the README's CLI demo: its commands (the lines after "$ ") and the output
// shown after each.
func demoBlock(t *testing.T, readme string) (cmds []string, outs [][]string) {
	start := strings.Index(readme, "```console\n$ go run ./examples/refunds")
	if start < 0 {
		t.Fatal("README.md has no CLI demo starting with $ go run ./examples/refunds")
	}
	block := readme[start+len("```console\n"):]
	block = block[:strings.Index(block, "```")]
	for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		if c, ok := strings.CutPrefix(line, "$ "); ok {
			cmds = append(cmds, c)
			outs = append(outs, nil)
			continue
		}
		outs[len(outs)-1] = append(outs[len(outs)-1], line)
	}
	return cmds, outs
}

// What changes from run to run: times, ages, the drawn backoff delays.
var (
	demoTime  = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`)
	demoAge   = regexp.MustCompile(`(^|\s)(\d+(ms|s)|\d+m\d+s|\d+h\d+m|-)(\s|$)`)
	demoDelay = regexp.MustCompile(`retry_after\([^)]*\)`)
)

func normalize(line string) string {
	line = demoTime.ReplaceAllString(line, "TIME")
	line = demoDelay.ReplaceAllString(line, "retry_after(D)")
	line = demoAge.ReplaceAllString(line, "${1}AGE${4}")
	return strings.Join(strings.Fields(line), " ")
}

// TestREADMEDemo runs the README's CLI demo against the refunds example's database: the example
// with -keep-dead into a temporary file, then each settle command through the command's
// harness, and compares what they print with what the README shows.
func TestREADMEDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the refunds example")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to run the example with: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, outs := demoBlock(t, string(readme))
	if len(cmds) < 3 {
		t.Fatalf("the demo has %d commands, want the example and settle commands", len(cmds))
	}
	db := filepath.Join(t.TempDir(), "refunds.db")
	for i, c := range cmds {
		args := strings.Fields(strings.ReplaceAll(c, "/tmp/refunds.db", db))
		if args[0] == "go" {
			cmd := exec.Command(goTool, args[1:]...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "dead letters kept") {
				t.Fatalf("%s: %v\n%s", c, err, out)
			}
			continue
		}
		if args[0] != "settle" {
			t.Fatalf("the demo runs %q, neither the example nor settle", c)
		}
		code, out, errOut := settle(t, args[1:]...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", c, code, out, errOut)
		}
		var got, want []string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			got = append(got, normalize(strings.ReplaceAll(l, db, "/tmp/refunds.db")))
		}
		for _, l := range outs[i] {
			want = append(want, normalize(l))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s prints\n%s\nthe README shows\n%s", c, out, strings.Join(outs[i], "\n"))
		}
	}
}
