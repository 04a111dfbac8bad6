package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// varzServer starts an embedded nats-server whose application account imports the system
// account's VARZ request, so a client of it can read the server's JetStream settings, syncing
// every write when always; it returns the application user's URL.
func varzServer(t *testing.T, always bool) string {
	t.Helper()
	dir := t.TempDir()
	sync := ""
	if always {
		sync = "sync_interval: always"
	}
	conf := fmt.Sprintf(`listen: "127.0.0.1:-1"
server_name: settle-varz
jetstream { store_dir: %q
  %s
}
accounts {
  SYS: { users: [{user: sys, password: sys}], exports: [{service: "$SYS.REQ.SERVER.*.VARZ"}] }
  APP: { jetstream: enabled, users: [{user: app, password: app}], imports: [{service: {account: SYS, subject: "$SYS.REQ.SERVER.*.VARZ"}}] }
}
system_account: SYS
`, filepath.Join(dir, "store"), sync)
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o.NoLog, o.NoSigs = true, true
	s, err := natsserver.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready within 10s")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return fmt.Sprintf("nats://app:app@%s", s.Addr().String())
}

// A subscription whose stream has one replica says at start, in one line, when the server does
// not sync every write: a warning when settle can tell — a 2.9 server (its version), a 2.10+ one
// whose VARZ it can read — and an info line when it cannot (a 2.10+ server whose system account
// it cannot reach); nothing when the server syncs every write, or the stream is replicated.
func TestDurabilityWarnedAtStart(t *testing.T) {
	const (
		warn29     = "nats: the queue's stream has one replica on a nats-server before 2.10, which writes JetStream to disk in the background and cannot sync every write: a crash of the server, even of its process alone, can forget acknowledgements it confirmed (those messages are handled again) and strand messages below the consumer's ack floor (settle stranded); run 2.10 or later with sync_interval: always, or three replicas (docs/choosing.md)"
		warn       = "nats: the queue's stream has one replica on a server that does not sync every write to disk: a power loss or an operating-system crash can lose what it wrote since its last sync, acknowledgements it confirmed included (handled again, or messages stranded below the consumer's ack floor: settle stranded); set sync_interval: always, or three replicas (docs/choosing.md)"
		cannotTell = "nats: the queue's stream has one replica, and settle cannot read whether the server syncs every write to disk (its VARZ needs the system account); unless it runs with sync_interval: always, a power loss can lose acknowledgements it confirmed and strand messages (docs/choosing.md)"
	)
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		log  string // the one line expected; "" none
		attr string // its sync attribute
	}{
		{"2.9", realServer29, warn29, "background, no setting"},
		{"embedded without VARZ", func(*testing.T) string { return embedded.URL() }, cannotTell, ""},
		{"VARZ, background sync", func(t *testing.T) string { return varzServer(t, false) }, warn, "every 2m0s"},
		{"VARZ, sync always", func(t *testing.T) string { return varzServer(t, true) }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.url(t), clock.Real(), natsjs.DeclareTopology(true))
			if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error { return nil },
				core.WithCodec(core.Raw)); err != nil {
				t.Fatal(err)
			}
			r.mustStart()
			r.stop()
			all := append(append(r.logs.Find(warn29), r.logs.Find(warn)...), r.logs.Find(cannotTell)...)
			if tc.log == "" {
				if len(all) != 0 {
					t.Fatalf("durability lines %+v; want none", all)
				}
				return
			}
			if len(all) != 1 || all[0].Message != tc.log || all[0].Attrs["stream"] != r.stream("work") || all[0].Attrs["replicas"] != int64(1) {
				t.Fatalf("durability lines %+v; want one %q naming stream %s", all, tc.log, r.stream("work"))
			}
			if tc.attr != "" && all[0].Attrs["sync"] != tc.attr {
				t.Fatalf("sync %v; want %q", all[0].Attrs["sync"], tc.attr)
			}
			t.Logf("%s: %s %v", all[0].Level, all[0].Message, all[0].Attrs)
		})
	}
	t.Run("memory stream", func(t *testing.T) {
		r := newRig(t, embedded.URL(), clock.Real(), natsjs.DeclareTopology(true))
		if err := core.Subscribe(r.app, r.queue("work", natsjs.Storage(jetstream.MemoryStorage)), func(context.Context, *core.Message[string]) error { return nil },
			core.WithCodec(core.Raw)); err != nil {
			t.Fatal(err)
		}
		r.mustStart()
		r.stop()
		if all := append(r.logs.Find(warn), r.logs.Find(cannotTell)...); len(all) != 0 {
			t.Fatalf("durability lines for a memory stream %+v; want none (no disk writes to sync)", all)
		}
	})
}

// realServer29 is the real server's URL when it is a nats-server before 2.10 (the CI machine's
// 2.9); it skips otherwise (a later one is covered by the embedded cases).
func realServer29(t *testing.T) string {
	url := realServer(t)
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if v := nc.ConnectedServerVersion(); !strings.HasPrefix(v, "2.9.") && !strings.HasPrefix(v, "2.8.") {
		t.Skipf("the real server is %s, not before 2.10: the embedded cases cover it", v)
	}
	return url
}
