package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// settle stats counts the messages a NATS stream holds and will never deliver again, settle
// stranded lists them, and settle stranded repair moves them — to the dead letter by default,
// whence they are redriven like any dead letter — refusing what is not stranded and nothing
// given.
func TestStrandedCommands(t *testing.T) {
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	if err != nil {
		coretest.ServerUnavailable(t, "NATS", natsURL+" (SETTLE_TEST_NATS_URL)", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	name := unique("settle_cli_")
	subject, dead, stream := name+".work", name+".work.dead", name+"_work"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name + "_dead", Subjects: []string{dead}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = js.DeleteStream(context.Background(), name+"_dead")
		_ = js.DeleteStream(context.Background(), stream)
	})
	seq, err := natstest.Strand(ctx, js, stream, subject)
	if err != nil {
		t.Fatal(err)
	}
	target := []string{"--dsn", natsURL, "--queue", subject}
	withDead := append(append([]string(nil), target...), "--dead", dead)
	cmd := func(base []string, args ...string) []string { return append(args, base...) }

	code, out, errOut := settle(t, cmd(withDead, "stats", "--json")...)
	var st statsOut
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Stranded != 1 {
		t.Fatalf("stats --json: exit %d, %s%s; want 1 stranded", code, out, errOut)
	}
	code, out, _ = settle(t, cmd(withDead, "stats")...)
	if code != exitOK || !strings.Contains(out, subject+": 1 stranded: held by the stream, never delivered again (settle stranded)") {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
	code, out, _ = settle(t, cmd(target, "stranded")...)
	if code != exitOK || !strings.Contains(out, "never delivered again") || !strings.Contains(out, stream+":"+strconv.FormatUint(seq, 10)) || !strings.Contains(out, "stuck") {
		t.Errorf("stranded: exit %d\n%s", code, out)
	}
	code, out, _ = settle(t, cmd(target, "stranded", "ls", "--json")...)
	var page strandedOut
	if code != exitOK || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 1 || page.Items[0].Seq != seq ||
		page.Items[0].Payload == nil || *page.Items[0].Payload != "stuck" || page.Stream != stream || page.AckFloor < seq {
		t.Errorf("stranded ls --json: exit %d\n%s", code, out)
	}

	for _, bad := range [][]string{
		cmd(target, "stranded", "repair", "--all"),                      // no dead letter named, no --to
		cmd(withDead, "stranded", "repair"),                             // nothing selected
		cmd(withDead, "stranded", "repair", "--all", "1"),               // both
		cmd(withDead, "stranded", "repair", "--all", "--to", "nowhere"), // no such place
		cmd(withDead, "stranded", "repair", "x"),                        // not a sequence
	} {
		if code, _, errOut := settle(t, bad...); code != exitUsage {
			t.Errorf("%v: exit %d (%s); want %d", bad, code, errOut, exitUsage)
		}
	}
	code, _, errOut = settle(t, cmd(withDead, "stranded", "repair", strconv.FormatUint(seq+1, 10))...)
	if code != exitNotFound || !strings.Contains(errOut, "not a stranded message") {
		t.Errorf("repair of an acknowledged sequence: exit %d, %s; want %d", code, errOut, exitNotFound)
	}
	code, _, errOut = settle(t, "stranded", "--dsn", "sqlite:///nonexistent.db", "--table", "jobs")
	if code != exitUsage || !strings.Contains(errOut, "only NATS JetStream strands messages") {
		t.Errorf("stranded on SQLite: exit %d, %s; want %d", code, errOut, exitUsage)
	}

	code, out, errOut = settle(t, cmd(withDead, "stranded", "repair", "--all", "-v")...)
	if code != exitOK || !strings.Contains(out, "moved 1 stranded message to the dead letter (all stranded)") || !strings.Contains(errOut, "moved "+strconv.FormatUint(seq, 10)) {
		t.Fatalf("stranded repair --all: exit %d, %s%s", code, out, errOut)
	}
	code, out, _ = settle(t, cmd(withDead, "dead", "ls", "--reason", "stranded", "--json")...)
	var dl pageOut
	if code != exitOK || json.Unmarshal([]byte(out), &dl) != nil || len(dl.Items) != 1 || dl.Items[0].Origin != subject {
		t.Fatalf("dead ls --reason stranded: exit %d\n%s", code, out)
	}
	code, out, _ = settle(t, cmd(withDead, "dead", "redrive", "--reason", "stranded")...)
	if code != exitOK || !strings.Contains(out, "redriven 1 dead letter") {
		t.Fatalf("dead redrive: exit %d\n%s", code, out)
	}
	code, out, _ = settle(t, cmd(withDead, "stats", "--json")...)
	st = statsOut{}
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Stranded != 0 || st.Ready == nil || *st.Ready != 1 || *st.Dead != 0 {
		t.Fatalf("stats after the repair and the redrive: exit %d\n%s; want nothing stranded or dead, 1 ready", code, out)
	}
}
