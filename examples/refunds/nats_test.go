package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// checkNATSDemo asserts where every sample ended, what the dead-letter reader logged, and that
// both streams are empty afterwards.
func checkNATSDemo(t *testing.T, url, summary string, logs *coretest.Logs, s NATSSubjects) {
	t.Helper()
	want := map[string]string{
		"r-ok-1": "1  refunded", "r-ok-2": "1  refunded",
		"r-closed-1": "1  declined, dropped", "r-closed-2": "1  declined, dropped",
		"r-busy-1": "5  dead letter (" + s.RefundsDead + ")", "r-busy-2": "5  dead letter (" + s.RefundsDead + ")",
		"r-down-1": "5  dead letter (" + s.RefundsDead + ")", "r-down-2": "5  dead letter (" + s.RefundsDead + ")",
	}
	for ref, w := range want {
		if line := summaryLine(summary, ref); !strings.HasSuffix(line, w) {
			t.Errorf("summary line for %s = %q; want it to end %q\n%s", ref, line, w, summary)
		}
	}
	dead := logs.Find("dead letter: refund gave up")
	if len(dead) != 4 {
		t.Fatalf("dead letters logged: %d; want 4", len(dead))
	}
	for _, r := range dead {
		ref := r.Attrs["ref"].(string)
		cause := map[bool]string{true: ErrBusy.Error(), false: ErrUnavailable.Error()}[strings.HasPrefix(ref, "r-busy")]
		if r.Attrs["attempts"] != int64(MaxAttempts) || !strings.Contains(r.Attrs["last_error"].(string), cause) {
			t.Errorf("dead letter %v logged attempts %v, last error %q; want %d and %q", ref, r.Attrs["attempts"], r.Attrs["last_error"], MaxAttempts, cause)
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, subj := range []string{s.Refunds, s.RefundsDead} {
		name := strings.NewReplacer(".", "_").Replace(subj)
		st, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("stream %s holds %d messages after the demo", name, n)
		}
	}
}

// TestNATSDemoEmbedded runs the demo on an in-process nats-server: busy refunds wait their
// backoff (10ms doubled) on the server, the fifth failure moves a refund to refunds.dead, whose
// reader logs the count and the cause from the copy's headers.
func TestNATSDemoEmbedded(t *testing.T) {
	srv := natstest.New(t)
	logs := &coretest.Logs{}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := RunNATS(ctx, Config{Backoff: 10 * time.Millisecond}, srv.URL(), &out, slog.New(logs)); err != nil {
		t.Fatalf("RunNATS: %v\n%s", err, out.String())
	}
	checkNATSDemo(t, srv.URL(), out.String(), logs, NATSSubjectsWith(""))
}

// TestNATSDemoRealServer runs the demo once on the real NATS server, on subjects of its own (a
// prefix), and deletes its streams afterwards.
func TestNATSDemoRealServer(t *testing.T) {
	url := coretest.Env("SETTLE_TEST_NATS_URL", "nats://127.0.0.1:4222")
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	if err != nil {
		coretest.ServerUnavailable(t, "NATS", url+" (SETTLE_TEST_NATS_URL)", err)
	}
	t.Cleanup(nc.Close) // after the streams are deleted (cleanups run last first)
	js, _ := jetstream.New(nc)
	prefix := "settle-example-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "."
	s := NATSSubjectsWith(prefix)
	t.Cleanup(func() {
		for _, subj := range []string{s.Refunds, s.RefundsDead} {
			err := js.DeleteStream(context.Background(), strings.NewReplacer(".", "_").Replace(subj))
			if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete stream of %s: %v", subj, err)
			}
		}
	})
	logs := &coretest.Logs{}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := RunNATS(ctx, Config{Backoff: 10 * time.Millisecond, Prefix: prefix}, url, &out, slog.New(logs)); err != nil {
		t.Fatalf("RunNATS: %v\n%s", err, out.String())
	}
	checkNATSDemo(t, url, out.String(), logs, s)
}
