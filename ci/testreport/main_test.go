package main

import (
	"strings"
	"testing"
)

// Two parallel subtests skip with different reasons; their lines interleave in the output,
// and each skip keeps its own reason.
func TestSkipReasonsPairedWithTheirTest(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"T"}`,
		`{"Action":"run","Package":"p","Test":"T/pg"}`,
		`{"Action":"run","Package":"p","Test":"T/amqp"}`,
		`{"Action":"output","Package":"p","Test":"T/amqp","Output":"    backend_test.go:33: RabbitMQ at amqp://127.0.0.1:5672/ unreachable\n"}`,
		`{"Action":"output","Package":"p","Test":"T/pg","Output":"    setup_test.go:59: PostgreSQL at postgres://127.0.0.1:5432/test unreachable\n"}`,
		`{"Action":"output","Package":"p","Test":"T/amqp","Output":"--- SKIP: T/amqp (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"T/amqp"}`,
		`{"Action":"output","Package":"p","Test":"T/pg","Output":"--- SKIP: T/pg (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"T/pg"}`,
		`{"Action":"pass","Package":"p","Test":"T"}`,
		`{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}`,
		`{"Action":"pass","Package":"p"}`,
	}, "\n")
	var out strings.Builder
	failed, counts := report(strings.NewReader(in), &out, false)
	if failed || counts != "1 0 2\n" {
		t.Fatalf("failed=%v counts=%q", failed, counts)
	}
	for _, want := range []string{
		"skipped T/amqp: backend_test.go:33: RabbitMQ at amqp://127.0.0.1:5672/ unreachable",
		"skipped T/pg: setup_test.go:59: PostgreSQL at postgres://127.0.0.1:5432/test unreachable",
		"ok  \tp\t0.1s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFailurePrintsTheFailingTestsOutput(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"A"}`,
		`{"Action":"run","Package":"p","Test":"B"}`,
		`{"Action":"output","Package":"p","Test":"A","Output":"    a_test.go:1: fine\n"}`,
		`{"Action":"output","Package":"p","Test":"B","Output":"    b_test.go:2: broke\n"}`,
		`{"Action":"pass","Package":"p","Test":"A"}`,
		`{"Action":"fail","Package":"p","Test":"B"}`,
		`{"Action":"fail","Package":"p"}`,
	}, "\n")
	var out strings.Builder
	failed, counts := report(strings.NewReader(in), &out, false)
	if !failed || counts != "1 1 0\n" {
		t.Fatalf("failed=%v counts=%q", failed, counts)
	}
	if !strings.Contains(out.String(), "--- FAIL: B (p)\n    b_test.go:2: broke") || strings.Contains(out.String(), "fine") {
		t.Fatalf("report:\n%s", out.String())
	}
}

// go test failed without a failing test event (the binary did not build, say): the report fails
// and shows what go test printed.
func TestExitStatusWithoutEvents(t *testing.T) {
	var out strings.Builder
	failed, _ := report(strings.NewReader("# p\n./x.go:1:1: syntax error\n"), &out, true)
	if !failed || !strings.Contains(out.String(), "syntax error") {
		t.Fatalf("failed=%v report:\n%s", failed, out.String())
	}
}
