package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAsyncAPIRunsTheProgram: the program gets SETTLE_ASYNCAPI naming a file in the format asked,
// and what it writes there is the output; what it prints goes to standard error.
func TestAsyncAPIRunsTheProgram(t *testing.T) {
	write := `echo "the program says hello"; printf 'asyncapi: 3.0.0\nfile: %s\n' "$(basename "$SETTLE_ASYNCAPI")" > "$SETTLE_ASYNCAPI"`
	code, out, errOut := settle(t, "asyncapi", "--", "sh", "-c", write)
	if code != exitOK || out != "asyncapi: 3.0.0\nfile: asyncapi.yaml\n" || !strings.Contains(errOut, "the program says hello") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	dest := filepath.Join(t.TempDir(), "doc.json")
	code, out, errOut = settle(t, "asyncapi", "--out", dest, "--", "sh", "-c", write)
	got, err := os.ReadFile(dest)
	if code != exitOK || out != "" || err != nil || string(got) != "asyncapi: 3.0.0\nfile: asyncapi.json\n" {
		t.Errorf("--out doc.json: exit %d, stdout %q, stderr %q, file %q (%v)", code, out, errOut, got, err)
	}
	code, out, _ = settle(t, "asyncapi", "--format", "json", "--", "sh", "-c", write)
	if code != exitOK || !strings.Contains(out, "asyncapi.json") {
		t.Errorf("--format json: exit %d, stdout %q", code, out)
	}
}

func TestAsyncAPIReportsWhatWentWrong(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"asyncapi"}, exitUsage, "name the program after --"},
		{[]string{"asyncapi", "--format", "xml", "--", "true"}, exitUsage, `--format "xml"`},
		{[]string{"asyncapi", "--", "true"}, exitFailed, "exited without writing its document: the program must call asyncapi.Export"},
		{[]string{"asyncapi", "--", "sh", "-c", "exit 3"}, exitFailed, "exit status 3"},
		{[]string{"asyncapi", "--", filepath.Join(t.TempDir(), "no-such-program")}, exitFailed, "no-such-program"},
	}
	for _, c := range cases {
		code, out, errOut := settle(t, c.args...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
}

// TestAsyncAPIOfTheRefundsExample runs the example service the way the docs say and compares
// its document with the one the repository commits.
func TestAsyncAPIOfTheRefundsExample(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the refunds example")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the example with: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "docs", "asyncapi", "refunds-rabbitmq.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := settle(t, "asyncapi", "--", goTool, "-C", root, "run", "./examples/refunds", "-amqp", "amqp://guest:guest@127.0.0.1:5672/")
	if code != exitOK || out != string(want) {
		t.Errorf("exit %d, stderr %s\nthe document differs from docs/asyncapi/refunds-rabbitmq.yaml:\n%s", code, errOut, out)
	}
}
